#![allow(clippy::unwrap_used)]
//! Issue 27, done-when: prefill/decode disaggregation through the gateway with SmolLM2.
//! One prefill and one decode replica behind the gateway; a co-located replica outside
//! it computes the reference. A long prompt is split: the decode replica fetches its KV
//! from the prefill replica, reports the fetched tokens as cached, and answers exactly
//! what the co-located replica answers. A short prompt is not split. A transfer killed
//! midway (a prefill replica that cuts its KV stream) still ends in the right answer.

use serde_json::json;
use std::collections::HashMap;
use warmpath_e2e::fixtures::{
    completion_text, long_prompt, model_of, prompt_and_cached, smollm2_model,
};
use warmpath_e2e::http::{post_json, HttpResponse};
use warmpath_e2e::{GatewayProc, ReplicaProc};

const DOC_WORDS: &[&str] = &[
    "river", "stone", "lantern", "harbor", "orchard", "signal", "meadow",
];
const DOC_QUESTION: &str = "Summarise the document in one sentence:";

fn complete(addr: &str, model: &str, prompt: &str) -> HttpResponse {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 24, "temperature": 0});
    let r = post_json(addr, "/v1/completions", &[], &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

/// Replica label (`r0`) to URL.
fn labels(g: &GatewayProc) -> HashMap<String, String> {
    g.replicas()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!("r{}", r["id"]),
                r["url"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The transfer key the gateway and the replicas share (so the split below runs signed).
const TRANSFER_KEY: &str = "an e2e transfer key, 32 bytes or more";

/// A file holding [`TRANSFER_KEY`].
fn key_file() -> String {
    let dir = std::env::temp_dir().join(format!("wp-disagg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("transfer.key");
    std::fs::write(&path, TRANSFER_KEY).unwrap();
    path.to_str().unwrap().to_string()
}

fn gateway(prefill: &ReplicaProc, decode: &ReplicaProc) -> GatewayProc {
    let yaml = format!(
        "auth: {{enabled: false}}\nreplicas:\n  - {}\n  - {}\n\
         disaggregation: {{min_prompt_tokens: 256}}\nkv_transfer_key: \"{TRANSFER_KEY}\"\n",
        prefill.url(),
        decode.url()
    );
    GatewayProc::spawn(&yaml, &[], 2).unwrap()
}

#[test]
fn a_split_request_answers_like_a_colocated_one_and_survives_a_cut_transfer() {
    let model_path = smollm2_model();
    let colocated = ReplicaProc::spawn(&model_path).unwrap();
    let key = key_file();
    let keyed = |role: &'static str| ["--role", role, "--kv-transfer-key-file", key.as_str()];
    let prefill = ReplicaProc::spawn_args(&model_path, 0, &keyed("prefill")).unwrap();
    let decode = ReplicaProc::spawn_args(&model_path, 0, &keyed("decode")).unwrap();
    let model = model_of(&colocated.addr);
    let g = gateway(&prefill, &decode);
    let url_of = labels(&g);
    let roles: Vec<String> = g
        .replicas()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap().to_string())
        .collect();
    assert!(
        roles.contains(&"prefill".into()) && roles.contains(&"decode".into()),
        "{roles:?}"
    );

    // A long prompt: split, fetched, cached, identical.
    let prompt = long_prompt("Document", 1, DOC_WORDS, DOC_QUESTION);
    let want = complete(&colocated.addr, &model, &prompt);
    let got = complete(&g.addr, &model, &prompt);
    let served = got.header("x-warmpath-replica").unwrap().to_string();
    assert_eq!(url_of[&served], decode.url(), "the decode replica answers");
    assert_eq!(
        got.header("x-warmpath-kv-transfer"),
        Some("ok"),
        "{}",
        g.log()
    );
    assert_eq!(
        got.header("x-warmpath-kv-transfer-reason"),
        Some("complete")
    );
    assert_eq!(
        completion_text(&got),
        completion_text(&want),
        "split greedy output differs from co-located"
    );
    let (prompt_tokens, cached) = prompt_and_cached(&got);
    assert!(prompt_tokens >= 600, "{prompt_tokens}");
    let full_blocks = prompt_tokens / 16 * 16;
    assert!(
        cached * 10 >= full_blocks * 9,
        "the decode replica reports {cached} of {prompt_tokens} prompt tokens cached"
    );
    assert_eq!(
        got.header("x-warmpath-kv-transferred-tokens")
            .map(|t| t.parse::<u64>().unwrap()),
        Some(cached)
    );
    let decisions = g
        .admin_get("/admin/decisions?limit=1")
        .unwrap()
        .json()
        .unwrap();
    let note = &decisions[0]["decision"]["explanation"]["prefill"];
    assert_eq!(
        url_of[&format!("r{}", note["replica"])],
        prefill.url(),
        "{decisions}"
    );
    assert!(g
        .metrics()
        .unwrap()
        .contains("warmpath_gateway_kv_transfers_total{outcome=\"ok\""));

    // The same prompt again: the decode replica's own KV events (the gateway does not
    // credit it with a split prompt at routing time) say it holds the prompt now, so it is
    // served there from cache without a second transfer.
    let again = complete(&g.addr, &model, &prompt);
    assert_eq!(again.header("x-warmpath-kv-transfer"), None, "{}", g.log());
    assert_eq!(
        url_of[again.header("x-warmpath-replica").unwrap()],
        decode.url()
    );
    assert!(
        prompt_and_cached(&again).1 * 10 >= full_blocks * 9,
        "{:?}",
        prompt_and_cached(&again)
    );
    assert_eq!(completion_text(&again), completion_text(&want));

    // A short prompt is prefilled where it is decoded: no transfer.
    let short = complete(&g.addr, &model, "Say hello.");
    assert_eq!(
        url_of[short.header("x-warmpath-replica").unwrap()],
        decode.url()
    );
    assert_eq!(short.header("x-warmpath-kv-transfer"), None);

    // A transfer killed midway: the decode replica keeps the good blocks and computes
    // the rest.
    let cut = ReplicaProc::spawn_args(
        &model_path,
        0,
        &[
            "--role",
            "prefill",
            "--fault-kv-cut-after-blocks",
            "5",
            "--kv-transfer-key-file",
            key.as_str(),
        ],
    )
    .unwrap();
    let g2 = gateway(&cut, &decode);
    let prompt = long_prompt("Document", 2, DOC_WORDS, DOC_QUESTION);
    let want = complete(&colocated.addr, &model, &prompt);
    let got = complete(&g2.addr, &model, &prompt);
    assert_eq!(
        got.header("x-warmpath-kv-transfer"),
        Some("partial"),
        "{}",
        g2.log()
    );
    assert_eq!(
        got.header("x-warmpath-kv-transfer-reason"),
        Some("truncated"),
        "{}",
        g2.log()
    );
    assert_eq!(
        completion_text(&got),
        completion_text(&want),
        "a cut transfer changed the answer"
    );
    assert_eq!(
        prompt_and_cached(&got).1,
        80,
        "five blocks of 16 came over before the cut"
    );
    let m = g2.metrics().unwrap();
    assert!(
        m.contains("warmpath_gateway_kv_transfers_total{outcome=\"partial\""),
        "{m}"
    );
}

#[test]
fn a_clients_prefill_from_and_its_signature_never_reach_a_replica() {
    use warmpath_e2e::mock::{MockReplica, Mode};
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "auth: {{enabled: false}}\n{}",
        warmpath_e2e::fixtures::replicas_yaml(&[mock.url()])
    );
    let g = GatewayProc::spawn(&yaml, &[], 1).unwrap();
    let body = warmpath_e2e::fixtures::chat("mock", "s", "u", 4, false);
    let r = post_json(
        &g.addr,
        "/v1/chat/completions",
        &[
            ("x-warmpath-prefill-from", "http://10.255.255.1:9"),
            ("x-warmpath-prefill-auth", "t=1,mac=00"),
        ],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let seen = mock.raw_requests();
    assert_eq!(seen.len(), 1);
    let head = String::from_utf8_lossy(&seen[0]).to_ascii_lowercase();
    assert!(
        head.contains("x-warmpath-cache-salt"),
        "the gateway's own headers: {head}"
    );
    assert!(!head.contains("x-warmpath-prefill-from"), "{head}");
    assert!(!head.contains("x-warmpath-prefill-auth"), "{head}");
}
