//! The llama.cpp reference fixtures (`engine/fixtures/llamacpp_smollm2.json`, written by
//! `scripts/gen-fixtures.py`), shared by the engine tests that compare against them.
#![allow(dead_code)] // each test binary reads a different subset of the fields

use serde::Deserialize;

/// Everything the fixture file holds.
#[derive(Deserialize)]
pub(crate) struct Fixtures {
    /// Tokenizer cases: text and llama.cpp's ids.
    pub(crate) tokenize: Vec<TokCase>,
    /// Prompts with llama.cpp's greedy continuation and last-position logits.
    pub(crate) prompts: Vec<Prompt>,
}

/// One tokenizer case.
#[derive(Deserialize)]
pub(crate) struct TokCase {
    pub(crate) text: String,
    pub(crate) ids: Vec<u32>,
}

/// One prompt ("raw" text or a "chat" message) and llama.cpp's answers.
#[derive(Deserialize)]
pub(crate) struct Prompt {
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) text: String,
    pub(crate) ids: Vec<u32>,
    pub(crate) greedy: Vec<u32>,
    /// argmax of llama.cpp's f32 logits (the stored f16 copy could tie).
    pub(crate) top1: usize,
    /// Last-position logits, f16 little-endian, base64.
    pub(crate) logits_f16_b64: String,
}

/// Reads and parses the fixture file.
pub(crate) fn fixtures() -> Fixtures {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../engine/fixtures/llamacpp_smollm2.json"
    );
    let text = std::fs::read_to_string(path).expect("fixtures present");
    serde_json::from_str(&text).expect("fixtures parse")
}
