#![allow(clippy::unwrap_used)]
//! Done-when: 30 chats sharing a 1,000-token system prompt over 3 replicas. With `warm`,
//! at least 90% after the first go to a replica holding the prefix and replica-reported
//! cached_tokens cover at least 80% of their prompt tokens; `round_robin` shows the difference.

use serde_json::json;
use std::collections::HashSet;
use warmpath_e2e::http::post_json;
use warmpath_e2e::{GatewayProc, ReplicaProc};

struct Outcome {
    /// Requests after the first that went to a replica that had served the prefix before.
    to_holder: usize,
    /// Replica-reported cached tokens / prompt tokens, requests after the first.
    cached_share: f64,
    replicas_used: usize,
}

fn run(policy: &str, replicas: &[ReplicaProc]) -> Outcome {
    let urls: Vec<String> = replicas
        .iter()
        .map(|r| format!("  - {}", r.url()))
        .collect();
    let yaml = format!(
        "auth: {{enabled: false}}\npolicy: {{type: {policy}}}\nreplicas:\n{}\n",
        urls.join("\n")
    );
    let gw = GatewayProc::spawn(&yaml, &[], replicas.len()).expect("gateway");
    let model = warmpath_e2e::http::get(&replicas[0].addr, "/v1/replica/info", &[])
        .unwrap()
        .json()
        .unwrap()["model"]
        .as_str()
        .unwrap()
        .to_string();
    // dummy:tiny is byte-level: 1,000 ASCII characters are 1,000 tokens. A per-policy
    // marker keeps the two runs from sharing cache.
    let mut system = format!("policy {policy}. ");
    while system.len() < 1000 {
        system.push_str("You are a careful assistant who answers briefly. ");
    }
    system.truncate(1000);
    let mut holders: HashSet<String> = HashSet::new();
    let (mut to_holder, mut cached, mut prompt) = (0usize, 0u64, 0u64);
    for i in 0..30 {
        let body = json!({
            "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": format!("question number {i}?")}],
            "max_tokens": 2, "temperature": 0
        });
        let r = post_json(&gw.addr, "/v1/chat/completions", &[], &body).expect("request");
        assert_eq!(r.status, 200, "{}", r.text());
        let replica = r
            .header("x-warmpath-replica")
            .expect("replica header")
            .to_string();
        let v = r.json().expect("json");
        if i > 0 {
            if holders.contains(&replica) {
                to_holder += 1;
            }
            cached += v["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
            prompt += v["usage"]["prompt_tokens"].as_u64().expect("prompt tokens");
        }
        holders.insert(replica);
    }
    Outcome {
        to_holder,
        cached_share: cached as f64 / prompt as f64,
        replicas_used: holders.len(),
    }
}

#[test]
fn warm_routes_shared_prefix_to_holders_and_round_robin_does_not() {
    let replicas: Vec<ReplicaProc> = (0..3)
        .map(|_| ReplicaProc::spawn("dummy:tiny").expect("replica"))
        .collect();
    let warm = run("warm", &replicas);
    eprintln!(
        "warm: {}/29 to a holder, cached share {:.3}, {} replicas used",
        warm.to_holder, warm.cached_share, warm.replicas_used
    );
    assert!(
        warm.to_holder * 10 >= 29 * 9,
        "warm sent only {}/29 to a prefix holder",
        warm.to_holder
    );
    assert!(
        warm.cached_share >= 0.8,
        "warm cached share {:.3} < 0.8",
        warm.cached_share
    );

    let rr = run("round_robin", &replicas);
    eprintln!(
        "round_robin: {}/29 to a holder, cached share {:.3}, {} replicas used",
        rr.to_holder, rr.cached_share, rr.replicas_used
    );
    assert_eq!(
        rr.replicas_used, 3,
        "round robin spreads over every replica"
    );
    assert!(
        rr.cached_share < warm.cached_share,
        "round robin should miss the cache more often"
    );
}
