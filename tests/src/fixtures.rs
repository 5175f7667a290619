//! Config snippets, prompts and answer readers shared by the tests.

use crate::http::HttpResponse;
use gateway::hash_key;

/// YAML for auth with the given tenants `(id, key, limits-yaml)`.
pub fn auth_yaml(tenants: &[(&str, &str, &str)]) -> String {
    let mut y =
        String::from("auth: {enabled: true, salt_secret: e2e-salt-secret-0123456789}\ntenants:\n");
    for (id, key, limits) in tenants {
        y.push_str(&format!(
            "  - id: {id}\n    api_key_sha256: [{}]\n    models: [\"*\"]\n    limits: {{{limits}}}\n",
            hash_key(key)
        ));
    }
    y
}

/// YAML for a replica list.
pub fn replicas_yaml(urls: &[String]) -> String {
    let mut y = String::from("replicas:\n");
    for u in urls {
        y.push_str(&format!("  - {u}\n"));
    }
    y
}

/// A chat body.
pub fn chat(
    model: &str,
    system: &str,
    user: &str,
    max_tokens: u32,
    stream: bool,
) -> serde_json::Value {
    serde_json::json!({
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_tokens": max_tokens, "temperature": 0, "stream": stream
    })
}

/// The model name a replica serves.
pub fn model_of(addr: &str) -> String {
    crate::http::get(addr, "/v1/replica/info", &[])
        .expect("info")
        .json()
        .expect("json")["model"]
        .as_str()
        .expect("model")
        .to_string()
}

/// Path of the SmolLM2-135M-Instruct GGUF that `scripts/fetch-model.sh` provides (honours
/// `WARMPATH_MODEL_DIR` as the script does). Panics with the fix when it is missing.
pub fn smollm2_model() -> String {
    let dir = std::env::var("WARMPATH_MODEL_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/warmpath/models",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let path = std::path::Path::new(&dir).join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.exists(),
        "{} missing: run scripts/fetch-model.sh",
        path.display()
    );
    path.display().to_string()
}

/// A ~700-token prompt (about 4,200 characters) of its own for `seed`: `title`, then
/// sentences drawn from `words` in a seed-dependent order, then `question`. Prompts of two
/// seeds share no block after the first few tokens.
pub fn long_prompt(title: &str, seed: usize, words: &[&str], question: &str) -> String {
    let mut s = format!("{title} {seed}. ");
    let mut i = seed;
    while s.len() < 4200 {
        s.push_str(words[i % words.len()]);
        s.push_str(if i.is_multiple_of(5) { ". " } else { " " });
        i = (i * 7 + 3) % 101;
    }
    s.push_str(question);
    s
}

/// The first choice's text of a completion answer (panics on another shape).
pub fn completion_text(r: &HttpResponse) -> String {
    let v = r
        .json()
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()));
    v["choices"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no choices[0].text: {v}"))
        .to_string()
}

/// An answer's `(usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens)`; cached
/// is 0 when absent.
pub fn prompt_and_cached(r: &HttpResponse) -> (u64, u64) {
    let v = r
        .json()
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.text()));
    let prompt = v["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.prompt_tokens: {v}"));
    let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    (prompt, cached)
}
