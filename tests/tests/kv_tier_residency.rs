#![allow(clippy::unwrap_used)]
//! Issue 44, item 7: the shared KV tier respects data residency. Replica A runs in `eu`
//! with its tier's Redis in `us` (`--kv-store-region us`), behind a gateway with a tenant
//! pinned to `eu` and an unpinned one. The pinned tenant's request writes no block to the
//! real `redis-server` and reads none from it (blocks of its own prompt put there by
//! replica B are not loaded); the unpinned tenant's blocks are written, even though its
//! client sent `x-warmpath-kv-tier-off` (the gateway drops a client's copy).

use serde_json::json;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{long_prompt, model_of, prompt_and_cached, smollm2_model};
use warmpath_e2e::http::{get, post_json, HttpResponse};
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::{GatewayProc, ReplicaProc};
use warmpath_protocol::replica_api::{HEADER_CACHE_SALT, HEADER_KV_TIER, HEADER_KV_TIER_OFF};

const SECRET: &str = "e2e-salt-secret-0123456789";
const WORDS: &[&str] = &[
    "granite", "meadow", "lantern", "harbor", "thistle", "orchard", "cinder",
];
const QUESTION: &str = "Name the first word of the record:";

fn yaml(a: &ReplicaProc) -> String {
    let mut y = format!("auth: {{enabled: true, salt_secret: {SECRET}}}\ntenants:\n");
    for (id, regions) in [("eu-only", "[eu]"), ("anywhere", "[]")] {
        y.push_str(&format!(
            "  - id: {id}\n    api_key_sha256: [{}]\n    regions: {regions}\n",
            gateway::hash_key(&format!("key-{id}"))
        ));
    }
    y.push_str(&format!("replicas:\n  - {}\n", a.url()));
    y
}

fn complete(addr: &str, model: &str, prompt: &str, headers: &[(&str, &str)]) -> HttpResponse {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0});
    let r = post_json(addr, "/v1/completions", headers, &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

fn keys(redis: &RedisServer) -> u64 {
    redis.cli(&["DBSIZE"]).unwrap().trim().parse().unwrap()
}

/// Waits until Redis holds at least `blocks` keys and `writer`'s tier queue is empty:
/// every block it queued before is written by then (one FIFO writer).
fn wait_written(writer: &ReplicaProc, redis: &RedisServer, blocks: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = keys(redis);
        let metrics = get(&writer.addr, "/metrics", &[]).unwrap().text();
        let empty = metrics
            .lines()
            .any(|l| l == "warmpath_replica_kv_tier_queue_bytes 0");
        if n >= blocks && empty {
            return n;
        }
        assert!(Instant::now() < deadline, "{n} of {blocks} blocks in Redis");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_pinned_tenant_never_uses_a_tier_outside_its_region() {
    let model_path = smollm2_model();
    let redis = RedisServer::start().unwrap();
    let url = redis.url();
    let a = ReplicaProc::spawn_args(
        &model_path,
        0,
        &[
            "--region",
            "eu",
            "--kv-store",
            &url,
            "--kv-store-region",
            "us",
        ],
    )
    .unwrap();
    let model = model_of(&a.addr);
    let g = GatewayProc::spawn(&yaml(&a), &[], 1).unwrap();
    let listed = g.replicas().unwrap();
    assert_eq!(listed[0]["region"], json!("eu"), "{listed}");

    // The pinned tenant first: were its blocks queued, they would be written before the
    // unpinned tenant's (one queue, one writer).
    let pinned = [("authorization", "Bearer key-eu-only")];
    let first = long_prompt("Record", 1, WORDS, QUESTION);
    let (pinned_tokens, _) = prompt_and_cached(&complete(&g.addr, &model, &first, &pinned));
    assert!(pinned_tokens >= 600, "{pinned_tokens}");
    // The unpinned tenant, whose client asks for the tier off: the gateway drops that.
    let unpinned = [
        ("authorization", "Bearer key-anywhere"),
        (HEADER_KV_TIER_OFF, "1"),
    ];
    let second = long_prompt("Record", 2, WORDS, QUESTION);
    let (tokens, _) = prompt_and_cached(&complete(&g.addr, &model, &second, &unpinned));
    let written = wait_written(&a, &redis, tokens / 16);
    assert_eq!(
        written,
        tokens / 16,
        "only the unpinned tenant's {} blocks may be in the us tier (the pinned tenant's \
         prompt is {pinned_tokens} tokens)",
        tokens / 16
    );

    // Blocks of a third prompt under the pinned tenant's salt, put in the tier by replica
    // B (straight, no gateway): A must not load them for the pinned tenant.
    let b = ReplicaProc::spawn_args(&model_path, 0, &["--kv-store", &url]).unwrap();
    let salt = gateway::derive_salt(SECRET, "eu-only");
    let third = long_prompt("Record", 3, WORDS, QUESTION);
    let (third_tokens, _) = prompt_and_cached(&complete(
        &b.addr,
        &model,
        &third,
        &[(HEADER_CACHE_SALT, salt.as_str())],
    ));
    wait_written(&b, &redis, written + third_tokens / 16);
    let r = complete(&g.addr, &model, &third, &pinned);
    assert_eq!(r.header(HEADER_KV_TIER), None, "A asked the tier");
    let (_, cached) = prompt_and_cached(&r);
    assert_eq!(
        cached, 0,
        "A loaded the pinned tenant's KV from the us tier"
    );
}
