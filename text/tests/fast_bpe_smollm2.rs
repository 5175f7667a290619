#![allow(clippy::unwrap_used)]
//! The fast byte-level BPE path ([`warmpath_text::FastByteLevel`]) gives exactly
//! the HF tokenizer's ids on the real SmolLM2 tokenizer, for random text built from the
//! characters that decide the GPT-2 split: letters and digits of several scripts,
//! contractions, punctuation, and runs of every kind of whitespace.

use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;
use warmpath_text::{ChatTokenizer, TokenizerSource};

/// The default model's GGUF where `scripts/fetch-model.sh` puts it (`$WARMPATH_MODEL_DIR`,
/// default `~/.cache/warmpath/models`), as the engine's `fetch::default_model_path` says.
fn smollm2_gguf() -> PathBuf {
    let dir = std::env::var_os("WARMPATH_MODEL_DIR").map_or_else(
        || {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache/warmpath/models")
        },
        PathBuf::from,
    );
    let path = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "{} missing: run scripts/fetch-model.sh to fetch SmolLM2-135M-Instruct",
        path.display()
    );
    path
}

fn smollm2() -> &'static ChatTokenizer {
    static TOK: OnceLock<ChatTokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let loaded = TokenizerSource::from_path(smollm2_gguf())
            .load()
            .expect("the SmolLM2 GGUF's tokenizer reads")
            .expect("a GGUF path names a tokenizer");
        ChatTokenizer::from_spec(&loaded.spec).expect("the SmolLM2 tokenizer builds")
    })
}

const PIECES: &[&str] = &[
    "the",
    " cache",
    "Hello",
    " world",
    "'s",
    "'t",
    "'re",
    "'ve",
    "'m",
    "'ll",
    "'d",
    "'S",
    "'",
    " '",
    "don't",
    "42",
    " 7",
    "3.14",
    "²",
    "½",
    "٣",
    "Ⅻ",
    "日本語",
    " 東京",
    "ü",
    "é",
    "ß",
    "Ω",
    "😀",
    "👍🏽",
    "!",
    "?!",
    " ...",
    ",",
    " (x)",
    "#",
    "$5",
    "-",
    "_",
    "\t",
    "\n",
    "\r\n",
    " ",
    "  ",
    "   ",
    "\u{a0}",
    "\u{2003}",
    "\u{3000}",
    "\u{200b}",
    "\u{0}",
    "\u{7f}",
    "a\u{301}",
    "<|im",
    "|>",
    "<",
    ">",
    "{\"k\": 1}",
    "    fn main() {",
    "</s>",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|v| v.concat())
}

fn both(tok: &ChatTokenizer, s: &str) -> (Vec<u32>, Vec<u32>) {
    let mut fast = Vec::new();
    tok.encode_plain_into(s, &mut fast).unwrap();
    let hf = tok.encode(s, false).unwrap();
    (
        fast.iter().map(|t| t.0).collect(),
        hf.iter().map(|t| t.0).collect(),
    )
}

#[test]
fn smollm2_takes_the_fast_path_and_known_cases_match() {
    let tok = smollm2();
    assert!(
        tok.has_fast_path(),
        "SmolLM2's tokenizer should take the fast path"
    );
    for s in [
        "",
        "Hello world",
        "a   b\n\nc  ",
        "Question number 1234: what is next?",
        "  leading and trailing  ",
        "\n\n\n",
        "x \n y",
        "It's 3 o'clock, isn't it?",
    ] {
        let (fast, hf) = both(tok, s);
        assert_eq!(fast, hf, "{s:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn fast_path_equals_hf_on_random_text(s in text()) {
        let (fast, hf) = both(smollm2(), &s);
        prop_assert_eq!(fast, hf, "text {:?}", s);
    }
}

/// Long random text: past the size where the fast path memoizes each word's ids within a
/// text (`fast_bpe`'s `MEMO_MIN_BYTES`, 2 KiB), so repeated words come from the memo.
fn long_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 1500..3000).prop_map(|v| v.concat())
}

#[test]
fn a_long_text_with_repeated_words_matches() {
    let docs = concat!(
        include_str!("../../ARCHITECTURE.md"),
        include_str!("../../README.md")
    );
    let cut = (4000..).find(|&i| docs.is_char_boundary(i)).unwrap();
    for s in [docs, &docs.repeat(3)[..], &docs[..cut]] {
        assert!(s.len() > 2048);
        let (fast, hf) = both(smollm2(), s);
        assert_eq!(fast, hf, "{} bytes", s.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn fast_path_equals_hf_on_long_random_text(s in long_text()) {
        prop_assume!(s.len() > 2048);
        let (fast, hf) = both(smollm2(), &s);
        prop_assert_eq!(fast, hf, "{} bytes", s.len());
    }
}
