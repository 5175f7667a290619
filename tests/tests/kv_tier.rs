#![allow(clippy::unwrap_used)]
//! Issue 26, done-when: the shared KV tier with a real `redis-server` and SmolLM2 replicas.
//! Replica A answers a long prompt and writes its blocks to Redis; replica B, which never
//! saw the prompt, loads them and answers exactly what a replica without the tier
//! answers. A corrupted value, a value of another checkpoint, a value of another
//! tenant's salt and a dead Redis each end in the right answer by recomputation, with the
//! reason counted in `warmpath_replica_kv_tier_lookups_total`.

use serde_json::json;
use std::time::{Duration, Instant};
use warmpath_core::{block_hashes, BlockSize, CacheSalt, HashNamespace, TokenId};
use warmpath_e2e::fixtures::{
    completion_text, long_prompt, model_of, prompt_and_cached, smollm2_model,
};
use warmpath_e2e::http::{get, post_json, HttpResponse};
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::ReplicaProc;
use warmpath_protocol::kv_block::{tier_key, KvBlockRecord};
use warmpath_protocol::replica_api::{ReplicaInfo, HEADER_CACHE_SALT, PATH_INFO};

const LEDGER_WORDS: &[&str] = &[
    "copper", "willow", "beacon", "quarry", "tide", "ember", "falcon",
];
const LEDGER_QUESTION: &str = "Name the first word of the ledger:";

