#![allow(clippy::unwrap_used)]
//! Issue 44, item 3: authenticated tier values. SmolLM2 replicas log in to an ACL'd
//! `redis-server` as the `replica` user (password from `--kv-store-password-file`) and
//! seal every value with `--kv-store-key-file`: a replica with the same key loads them, and
//! a value without a MAC, one sealed with another key, or a valid one moved to another key
//! is refused (reason `forged`) and the prompt recomputed, with the same answer.

use serde_json::json;
use std::path::PathBuf;
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

const ACL: &str = "\
user default off
user admin on >admin-pw ~* &* +@all
user replica on >replica-pw ~wpkv:* resetchannels -@all +@connection +get +mget +set
";
const WORDS: &[&str] = &["harbor", "lantern", "meadow", "cinder", "orchid", "granite"];
const QUESTION: &str = "Name the first word of the list:";
const MAC_LEN: usize = 32;

fn complete(r: &ReplicaProc, model: &str, prompt: &str, salt: Option<&str>) -> HttpResponse {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0});
    let headers: Vec<(&str, &str)> = salt.map(|s| (HEADER_CACHE_SALT, s)).into_iter().collect();
    let resp = post_json(&r.addr, "/v1/completions", &headers, &body).unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp
}

fn metric(r: &ReplicaProc, sample: &str) -> f64 {
    let body = get(&r.addr, "/metrics", &[]).unwrap().text();
    body.lines()
        .find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn lookups(r: &ReplicaProc, outcome: &str, reason: &str) -> f64 {
    let s = format!(
        "warmpath_replica_kv_tier_lookups_total{{outcome=\"{outcome}\",reason=\"{reason}\"}}"
    );
    metric(r, &s)
}

fn admin(redis: &RedisServer) -> redis::Connection {
    let url = format!("redis://admin:admin-pw@127.0.0.1:{}", redis.port);
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// Empties Redis, has `writer` answer `prompt` and waits until its blocks are all there.
fn written_by(
    redis: &RedisServer,
    writer: &ReplicaProc,
    model: &str,
    prompt: &str,
    salt: Option<&str>,
) {
    let _: () = redis::cmd("FLUSHALL").query(&mut admin(redis)).unwrap();
    let bs = info(writer).block_size.0 as u64;
    let (n, _) = prompt_and_cached(&complete(writer, model, prompt, salt));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let keys: u64 = redis.cli(&["DBSIZE"]).unwrap().trim().parse().unwrap();
        let queued = metric(writer, "warmpath_replica_kv_tier_queue_bytes");
        if keys >= n / bs && queued == 0.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{keys} of {} blocks written",
            n / bs
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn info(r: &ReplicaProc) -> ReplicaInfo {
    serde_json::from_str(&get(&r.addr, PATH_INFO, &[]).unwrap().text()).unwrap()
}

/// Every (key, value) in Redis, each value checked to be `MAC || record`; in chain order.
fn sealed(redis: &RedisServer) -> Vec<(String, Vec<u8>, KvBlockRecord)> {
    let mut c = admin(redis);
    let keys: Vec<String> = redis::cmd("KEYS").arg("wpkv:*").query(&mut c).unwrap();
    let mut all: Vec<_> = keys
        .into_iter()
        .map(|k| {
            let v: Vec<u8> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
            let r = KvBlockRecord::decode(&v[MAC_LEN..]).expect("value is MAC || record");
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
    assert!(!chain.is_empty());
    chain
}

fn set(redis: &RedisServer, key: &str, value: &[u8]) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query(&mut admin(redis))
        .unwrap();
}

fn key_file(redis: &RedisServer, name: &str, byte: u8) -> PathBuf {
    let p = redis.dir().join(name);
    std::fs::write(&p, [byte; 32]).unwrap();
    p
}

#[test]
fn a_forged_or_moved_tier_value_is_refused_and_the_prompt_recomputed() {
    let model_path = smollm2_model();
    let redis = RedisServer::start_with_acl(ACL, ("admin", "admin-pw"), &[]).unwrap();
    let url = format!("redis://replica@127.0.0.1:{}", redis.port);
    let pw = redis.dir().join("replica.password");
    std::fs::write(&pw, "replica-pw\n").unwrap();
    let pw = pw.display().to_string();
    let (k1, k2) = (key_file(&redis, "k1", 1), key_file(&redis, "k2", 2));
    let (k1, k2) = (k1.display().to_string(), k2.display().to_string());
    let tiered = |key: &str| {
        let args = [
            "--kv-store",
            url.as_str(),
            "--kv-store-password-file",
            pw.as_str(),
            "--kv-store-key-file",
            key,
        ];
        ReplicaProc::spawn_args(&model_path, 0, &args).unwrap()
    };
    let reference = ReplicaProc::spawn(&model_path).unwrap();
    let (a, b, other) = (tiered(&k1), tiered(&k1), tiered(&k2));
    let model = model_of(&a.addr);
    let b_info = info(&b);
    let check = |prompt: &str, salt: Option<&str>, outcome: &str, reason: &str| {
        let before = lookups(&b, outcome, reason);
        let want = complete(&reference, &model, prompt, salt);
        let got = complete(&b, &model, prompt, salt);
        assert_eq!(got.header("x-warmpath-kv-tier"), Some(outcome), "{reason}");
        assert_eq!(completion_text(&got), completion_text(&want), "{reason}");
        assert_eq!(lookups(&b, outcome, reason), before + 1.0, "{reason}");
        got
    };

    // Sealed with the shared key: B loads A's blocks.
    let prompt = long_prompt("List", 1, WORDS, QUESTION);
    written_by(&redis, &a, &model, &prompt, None);
    sealed(&redis);
    let got = check(&prompt, None, "hit", "complete");
    assert!(prompt_and_cached(&got).1 > 0);

    // A value without its MAC (a writer without the key, or a forger).
    let prompt = long_prompt("List", 2, WORDS, QUESTION);
    written_by(&redis, &a, &model, &prompt, None);
    for (key, value, _) in sealed(&redis) {
        set(&redis, &key, &value[MAC_LEN..]);
    }
    check(&prompt, None, "miss", "forged");

    // Values sealed with another key.
    let prompt = long_prompt("List", 3, WORDS, QUESTION);
    written_by(&redis, &other, &model, &prompt, None);
    check(&prompt, None, "miss", "forged");

    // Valid values of tenant-a moved to the keys tenant-b's lookup reads.
    let prompt = long_prompt("List", 4, WORDS, QUESTION);
    written_by(&redis, &a, &model, &prompt, Some("tenant-a"));
    let chain = sealed(&redis);
    let tokens: Vec<TokenId> = chain
        .iter()
        .flat_map(|(_, _, r)| r.tokens.clone())
        .collect();
    let ns =
        HashNamespace::new(b_info.checkpoint.clone()).with_salt(Some(CacheSalt::new("tenant-b")));
    let hashes = block_hashes(ns.root_seed(), &tokens, BlockSize(b_info.block_size.0));
    let _: () = redis::cmd("FLUSHALL").query(&mut admin(&redis)).unwrap();
    for ((_, value, _), h) in chain.iter().zip(&hashes) {
        set(&redis, &tier_key(*h), value);
    }
    check(&prompt, Some("tenant-b"), "miss", "forged");
}
