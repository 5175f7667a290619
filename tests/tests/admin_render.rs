#![allow(clippy::unwrap_used)]
//! `POST /admin/render` and a pool's `chat_template` override (issue 40, item 5): two pools
//! share one tokenizer and template file, one of them with a template override. The render
//! shows each pool's own prompt text and ids; Messages and Responses bodies render to the
//! ids of their chat equivalent; and the cached tokens render predicts for a replica are
//! the `x-warmpath-predicted-cached-tokens` the same request then gets from it.

use serde_json::{json, Value};
use warmpath_e2e::openai_upstream::OpenAiUpstream;
use warmpath_e2e::{http, GatewayProc};

const ADMIN_KEY: &str = "render-admin-key";
const QWEN25: &str = "text/tests/data/templates/Qwen-Qwen2.5-7B-Instruct.jinja";
const PLAIN: &str = "{% for m in messages %}<<{{ m.role }}>> {{ m.content }}\n{% endfor %}\
                     {% if add_generation_prompt %}<<assistant>> {% endif %}";

fn system() -> String {
    "You are a careful agent. Read every file before you change it, and say why. ".repeat(3)
}

fn chat(model: &str) -> Value {
    json!({"model": model, "max_tokens": 4, "messages": [
        {"role": "system", "content": system()},
        {"role": "user", "content": "Where is the prefix index rebuilt?"}]})
}

fn render(gw: &GatewayProc, body: Value) -> (u16, Value) {
    gw.admin_call("POST", "/admin/render", Some(&body))
        .expect("admin render")
}

fn ids(v: &Value) -> Vec<u64> {
    v["token_ids"]
        .as_array()
        .unwrap_or_else(|| panic!("no token_ids: {v}"))
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

#[test]
fn render_shows_the_pools_prompt_and_the_prediction_routing_uses() {
    let dir = std::env::temp_dir().join(format!("warmpath-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tok = dir.join("tokenizer.json");
    let spec = warmpath_text::bytelevel::chatml_bpe_spec();
    std::fs::write(&tok, serde_json::to_vec(&spec.tokenizer).unwrap()).unwrap();
    let plain = dir.join("plain.jinja");
    std::fs::write(&plain, PLAIN).unwrap();
    let qwen = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(QWEN25);
    let ups: Vec<OpenAiUpstream> = ["custom", "custom", "stock"]
        .iter()
        .map(|m| OpenAiUpstream::start(m))
        .collect();
    let tokenizer = format!(
        "{{hf: {{tokenizer: {}, template: {}}}}}",
        tok.display(),
        qwen.display()
    );
    let yaml = format!(
        "auth: {{enabled: false}}\npools:\n  \
         - {{name: custom, engine: openai, models: [custom], tokenizer: {tokenizer}, \
         chat_template: {}, upstreams: [{}, {}]}}\n  \
         - {{name: stock, engine: openai, models: [stock], tokenizer: {tokenizer}, \
         upstreams: [{}]}}\n",
        plain.display(),
        ups[0].url(),
        ups[1].url(),
        ups[2].url()
    );
    let gw = GatewayProc::spawn_with_admin_key(&yaml, &[], 3, ADMIN_KEY).expect("gateway");

    // Without the admin key: 401, as every admin route.
    let anon = http::post_json(
        &gw.admin,
        "/admin/render",
        &[("content-type", "application/json")],
        &json!({"body": chat("custom")}),
    )
    .unwrap();
    assert_eq!(anon.status, 401);

    // Each pool renders with its own template: the override, and the tokenizer's.
    let (s, custom) = render(&gw, json!({"pool": "custom", "body": chat("custom")}));
    assert_eq!(s, 200, "{custom}");
    let (s, stock) = render(&gw, json!({"pool": "stock", "body": chat("stock")}));
    assert_eq!(s, 200, "{stock}");
    let text = custom["prompt"].as_str().unwrap();
    assert!(
        text.starts_with("<<system>> You are a careful agent."),
        "{text}"
    );
    assert!(text.ends_with("<<assistant>> "), "{text}");
    let stock_text = stock["prompt"].as_str().unwrap();
    assert!(
        stock_text.starts_with("<|im_start|>system\n"),
        "{stock_text}"
    );
    assert_ne!(ids(&custom), ids(&stock));
    assert_eq!(custom["pool"], "custom");
    assert_eq!(custom["engine"], "openai");
    let n = ids(&custom).len();
    assert_eq!(custom["prompt_tokens"].as_u64().unwrap() as usize, n);
    assert!(n >= 64, "{n} tokens");
    let hashes = custom["block_hashes"].as_array().unwrap();
    assert_eq!(hashes.len(), n / 16);
    assert!(hashes.iter().all(|h| h.as_str().unwrap().len() == 16));
    // Nothing routed yet: no replica is predicted a cached token.
    let replicas = custom["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2);
    assert!(replicas.iter().all(|r| r["predicted_cached_tokens"] == 0));

    // The same chat as a Messages and as a Responses request: the same ids.
    let messages = json!({"model": "custom", "max_tokens": 4, "system": system(),
        "messages": [{"role": "user", "content": "Where is the prefix index rebuilt?"}]});
    let (s, m) = render(&gw, json!({"api": "messages", "body": messages}));
    assert_eq!(s, 200, "{m}");
    assert_eq!(ids(&m), ids(&custom));
    let responses = json!({"model": "custom", "instructions": system(),
        "input": "Where is the prefix index rebuilt?"});
    let (s, r) = render(&gw, json!({"body": responses}));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["api"], "responses");
    assert_eq!(ids(&r), ids(&custom));

    // Bad requests name what is wrong.
    let (s, e) = render(&gw, json!({"pool": "stock", "body": chat("custom")}));
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pool \"custom\""),
        "{e}"
    );
    let (s, e) = render(&gw, json!({"body": chat("nope")}));
    assert_eq!(s, 404, "{e}");
    let (s, e) = render(&gw, json!({"api": "xml", "body": chat("custom")}));
    assert_eq!(s, 400, "{e}");

    // Route it once: its replica now holds the prompt's blocks (routing history).
    let send =
        || http::post_json(&gw.addr, "/v1/chat/completions", &[], &chat("custom")).expect("chat");
    let first = send();
    assert_eq!(first.status, 200, "{}", first.text());
    let (_, after) = render(&gw, json!({"pool": "custom", "body": chat("custom")}));
    assert_eq!(ids(&after), ids(&custom));
    let predicted: Vec<(String, u64)> = after["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["replica"].as_str().unwrap().to_string(),
                r["predicted_cached_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    let warm = first.header("x-warmpath-replica").unwrap().to_string();
    for (replica, tokens) in &predicted {
        let want = if *replica == warm {
            (n / 16 * 16) as u64
        } else {
            0
        };
        assert_eq!(*tokens, want, "{after}");
    }
    // The next identical request gets exactly what render predicted for its replica.
    let second = send();
    assert_eq!(second.status, 200);
    let to = second.header("x-warmpath-replica").unwrap();
    let header: u64 = second
        .header("x-warmpath-predicted-cached-tokens")
        .unwrap()
        .parse()
        .unwrap();
    let rendered = predicted.iter().find(|(r, _)| r == to).unwrap().1;
    assert_eq!(header, rendered);
    assert!(header > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
