//! [`FastByteLevel`]: the GPT-2 byte-level pre-tokenizer without the backtracking regex
//! engine, in front of the HF tokenizer's own BPE model.
//!
//! HF `tokenizers` splits byte-level text with
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` through
//! `fancy-regex` (the lookahead needs backtracking), and builds offset-tracking strings
//! around every split. For a short message that is about 10 us, nearly all of it outside
//! the BPE merges. This module runs the same split with the linear-time `regex` crate and a
//! fix-up for the lookahead (below), maps bytes to the byte-level alphabet, and asks the
//! tokenizer's BPE model (and its word cache) for the ids. It is used only for text that
//! contains no added tokens (the caller has split those off) and only for tokenizer
//! definitions whose every step it reproduces ([`FastByteLevel::from_spec`] checks the
//! JSON); anything else keeps the HF path. A property test compares both on random text.
//!
//! The lookahead fix-up: `\s+(?!\S)` takes a whitespace run but leaves its last character
//! when a non-space follows, so that `' '` can start the next word (`" world"`) or, for
//! another whitespace character, be a token of its own. Matching `\s+` greedily and, when
//! the run has two or more characters and text follows, giving the last character back
//! yields the same splits.

use crate::bytelevel::BYTE_CHARS;
use regex::Regex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use tokenizers::models::ModelWrapper;
use tokenizers::{Model, Tokenizer};
use warmpath_core::TokenId;

/// The GPT-2 split without the lookahead alternative (see the module docs).
static SPLIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+")
        .expect("the GPT-2 split pattern compiles")
});

/// How digits are split off before the byte-level split (`Digits` pre-tokenizer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DigitSplit {
    /// No `Digits` step.
    None,
    /// `individual_digits: true`: every numeric character alone.
    Each,
    /// `individual_digits: false`: runs of numeric characters.
    Runs,
}

/// The fast path for one tokenizer definition (see the module docs).
#[derive(Clone)]
pub struct FastByteLevel {
    inner: Arc<Tokenizer>,
    digits: DigitSplit,
}

impl std::fmt::Debug for FastByteLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastByteLevel")
            .field("digits", &self.digits)
            .finish()
    }
}

impl FastByteLevel {
    /// The fast path for `inner`, whose definition is `json`, when it reproduces every
    /// step: no normalizer; a byte-level pre-tokenizer with the regex and no prefix space,
    /// optionally after `Digits`; a BPE model without dropout, byte fallback, unknown
    /// token fusing or word affixes; no post-processor that adds tokens; no added token
    /// matched after normalization. `None` otherwise.
    pub(crate) fn from_spec(json: &serde_json::Value, inner: Arc<Tokenizer>) -> Option<Self> {
        if !json.get("normalizer").is_none_or(|v| v.is_null()) {
            return None;
        }
        let pp = json.get("post_processor").filter(|v| !v.is_null());
        if pp.is_some_and(|p| p.get("type").and_then(|t| t.as_str()) != Some("ByteLevel")) {
            return None;
        }
        let added = json.get("added_tokens").and_then(|a| a.as_array());
        if added.is_some_and(|a| {
            a.iter()
                .any(|t| t.get("normalized").and_then(|v| v.as_bool()) != Some(false))
        }) {
            return None;
        }
        let digits = pre_tokenizer_shape(json.get("pre_tokenizer")?)?;
        let model = json.get("model")?;
        let field = |k: &str| model.get(k).filter(|v| !v.is_null());
        let flag = |k: &str| field(k).and_then(|v| v.as_bool()).unwrap_or(false);
        let dropout = field("dropout").and_then(|v| v.as_f64()).unwrap_or(0.0);
        if model.get("type").and_then(|t| t.as_str()) != Some("BPE")
            || dropout != 0.0
            || flag("byte_fallback")
            || flag("ignore_merges")
            || field("unk_token").is_some()
            || field("continuing_subword_prefix").is_some()
            || field("end_of_word_suffix").is_some()
        {
            return None;
        }
        if !matches!(inner.get_model(), ModelWrapper::BPE(_)) {
            return None;
        }
        Some(Self { inner, digits })
    }

    /// Appends the ids of `text` to `out`, exactly as the HF tokenizer encodes it without
    /// special tokens. `text` must contain no added token.
    pub fn encode_into(&self, text: &str, out: &mut Vec<TokenId>) -> Result<(), String> {
        let ModelWrapper::BPE(bpe) = self.inner.get_model() else {
            return Err("the tokenizer model is not BPE".into());
        };
        let mut words = Words {
            bpe,
            word: String::with_capacity(64),
            memo: (text.len() >= MEMO_MIN_BYTES).then(HashMap::default),
        };
        match self.digits {
            DigitSplit::None => words.emit(text, out),
            DigitSplit::Each | DigitSplit::Runs => {
                let mut start = 0;
                let mut chars = text.char_indices().peekable();
                while let Some((i, c)) = chars.next() {
                    if !c.is_numeric() {
                        continue;
                    }
                    let mut end = i + c.len_utf8();
                    if self.digits == DigitSplit::Runs {
                        while let Some(&(j, d)) = chars.peek() {
                            if !d.is_numeric() {
                                break;
                            }
                            end = j + d.len_utf8();
                            chars.next();
                        }
                    }
                    words.emit(&text[start..i], out)?;
                    words.emit(&text[i..end], out)?;
                    start = end;
                }
                words.emit(&text[start..], out)
            }
        }
    }
}

/// Texts of at least this many bytes memoize their words (see [`Words`]); below it, the
/// map costs more than the repeats it saves.
const MEMO_MIN_BYTES: usize = 2048;

/// One text's words through the BPE model. The model caches merges per word, but every
/// call still clones the cached word and a `String` per token; a long text repeats most of
/// its words, so with `memo` each distinct word goes through the model once per text and
/// every later occurrence copies its ids from where they already are in `out` (the model is
/// deterministic: no dropout, [`FastByteLevel::from_spec`]).
struct Words<'t, 'm> {
    bpe: &'m tokenizers::models::bpe::BPE,
    /// The byte-level form of the current word.
    word: String,
    /// Each word of the text seen so far: where its ids start in `out`, and how many.
    memo: Option<HashMap<&'t str, (usize, usize)>>,
}

impl<'t> Words<'t, '_> {
    fn emit(&mut self, piece: &'t str, out: &mut Vec<TokenId>) -> Result<(), String> {
        for w in split_words(piece) {
            if let Some(&(at, n)) = self.memo.as_ref().and_then(|m| m.get(w)) {
                out.extend_from_within(at..at + n);
                continue;
            }
            self.word.clear();
            self.word.extend(w.bytes().map(|b| BYTE_CHARS[b as usize]));
            let tokens = self.bpe.tokenize(&self.word).map_err(|e| e.to_string())?;
            let at = out.len();
            out.extend(tokens.iter().map(|t| TokenId(t.id)));
            if let Some(memo) = self.memo.as_mut() {
                memo.insert(w, (at, tokens.len()));
            }
        }
        Ok(())
    }
}

/// `Some(digit split)` when `pre` is `ByteLevel` (regex on, no prefix space) alone or after
/// one `Digits` step.
fn pre_tokenizer_shape(pre: &serde_json::Value) -> Option<DigitSplit> {
    let is_byte_level = |p: &serde_json::Value| {
        p.get("type").and_then(|t| t.as_str()) == Some("ByteLevel")
            && p.get("use_regex").and_then(|v| v.as_bool()).unwrap_or(true)
            && !p
                .get("add_prefix_space")
                .and_then(|v| v.as_bool())
                .unwrap_or(true)
    };
    match pre.get("type").and_then(|t| t.as_str())? {
        "ByteLevel" if is_byte_level(pre) => Some(DigitSplit::None),
        "Sequence" => match pre.get("pretokenizers")?.as_array()?.as_slice() {
            [only] if is_byte_level(only) => Some(DigitSplit::None),
            [digits, bl]
                if digits.get("type").and_then(|t| t.as_str()) == Some("Digits")
                    && is_byte_level(bl) =>
            {
                match digits.get("individual_digits").and_then(|v| v.as_bool()) {
                    Some(true) => Some(DigitSplit::Each),
                    _ => Some(DigitSplit::Runs),
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// The GPT-2 words of `text`, with the lookahead fix-up (see the module docs).
fn split_words(text: &str) -> impl Iterator<Item = &str> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let m = SPLIT.find_at(text, at)?;
        let mut end = m.end();
        let s = m.as_str();
        // A run of whitespace only (the `\s+` alternative) of two or more characters.
        if end < text.len() && s.chars().all(char::is_whitespace) {
            if let Some((last, _)) = s.char_indices().last().filter(|&(i, _)| i > 0) {
                end = m.start() + last;
            }
        }
        at = end;
        Some(&text[m.start()..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_runs_give_back_their_last_character() {
        let words: Vec<&str> = split_words("a   b\n\nc  ").collect();
        assert_eq!(words, ["a", "  ", " b", "\n", "\n", "c", "  "]);
    }
}
