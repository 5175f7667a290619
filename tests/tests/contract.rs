#![allow(clippy::unwrap_used)]
//! The hashing contract end to end: for 100 random chats, the block hashes the gateway's
//! code predicts (replica tokenizer spec -> cached tokenizer -> salted chain hashes) are
//! exactly blocks the replica reports storing on its KV event stream.

use gateway::tokenize::CachedTokenizer;
use rand::{Rng, SeedableRng};
use router_policy::{block_hashes, BlockHash, CacheSalt, HashNamespace, KvStreamMessage};
use serde_json::json;
use std::collections::HashSet;
use warmpath_e2e::http::{first_ndjson_line, get, post_json};
use warmpath_e2e::ReplicaProc;
use warmpath_protocol::replica_api::{ReplicaInfo, HEADER_CACHE_SALT};
use warmpath_protocol::text::{ChatMessage, TokenizerSpec};

fn snapshot(addr: &str) -> HashSet<BlockHash> {
    let line = first_ndjson_line(addr, "/v1/kv/events").expect("event stream");
    match serde_json::from_str::<KvStreamMessage>(line.trim()).expect("kv message") {
        KvStreamMessage::Snapshot { hashes, .. } => hashes.into_iter().collect(),
        other => panic!("stream did not start with a snapshot: {other:?}"),
    }
}

fn words(rng: &mut rand::rngs::StdRng, n: usize) -> String {
    const W: &[&str] = &[
        "alpha",
        "beta",
        "gamma",
        "delta",
        "ü",
        "日本",
        "<|im_end|>",
        "42",
        "\n",
        "the",
        "cache",
    ];
    (0..n)
        .map(|_| W[rng.gen_range(0..W.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn gateway_predicted_hashes_equal_replica_stored_hashes() {
    let replica = ReplicaProc::spawn("dummy:tiny").expect("replica");
    let info: ReplicaInfo = get(&replica.addr, "/v1/replica/info", &[])
        .unwrap()
        .json()
        .map(|v| serde_json::from_value(v).unwrap())
        .unwrap();
    let spec: TokenizerSpec = serde_json::from_value(
        get(&replica.addr, "/v1/replica/tokenizer", &[])
            .unwrap()
            .json()
            .unwrap(),
    )
    .unwrap();
    let tok = CachedTokenizer::new(&spec, 256, 16).expect("tokenizer");
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut checked_blocks = 0;
    for i in 0..100 {
        let salt = CacheSalt::new(format!("tenant-{}", i % 3));
        let mut msgs = vec![ChatMessage::new("system", words(&mut rng, 20 + i % 7))];
        for j in 0..rng.gen_range(1..4) {
            let n = rng.gen_range(1..30);
            msgs.push(ChatMessage::new(
                if j % 2 == 0 { "user" } else { "assistant" },
                words(&mut rng, n),
            ));
        }
        let tokens = tok.encode_chat(&msgs).expect("encode");
        let seed = HashNamespace::new(info.checkpoint.clone())
            .with_salt(Some(salt.clone()))
            .root_seed();
        let predicted = block_hashes(seed, &tokens, info.block_size);
        let body = json!({
            "model": info.model,
            "messages": msgs.iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
            "max_tokens": 1, "temperature": 0
        });
        let r = post_json(
            &replica.addr,
            "/v1/chat/completions",
            &[(HEADER_CACHE_SALT, salt.as_str())],
            &body,
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json().unwrap();
        assert_eq!(
            v["usage"]["prompt_tokens"].as_u64().unwrap(),
            tokens.len() as u64,
            "chat {i}: token count"
        );
        let stored = snapshot(&replica.addr);
        for (b, h) in predicted.iter().enumerate() {
            assert!(
                stored.contains(h),
                "chat {i}: block {b} of {} not stored by the replica",
                predicted.len()
            );
        }
        checked_blocks += predicted.len();
    }
    assert!(
        checked_blocks > 100,
        "too few full blocks checked: {checked_blocks}"
    );
}
