#![allow(clippy::unwrap_used)]
//! The official OpenAI Python SDK lists models and gets chat completions, plain and
//! streaming, through the gateway (with an API key).

use std::process::Command;
use warmpath_e2e::fixtures::{auth_yaml, model_of, replicas_yaml};
use warmpath_e2e::{GatewayProc, ReplicaProc};

#[test]
fn openai_python_sdk_works_through_the_gateway() {
    let has_sdk = Command::new("python3")
        .args(["-c", "import openai"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "the OpenAI Python SDK is missing: run scripts/ci-deps.sh (pip install openai)"
    );
    let replica = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let model = model_of(&replica.addr);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("sdk", "sk-sdk-test", "")]),
        replicas_yaml(&[replica.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/sdk_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(format!("http://{}/v1", gw.addr))
        .arg("sk-sdk-test")
        .arg(&model)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "sdk script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        gw.log()
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json line");
    assert_eq!(v["models"], serde_json::json!([model]));
    assert!(v["plain_prompt_tokens"].as_u64().unwrap() > 0);
    assert!(v["plain_content"].is_string());
    assert!(v["replica_header"]
        .as_str()
        .is_some_and(|s| s.starts_with('r')));
    assert!(v["stream_chunks"].as_u64().unwrap() >= 1);
    assert_eq!(v["stream_prompt_tokens"], v["plain_prompt_tokens"]);
}