fn complete(addr: &str, model: &str, prompt: &str, salt: Option<&str>) -> HttpResponse {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 20, "temperature": 0});
    let headers: Vec<(&str, &str)> = salt.map(|s| (HEADER_CACHE_SALT, s)).into_iter().collect();
    let r = post_json(addr, "/v1/completions", &headers, &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

fn info(r: &ReplicaProc) -> ReplicaInfo {
    serde_json::from_str(&get(&r.addr, PATH_INFO, &[]).unwrap().text()).unwrap()
}

/// The value of the sample `name{labels}` in a replica's `/metrics` (0 when absent).
fn metric(r: &ReplicaProc, sample: &str) -> f64 {
    let body = get(&r.addr, "/metrics", &[]).unwrap().text();
    body.lines()
        .find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn lookups(r: &ReplicaProc, outcome: &str, reason: &str) -> f64 {
    metric(
        r,
        &format!(
            "warmpath_replica_kv_tier_lookups_total{{outcome=\"{outcome}\",reason=\"{reason}\"}}"
        ),
    )
}

/// Waits until `writer` has written at least `blocks` blocks and its queue is empty.
fn wait_written(writer: &ReplicaProc, redis: &RedisServer, blocks: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let keys: u64 = redis.cli(&["DBSIZE"]).unwrap().trim().parse().unwrap();
        let queued = metric(writer, "warmpath_replica_kv_tier_queue_bytes");
        if keys >= blocks && queued == 0.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{keys} of {blocks} blocks in Redis after 30 s (queue {queued} bytes)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn client(redis: &RedisServer) -> redis::Connection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Every record in Redis, in chain order (first block first), with its key.
fn records(redis: &RedisServer) -> Vec<(String, Vec<u8>, KvBlockRecord)> {
    let mut c = client(redis);
    let keys: Vec<String> = redis::cmd("KEYS").arg("wpkv:*").query(&mut c).unwrap();
    let mut all: Vec<(String, Vec<u8>, KvBlockRecord)> = keys
        .into_iter()
        .map(|k| {
            let v: Vec<u8> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
            let r = KvBlockRecord::decode(&v).unwrap();
            (k, v, r)
        })
        .collect();
    let mut chain = Vec::new();
    let mut parent = None;
    while let Some(i) = all.iter().position(|(_, _, r)| r.parent == parent) {
        let e = all.swap_remove(i);
        parent = Some(e.2.hash);
        chain.push(e);
    }
    chain
}

/// Moves the records in Redis (one chain) to the keys `reader` would look up for the same
/// tokens under `salt`: the values stay those of the writer's checkpoint and salt.
fn move_to_reader_keys(redis: &RedisServer, reader: &ReplicaInfo, salt: Option<&str>) {
    let chain = records(redis);
    assert!(!chain.is_empty());
    let tokens: Vec<TokenId> = chain
        .iter()
        .flat_map(|(_, _, r)| r.tokens.iter().copied())
        .collect();
    let ns = HashNamespace::new(reader.checkpoint.clone()).with_salt(salt.map(CacheSalt::new));
    let hashes = block_hashes(ns.root_seed(), &tokens, BlockSize(reader.block_size.0));
    let mut c = client(redis);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    for ((_, bytes, rec), h) in chain.iter().zip(&hashes) {
        assert_ne!(rec.hash, *h, "the writer and reader chains must differ");
        let _: () = redis::cmd("SET")
            .arg(tier_key(*h))
            .arg(bytes.as_slice())
            .query(&mut c)
            .unwrap();
    }
}

fn flush(redis: &RedisServer) {
    let _: () = redis::cmd("FLUSHALL").query(&mut client(redis)).unwrap();
}

#[test]
fn a_replica_that_never_saw_a_prompt_loads_its_kv_from_the_tier() {
    let model_path = smollm2_model();
    let redis = RedisServer::start().unwrap();
    let url = redis.url();
    let tiered = ["--kv-store", url.as_str()];
    let reference = ReplicaProc::spawn(&model_path).unwrap();
    let a = ReplicaProc::spawn_args(&model_path, 0, &tiered).unwrap();
    let b = ReplicaProc::spawn_args(&model_path, 0, &tiered).unwrap();
    let model = model_of(&a.addr);
    let bs = info(&a).block_size.0 as u64;

    let prompt = long_prompt("Ledger", 1, LEDGER_WORDS, LEDGER_QUESTION);
    let first = complete(&a.addr, &model, &prompt, None);
    assert_eq!(first.header("x-warmpath-kv-tier"), Some("miss"));
    let (prompt_tokens, _) = prompt_and_cached(&first);
    assert!(prompt_tokens >= 600, "{prompt_tokens}");
    let full_blocks = prompt_tokens / bs;
    wait_written(&a, &redis, full_blocks);
    assert!(
        metric(
            &a,
            "warmpath_replica_kv_tier_writes_total{outcome=\"written\"}"
        ) >= full_blocks as f64
    );

    let want = complete(&reference.addr, &model, &prompt, None);
    let got = complete(&b.addr, &model, &prompt, None);
    assert_eq!(got.header("x-warmpath-kv-tier"), Some("hit"));
    let (_, cached) = prompt_and_cached(&got);
    assert!(
        cached * 10 >= full_blocks * bs * 9,
        "B reports {cached} of {prompt_tokens} prompt tokens cached"
    );
    assert_eq!(
        got.header("x-warmpath-kv-tier-tokens")
            .map(|t| t.parse::<u64>().unwrap()),
        Some(cached)
    );
    assert_eq!(
        completion_text(&got),
        completion_text(&want),
        "tier output differs from recompute"
    );
    assert_eq!(lookups(&b, "hit", "complete"), 1.0);
    assert_eq!(
        metric(&b, "warmpath_replica_kv_tier_hit_tokens_total"),
        cached as f64
    );
    // B does not write back what it loaded: at most the blocks it decoded itself.
    std::thread::sleep(Duration::from_millis(300));
    let b_written = metric(
        &b,
        "warmpath_replica_kv_tier_writes_total{outcome=\"written\"}",
    );
    assert!(b_written <= 2.0, "B wrote {b_written} blocks");

    // Asked again, B holds the prompt itself: the tier is not asked.
    let again = complete(&b.addr, &model, &prompt, None);
    assert_eq!(again.header("x-warmpath-kv-tier"), Some("skipped"));
    assert_eq!(completion_text(&again), completion_text(&want));
}

#[test]
fn a_bad_value_or_a_dead_redis_ends_in_recomputation_with_the_reason_counted() {
    let model_path = smollm2_model();
    let mut redis = RedisServer::start().unwrap();
    let url = redis.url();
    let tiered = ["--kv-store", url.as_str()];
    let reference = ReplicaProc::spawn(&model_path).unwrap();
    let a = ReplicaProc::spawn_args(&model_path, 0, &tiered).unwrap();
    let other = ReplicaProc::spawn_args(
        &model_path,
        0,
        &[
            "--kv-store",
            url.as_str(),
            "--checkpoint-id",
            "other-weights",
        ],
    )
    .unwrap();
    let b = ReplicaProc::spawn_args(&model_path, 0, &tiered).unwrap();
    let model = model_of(&a.addr);
    let b_info = info(&b);
    let bs = b_info.block_size.0 as u64;
    let check = |prompt: &str, salt: Option<&str>, outcome: &str, reason: &str| {
        let before = lookups(&b, outcome, reason);
        let want = complete(&reference.addr, &model, prompt, salt);
        let got = complete(&b.addr, &model, prompt, salt);
        assert_eq!(got.header("x-warmpath-kv-tier"), Some(outcome), "{reason}");
        assert_eq!(
            completion_text(&got),
            completion_text(&want),
            "{reason}: the answer changed"
        );
        assert_eq!(
            prompt_and_cached(&got).1,
            0,
            "{reason}: nothing may count as cached"
        );
        assert_eq!(lookups(&b, outcome, reason), before + 1.0, "{reason}");
    };

    // A corrupted value: one payload byte flipped in every record.
    let prompt = long_prompt("Ledger", 2, LEDGER_WORDS, LEDGER_QUESTION);
    let (n, _) = prompt_and_cached(&complete(&a.addr, &model, &prompt, None));
    wait_written(&a, &redis, n / bs);
    let mut c = client(&redis);
    for (key, mut bytes, _) in records(&redis) {
        let at = bytes.len() / 2;
        bytes[at] ^= 0x40;
        let _: () = redis::cmd("SET").arg(key).arg(bytes).query(&mut c).unwrap();
    }
    check(&prompt, None, "miss", "corrupt");

    // A value of another checkpoint under the key B looks up.
    flush(&redis);
    let prompt = long_prompt("Ledger", 3, LEDGER_WORDS, LEDGER_QUESTION);
    let (n, _) = prompt_and_cached(&complete(&other.addr, &model, &prompt, None));
    wait_written(&other, &redis, n / bs);
    move_to_reader_keys(&redis, &b_info, None);
    check(&prompt, None, "miss", "mismatch");

    // A value of another tenant's salt under the key B looks up for its tenant.
    flush(&redis);
    let prompt = long_prompt("Ledger", 4, LEDGER_WORDS, LEDGER_QUESTION);
    let (n, _) = prompt_and_cached(&complete(&a.addr, &model, &prompt, Some("tenant-a")));
    wait_written(&a, &redis, n / bs);
    move_to_reader_keys(&redis, &b_info, Some("tenant-b"));
    check(&prompt, Some("tenant-b"), "miss", "mismatch");

    // Redis down: B serves as if there were no tier and counts the failure.
    redis.kill();
    let errors = metric(&b, "warmpath_replica_kv_tier_errors_total{op=\"read\"}");
    check(
        &long_prompt("Ledger", 5, LEDGER_WORDS, LEDGER_QUESTION),
        None,
        "miss",
        "unavailable",
    );
    assert!(metric(&b, "warmpath_replica_kv_tier_errors_total{op=\"read\"}") > errors);
}
