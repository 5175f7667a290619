//! Config snippets shared by the tests.

use gateway::tenants::hash_key;

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
