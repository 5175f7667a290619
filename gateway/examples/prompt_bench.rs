//! The gateway's tokenize-and-hash cost for long prompts (issue 39): a chat whose user turn
//! is real English text (this repository's Markdown docs, repeated) of about TOKENS tokens,
//! tokenized with the gateway's `CachedTokenizer` and block-hashed (B=16, salted) as a
//! request's prepare step does. Prints one JSON line:
//!
//! - `cold_ms`: tokenize a prompt never seen before (its text differs from every earlier
//!   one), p50 over ITERATIONS; `tok_per_s_core` = tokens / that time (one thread);
//! - `hash_ms`: block hashes of those tokens;
//! - `cached_ms`: the same prompt again (the piece cache holds it: one content hash);
//! - `next_turn_ms`: a conversation of `TURNS` turns with the same total size, whose earlier
//!   turns were sent before, plus a new short question (each turn's text is its own cached
//!   piece, so only the new turn is tokenized).
//!
//! `prompt_bench TOKENIZER [TOKENS] [ITERATIONS] [CORPUS_DIR]`: TOKENIZER is a tokenizer
//! spec JSON (as a replica serves it) or a GGUF file; TOKENS defaults to 131072 (128k),
//! ITERATIONS to 7, CORPUS_DIR to the repository's `docs/`.

use gateway::CachedTokenizer;
use std::path::{Path, PathBuf};
use std::time::Instant;
use warmpath_core::{block_hashes, BlockSize, CacheSalt, CheckpointId, HashNamespace};
use warmpath_text::{ChatMessage, TokenizerSpec};

/// Every Markdown file under `dir`, sorted, concatenated.
fn corpus(dir: &Path) -> anyhow::Result<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let mut text = String::new();
    for f in files {
        text.push_str(&std::fs::read_to_string(f)?);
        text.push('\n');
    }
    anyhow::ensure!(!text.is_empty(), "no Markdown under {}", dir.display());
    Ok(text)
}

/// About `tokens` tokens of `corpus` (repeated as needed), cut at a line end.
fn english(tok: &CachedTokenizer, corpus: &str, tokens: usize) -> anyhow::Result<String> {
    let per_byte = tok.inner().encode(corpus, false)?.len() as f64 / corpus.len() as f64;
    let want = (tokens as f64 / per_byte) as usize;
    let mut text = String::with_capacity(want + corpus.len());
    while text.len() < want {
        text.push_str(corpus);
    }
    // A line end is a char boundary; so is the corpus's end.
    let cut = text.as_bytes()[..want].iter().rposition(|&b| b == b'\n');
    text.truncate(cut.unwrap_or(corpus.len()));
    Ok(text)
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

const TURNS: usize = 16;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or_else(|| {
        anyhow::anyhow!("usage: prompt_bench TOKENIZER [TOKENS] [ITERATIONS] [CORPUS_DIR]")
    })?;
    let tokens: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(131_072);
    let iters: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(7).max(1);
    let dir = args
        .get(4)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs"));
    let spec: TokenizerSpec = if path.ends_with(".gguf") {
        warmpath_text::gguf::tokenizer_spec_from_file(Path::new(path))?
    } else {
        serde_json::from_slice(&std::fs::read(path)?)?
    };
    // The gateway's defaults for the piece cache (config `tokenizer:`): 4096 pieces, 256 bytes and up.
    let tok = CachedTokenizer::new(&spec, 4096, 256)?;
    let text = english(&tok, &corpus(&dir)?, tokens)?;
    let checkpoint = CheckpointId::new("bench@1");
    let seed = HashNamespace::new(checkpoint)
        .with_salt(Some(CacheSalt::new("tenant")))
        .root_seed();
    let bs = BlockSize(16);
    let chat = |user: String| {
        vec![
            ChatMessage::new("system", "You are a helpful assistant."),
            ChatMessage::new("user", user),
        ]
    };
    let (mut cold, mut hash, mut cached) = (Vec::new(), Vec::new(), Vec::new());
    let mut n_tokens = 0;
    for i in 0..iters {
        // A new first line: a piece never seen, so the whole text is tokenized.
        let msgs = chat(format!("Request {i}: summarise this.\n{text}"));
        let t = Instant::now();
        let ids = tok.encode_chat(&msgs)?;
        cold.push(ms(t));
        let t = Instant::now();
        let hashes = block_hashes(seed, &ids, bs);
        hash.push(ms(t));
        let t = Instant::now();
        let again = tok.encode_chat(&msgs)?;
        cached.push(ms(t));
        anyhow::ensure!(again == ids && hashes.len() == ids.len() / 16, "mismatch");
        n_tokens = ids.len();
    }
    // A conversation of TURNS turns cut from the same text; earlier turns already seen.
    let lines: Vec<&str> = text.lines().collect();
    let per = lines.len().div_ceil(TURNS);
    let mut convo = vec![ChatMessage::new("system", "You are a helpful assistant.")];
    for (k, chunk) in lines.chunks(per).enumerate() {
        let role = if k % 2 == 0 { "user" } else { "assistant" };
        convo.push(ChatMessage::new(role, chunk.join("\n")));
    }
    tok.encode_chat(&convo)?;
    let mut next_turn = Vec::new();
    for i in 0..iters {
        let mut msgs = convo.clone();
        msgs.push(ChatMessage::new("user", format!("And question {i}?")));
        let t = Instant::now();
        let ids = tok.encode_chat(&msgs)?;
        block_hashes(seed, &ids, bs);
        next_turn.push(ms(t));
    }
    let cold_ms = p50(cold);
    println!(
        "{}",
        serde_json::json!({
            "tokens": n_tokens,
            "text_bytes": text.len(),
            "iterations": iters,
            "cold_ms": cold_ms,
            "tok_per_s_core": (n_tokens as f64 / (cold_ms / 1e3)).round(),
            "hash_ms": p50(hash),
            "cached_ms": p50(cached),
            "next_turn_ms": p50(next_turn),
            "turns": TURNS,
        })
    );
    Ok(())
}
