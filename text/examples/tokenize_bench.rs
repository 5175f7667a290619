//! Per-call time of encoding a short chat message (the varying user turn of a request)
//! through the HF pipeline and through the fast byte-level path, side by side in one run.
//! `tokenize_bench SPEC_JSON` (a spec as `replica serve` publishes it at
//! `/v1/replica/tokenizer`). Prints one JSON line.

use std::time::Instant;
use warmpath_text::{ChatTokenizer, TokenizerSpec};

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: tokenize_bench SPEC_JSON"))?;
    let spec: TokenizerSpec = serde_json::from_slice(&std::fs::read(path)?)?;
    let tok = ChatTokenizer::from_spec(&spec)?;
    anyhow::ensure!(tok.has_fast_path(), "this tokenizer has no fast path");
    let n = 20_000;
    let mut best = [f64::MAX; 2];
    for _round in 0..3 {
        for (k, fast) in [false, true].into_iter().enumerate() {
            let t = Instant::now();
            let mut ids = Vec::new();
            for i in 0..n {
                let text = format!("user\nQuestion number {i}: what is next?");
                ids.clear();
                if fast {
                    tok.encode_plain_into(&text, &mut ids)?;
                } else {
                    ids = tok.encode(&text, false)?;
                }
            }
            best[k] = best[k].min(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
    }
    println!(
        "{{\"hf_us\": {:.2}, \"fast_us\": {:.2}, \"speedup\": {:.1}}}",
        best[0],
        best[1],
        best[0] / best[1]
    );
    Ok(())
}
