//! Routing decision time for one long prompt (default 8,000 tokens): chat template + cached
//! tokenization, salted block hashing, and the policy's selection over 8 replicas, one of
//! which holds the prefix. Prints one JSON line.
//! `route_bench [TOKENS] [ITERATIONS] [TOKENIZER_SPEC_JSON]`: with a spec (as a replica serves
//! it, e.g. SmolLM2's) the system prompt is English text grown until it has TOKENS tokens;
//! without one, the byte-level fixture is used (one token per byte).

use gateway::CachedTokenizer;
use gateway::Router;
use router_policy::{ClusterView, PolicyConfig, ReplicaSnapshot, RouteRequest};
use std::time::Instant;
use warmpath_core::rng::{Draw, SeedableRng, Xoshiro256StarStar};
use warmpath_core::{
    block_hashes, BlockSize, CacheSalt, CheckpointId, Epoch, HashNamespace, KvStreamMessage,
    Millis, ReplicaId, SeqNo,
};
use warmpath_text::bytelevel::chatml_bpe_spec;
use warmpath_text::{ChatMessage, TokenizerSpec};

/// English-like text of about `tokens` tokens under `tok`.
fn system_prompt(tok: &CachedTokenizer, tokens: usize) -> anyhow::Result<String> {
    const WORDS: &[&str] = &[
        "the", "router", "keeps", "its", "cache", "warm", "while", "quick", "brown", "fox",
        "jumps", "over", "lazy", "dog", "prefix", "blocks", "are", "hashed", "once", "and",
        "replicas", "serve", "tenants", "with", "care", "7", "42", "tokens,", "quietly.",
    ];
    let mut text = String::new();
    let mut rng = Xoshiro256StarStar::seed_from_u64(0);
    loop {
        // Grow in steps, then check the real token count.
        for _ in 0..256 {
            text.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
            text.push(' ');
        }
        if tok.inner().encode(&text, false)?.len() >= tokens {
            return Ok(text);
        }
    }
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let tokens: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(8000);
    let iters: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(500);
    let spec: TokenizerSpec = match args.get(3) {
        Some(path) => serde_json::from_slice(&std::fs::read(path)?)?,
        None => chatml_bpe_spec(),
    };
    let tok = CachedTokenizer::new(&spec, 4096, 256)?;
    let system = system_prompt(&tok, tokens)?;
    let checkpoint = CheckpointId::new("bench@1");
    let bs = BlockSize(16);
    let seed = HashNamespace::new(checkpoint.clone())
        .with_salt(Some(CacheSalt::new("tenant")))
        .root_seed();
    let router = Router::new(&PolicyConfig::default(), 0);
    let msgs = |i: usize| {
        vec![
            ChatMessage::new("system", system.clone()),
            ChatMessage::new("user", format!("question {i}")),
        ]
    };
    let warm = tok.encode_chat(&msgs(0))?;
    let held = block_hashes(seed, &warm, bs);
    router.apply_message(
        ReplicaId(3),
        &KvStreamMessage::Snapshot {
            epoch: Epoch(1),
            seq: SeqNo(0),
            hashes: held,
        },
    );
    let view = ClusterView::new(
        (0..8)
            .map(|i| ReplicaSnapshot::idle(ReplicaId(i), checkpoint.clone()))
            .collect(),
    );
    let (mut uncached, mut cached, mut hash, mut select) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut prompt_tokens = 0;
    let mut chosen = ReplicaId(0);
    for i in 0..iters {
        let m = msgs(i + 1);
        let t0 = Instant::now();
        let a = tok.encode_chat_uncached(&m)?;
        let t1 = Instant::now();
        let ids = tok.encode_chat(&m)?;
        let t2 = Instant::now();
        assert_eq!(a, ids);
        let hashes = block_hashes(seed, &ids, bs);
        let t3 = Instant::now();
        let req = RouteRequest {
            checkpoint: &checkpoint,
            hashes: &hashes,
            prompt_tokens: ids.len() as u32,
            block_size: bs,
            now: Millis(i as u64),
            regions: None,
            residency: &[],
        };
        let d = router.select(&req, &view)?;
        let t4 = Instant::now();
        chosen = d.replica;
        prompt_tokens = ids.len();
        uncached.push((t1 - t0).as_secs_f64() * 1e6);
        cached.push((t2 - t1).as_secs_f64() * 1e6);
        hash.push((t3 - t2).as_secs_f64() * 1e6);
        select.push((t4 - t3).as_secs_f64() * 1e6);
    }
    let total: Vec<f64> = (0..iters)
        .map(|i| cached[i] + hash[i] + select[i])
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "prompt_tokens": prompt_tokens,
            "tokenizer": if args.get(3).is_some() { "spec file" } else { "byte-level fixture" },
            "replicas": 8,
            "chosen": chosen.0,
            "p50_us": {
                "tokenize_uncached": p50(uncached),
                "tokenize_cached": p50(cached),
                "hash": p50(hash),
                "select": p50(select),
                "decision_total": p50(total),
            }
        })
    );
    Ok(())
}
