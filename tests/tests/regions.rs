#![allow(clippy::unwrap_used)]
//! Issue 28, regions at the gateway: a gateway in `eu` in front of one replica in `eu` and
//! one in `us`. Residency pins are never crossed, an unpinned tenant stays home while home
//! is as good, and it spills to `us` when `us` holds a much longer prefix of its prompt;
//! the decision log and `region_spills_total` say so.

use serde_json::json;
use warmpath_e2e::fixtures::model_of;
use warmpath_e2e::http::post_json;
use warmpath_e2e::{GatewayProc, ReplicaProc};

const SECRET: &str = "e2e-salt-secret-0123456789";

fn tenants_yaml() -> String {
    let mut y = format!("auth: {{enabled: true, salt_secret: {SECRET}}}\ntenants:\n");
    for (id, regions) in [("eu-only", "[eu]"), ("us-only", "[us]"), ("anywhere", "[]")] {
        y.push_str(&format!(
            "  - id: {id}\n    api_key_sha256: [{}]\n    regions: {regions}\n",
            gateway::hash_key(&format!("key-{id}"))
        ));
    }
    y
}

fn chat(g: &GatewayProc, tenant: &str, model: &str, system: &str, user: &str) -> String {
    let auth = format!("Bearer key-{tenant}");
    let body = json!({
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_tokens": 1, "temperature": 0
    });
    let r = post_json(
        &g.addr,
        "/v1/chat/completions",
        &[("authorization", &auth)],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("x-warmpath-replica").unwrap().to_string()
}

#[test]
fn residency_holds_home_comes_first_and_a_warmer_remote_prefix_spills() {
    let eu = ReplicaProc::spawn_args("dummy:tiny", 0, &["--region", "eu"]).unwrap();
    let us = ReplicaProc::spawn_args("dummy:tiny", 0, &["--region", "us"]).unwrap();
    let model = model_of(&eu.addr);
    // RTT and margin of 1 ms each: a few ms of prefill saved is worth the trip.
    let yaml = format!(
        "{}replicas:\n  - {}\n  - {}\nregions: {{home: eu, mode: spill, spill_margin_ms: 1, \
         rtt: [{{a: eu, b: us, ms: 1}}]}}\n",
        tenants_yaml(),
        eu.url(),
        us.url()
    );
    let g = GatewayProc::spawn(&yaml, &[], 2).unwrap();
    let label_in = |region: &str| {
        let list = g.replicas().unwrap();
        let r = list
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["region"] == json!(region))
            .unwrap()
            .clone();
        format!("r{}", r["id"])
    };
    let (eu_label, us_label) = (label_in("eu"), label_in("us"));

    // Pinned tenants: always in their region, whatever the prompt.
    for i in 0..8 {
        let sys = format!("pinned conversation {i}");
        assert_eq!(chat(&g, "us-only", &model, &sys, "hi"), us_label);
        assert_eq!(chat(&g, "eu-only", &model, &sys, "hi"), eu_label);
    }
    // Unpinned, cold prompts on an idle cluster: home. (A pause first: the pinned
    // requests' prefill, as the policy books it, has drained.)
    let decisions = |n: usize| {
        g.admin_get(&format!("/admin/decisions?limit={n}"))
            .unwrap()
            .json()
            .unwrap()
    };
    for i in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let sys = format!("cold conversation {i}");
        let chosen = chat(&g, "anywhere", &model, &sys, "hi");
        assert_eq!(chosen, eu_label, "{}", decisions(1));
    }
    // `us` computes a 3,000-token prompt for the unpinned tenant (sent straight to it
    // with the tenant's cache salt); the gateway learns it from `us`'s KV events.
    let salt = gateway::derive_salt(SECRET, "anywhere");
    let mut system = String::from("shared context: ");
    while system.len() < 3000 {
        system.push_str("the quick brown fox jumps over the lazy dog. ");
    }
    let body = json!({
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "first"}],
        "max_tokens": 1, "temperature": 0
    });
    let r = post_json(
        &us.addr,
        "/v1/chat/completions",
        &[("x-warmpath-cache-salt", salt.as_str())],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let chosen = chat(&g, "anywhere", &model, &system, "second");
    assert_eq!(
        chosen,
        us_label,
        "the warmer remote prefix should win: {}",
        decisions(1)
    );
    // A pinned tenant with the same prompt still stays home.
    assert_eq!(chat(&g, "eu-only", &model, &system, "second"), eu_label);

    let decisions = decisions(2);
    let spill = &decisions[0]["decision"]["explanation"]["region"];
    assert_eq!(spill["spilled_to"], json!("us"), "{decisions}");
    assert_eq!(spill["reason"], json!("warmer_prefix"));
    let metrics = g.metrics().unwrap();
    assert!(
        metrics.contains(
            r#"warmpath_gateway_region_spills_total{reason="warmer_prefix",region="us"} 1"#
        ),
        "{metrics}"
    );
}
