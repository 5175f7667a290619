#![allow(clippy::unwrap_used)]
//! Done-when (issue 23): the gateway in front of two real `llama-server` processes serving
//! SmolLM2, with `engine: llamacpp` and the GGUF file as the tokenizer.
//! - The OpenAI Python SDK works through it (models, chat, streaming).
//! - Shared-prefix requests follow the server that holds their prefix.
//! - llama-server's own reported cache reuse (`timings.cache_n`) is higher under `warm` than
//!   under `round_robin` on the same requests.
//!
//! Each server has five slots (`-np 5`) and no host-memory prompt cache (`--cache-ram 0`),
//! so what it can reuse is what its five slots hold. Six prefix groups arrive in a shuffled
//! order: they fit when prefix routing gives each server its own share of the groups (five
//! or fewer each: where a new group lands depends on the prefill rates the
//! servers report, which differ by noise on a shared machine), and thrash when every
//! server sees all six (round robin).

use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::process::Command;
use warmpath_e2e::fixtures::{auth_yaml, smollm2_model};
use warmpath_e2e::http::post_json;
use warmpath_e2e::llamacpp::LlamaServer;
use warmpath_e2e::GatewayProc;

const ALIAS: &str = "smollm2";
const KEY: &str = "sk-llama-test";

fn servers(model: &str) -> (LlamaServer, LlamaServer) {
    let flags = [
        "-np",
        "5",
        "-c",
        "8192",
        "-t",
        "1",
        "--cache-ram",
        "0",
        "-n",
        "8",
    ];
    (
        LlamaServer::spawn(model, ALIAS, &flags).expect("llama-server 1"),
        LlamaServer::spawn(model, ALIAS, &flags).expect("llama-server 2"),
    )
}

fn gateway(model: &str, a: &LlamaServer, b: &LlamaServer, policy: &str) -> GatewayProc {
    let yaml = format!(
        "{}policy: {{type: {policy}}}\n\
         pools:\n  - name: llama\n    engine: llamacpp\n    tokenizer: {{gguf: {model:?}}}\n\
         \x20   upstreams: [{}, {}]\n",
        auth_yaml(&[("t", KEY, "")]),
        a.url(),
        b.url()
    );
    GatewayProc::spawn(&yaml, &[], 2).expect("gateway")
}

/// A system prompt of a few hundred tokens, different per `tag`.
fn system_prompt(tag: &str) -> String {
    let mut s = format!("Team {tag} handbook. ");
    for i in 0..14 {
        s.push_str(&format!(
            "Rule {i} of team {tag}: answer briefly, cite the handbook, and never guess. "
        ));
    }
    s
}

struct Run {
    /// Repeat requests of a group that went to a server the group used before.
    followed: usize,
    repeats: usize,
    /// Sums over the repeat requests: engine-reported cached tokens, prompt tokens.
    cache_n: u64,
    prompt: u64,
}

fn run(gw: &GatewayProc, tag: &str) -> Run {
    const GROUPS: usize = 6;
    let groups: Vec<String> = (0..GROUPS).map(|g| format!("{tag}-{g}")).collect();
    // A fixed shuffle of five rounds over the groups, so no policy sees a regular pattern.
    let mut order: Vec<usize> = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..5 {
        let mut round: Vec<usize> = (0..GROUPS).collect();
        for i in (1..GROUPS).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            round.swap(i, (x % (i as u64 + 1)) as usize);
        }
        order.extend(round);
    }
    let mut homes: HashMap<usize, HashSet<String>> = HashMap::new();
    let mut r = Run {
        followed: 0,
        repeats: 0,
        cache_n: 0,
        prompt: 0,
    };
    for (i, &g) in order.iter().enumerate() {
        let body = json!({"model": ALIAS, "max_tokens": 2, "temperature": 0, "messages": [
            {"role": "system", "content": system_prompt(&groups[g])},
            {"role": "user", "content": format!("Question {i}: what is rule {}?", i % 7)}]});
        let auth = format!("Bearer {KEY}");
        let resp = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &[("authorization", &auth)],
            &body,
        )
        .unwrap();
        assert_eq!(resp.status, 200, "{}\n{}", resp.text(), gw.log());
        let server = resp.header("x-warmpath-replica").unwrap().to_string();
        let v = resp.json().unwrap();
        let seen = homes.entry(g).or_default();
        if !seen.is_empty() {
            r.repeats += 1;
            r.followed += usize::from(seen.contains(&server));
            r.cache_n += v["timings"]["cache_n"]
                .as_u64()
                .expect("llama-server reports timings.cache_n");
            r.prompt += v["usage"]["prompt_tokens"].as_u64().unwrap();
        }
        seen.insert(server);
    }
    eprintln!("{tag}: servers per group {homes:?}");
    r
}

#[test]
fn gateway_fronts_two_llama_servers() {
    let model = smollm2_model();
    let (a, b) = servers(&model);

    // Prefix routing: repeat requests follow their group's server, and the servers reuse
    // their slots' KV for them.
    let warm = {
        let gw = gateway(&model, &a, &b, "warm");

        // The official OpenAI SDK through the gateway: models, chat, streaming.
        let sdk = Command::new("python3")
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/sdk_check.py"))
            .arg(format!("http://{}/v1", gw.addr))
            .arg(KEY)
            .arg(ALIAS)
            .output()
            .expect("run python3 (scripts/ci-deps.sh installs the openai package)");
        assert!(
            sdk.status.success(),
            "sdk script failed: {}\n{}",
            String::from_utf8_lossy(&sdk.stderr),
            gw.log()
        );
        let v: serde_json::Value = serde_json::from_slice(&sdk.stdout).unwrap();
        assert_eq!(v["models"], json!([ALIAS]));
        assert!(v["plain_prompt_tokens"].as_u64().unwrap() > 0);
        assert!(v["stream_chunks"].as_u64().unwrap() >= 1);
        assert_eq!(v["stream_prompt_tokens"], v["plain_prompt_tokens"]);
        assert!(v["replica_header"]
            .as_str()
            .is_some_and(|s| s.starts_with('r')));

        let r = run(&gw, "warm");
        assert!(
            r.followed * 10 >= r.repeats * 9,
            "warm: only {}/{} repeat requests followed their prefix's server",
            r.followed,
            r.repeats
        );
        r
    };
    // The same requests (other group names, so nothing is cached from the run above)
    // spread round robin.
    let rr = {
        let gw = gateway(&model, &a, &b, "round_robin");
        run(&gw, "rr")
    };
    let share = |r: &Run| r.cache_n as f64 / r.prompt.max(1) as f64;
    eprintln!(
        "engine-reported reuse: warm {:.3} ({}/{}), round_robin {:.3} ({}/{})",
        share(&warm),
        warm.cache_n,
        warm.prompt,
        share(&rr),
        rr.cache_n,
        rr.prompt
    );
    assert!(
        share(&warm) > share(&rr) + 0.2,
        "llama-server reused {:.3} of prompt tokens under warm, {:.3} under round_robin",
        share(&warm),
        share(&rr)
    );
}
