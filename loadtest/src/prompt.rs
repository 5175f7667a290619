//! Deterministic prompt content: a prompt is a chain of segments, each a pseudo-random run of
//! tokens seeded by a key, so equal keys give equal tokens (and equal text).
//!
//! The simulator hashes the tokens with the shared contract (`warmpath_core::hash`); `run`
//! sends the matching pseudo-word text, one common English word per token, so the real
//! tokenizer's count is close to the target and equal prefixes tokenize equally.

use crate::rng::{mix, seeded, Draw};
use std::collections::HashMap;
use std::sync::Arc;
use warmpath_core::hash::block_hash;
use warmpath_core::{BlockHash, BlockSize, ChainHasher, RootSeed, TokenId};

/// One run of tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// Content seed: equal keys give equal token runs (a shorter run is a prefix of a longer).
    pub key: u64,
    /// Length in tokens.
    pub tokens: u32,
    /// Hint: this segment recurs in other prompts (worth memoising its hashes).
    pub shared: bool,
}

impl Segment {
    /// A segment whose content is seeded by `parts`.
    pub fn new(parts: &[u64], tokens: u32, shared: bool) -> Self {
        Self {
            key: mix(parts),
            tokens,
            shared,
        }
    }

    /// The segment's token ids.
    pub fn token_ids(&self) -> impl Iterator<Item = TokenId> {
        let mut rng = seeded(self.key);
        (0..self.tokens)
            .map(move |_| TokenId(WORD_TOKEN_BASE + rng.below(WORDS.len() as u64) as u32))
    }
}

/// A prompt: segments concatenated in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The segments, in order.
    pub segments: Vec<Segment>,
}

impl Prompt {
    /// Total tokens.
    pub fn tokens(&self) -> u32 {
        self.segments.iter().map(|s| s.tokens).sum()
    }

    /// All token ids.
    pub fn token_ids(&self) -> Vec<TokenId> {
        self.segments.iter().flat_map(Segment::token_ids).collect()
    }

    /// The pseudo-word text sent to a real endpoint (one word per token, each with a leading
    /// space so that concatenation never merges words across segment boundaries).
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(self.tokens() as usize * 6);
        for seg in &self.segments {
            for t in seg.token_ids() {
                out.push(' ');
                out.push_str(WORDS[(t.0 - WORD_TOKEN_BASE) as usize]);
            }
        }
        out
    }
}

/// First synthetic token id (keeps clear of special tokens).
const WORD_TOKEN_BASE: u32 = 1000;

/// Common English words that are single tokens (with a leading space) in GPT-2-style BPE
/// vocabularies such as SmolLM2's.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "it",
    "an",
    "were",
    "are",
    "which",
    "this",
    "be",
    "or",
    "had",
    "not",
    "first",
    "their",
    "her",
    "but",
    "one",
    "new",
    "also",
    "after",
    "two",
    "been",
    "its",
    "has",
    "they",
    "who",
    "he",
    "she",
    "all",
    "time",
    "when",
    "more",
    "most",
    "some",
    "there",
    "other",
    "into",
    "only",
    "over",
    "city",
    "would",
    "year",
    "years",
    "then",
    "made",
    "where",
    "about",
    "between",
    "state",
    "world",
    "during",
    "while",
    "school",
    "many",
    "national",
    "three",
    "such",
    "later",
    "used",
    "known",
    "under",
    "early",
    "team",
    "part",
    "film",
    "second",
    "since",
    "season",
    "family",
    "war",
    "both",
    "each",
    "may",
    "would",
    "before",
    "through",
    "well",
    "born",
    "group",
    "music",
    "high",
    "name",
    "these",
    "against",
    "series",
    "can",
    "house",
    "number",
    "however",
    "album",
    "play",
    "area",
    "south",
    "north",
    "water",
    "game",
    "line",
    "club",
    "long",
    "people",
    "work",
    "day",
    "following",
    "around",
    "church",
    "west",
    "east",
    "history",
    "large",
    "government",
    "public",
    "back",
    "became",
    "road",
    "band",
    "station",
    "life",
    "four",
    "member",
    "called",
    "several",
    "until",
    "based",
    "river",
    "university",
    "found",
    "local",
    "main",
    "same",
    "along",
    "five",
    "book",
    "set",
    "won",
    "served",
    "like",
    "any",
    "church",
    "small",
    "village",
    "county",
    "power",
    "field",
    "light",
    "open",
    "land",
    "home",
    "final",
    "great",
    "order",
    "young",
    "green",
    "blue",
    "red",
    "black",
    "white",
    "good",
    "best",
    "old",
    "last",
    "next",
    "point",
    "case",
    "side",
    "room",
    "form",
    "level",
    "event",
    "place",
    "table",
    "data",
    "model",
    "value",
    "cost",
    "rate",
    "test",
    "plan",
    "code",
    "file",
    "list",
    "page",
    "word",
    "text",
    "key",
    "tree",
    "node",
    "path",
    "step",
    "load",
    "cache",
    "block",
    "route",
    "query",
    "answer",
    "story",
    "river",
    "stone",
    "bird",
    "fish",
    "horse",
    "paper",
    "glass",
    "metal",
    "wood",
    "fire",
    "wind",
    "rain",
    "snow",
    "moon",
    "star",
    "sun",
    "sea",
    "hill",
    "lake",
    "road",
    "town",
    "port",
    "gate",
    "wall",
    "door",
    "bridge",
];

/// Hashes prompts into the shared contract's block hashes, memoising shared segments that
/// start on a block boundary (e.g. a Mooncake hash id, a group's system prompt): the result
/// is identical to hashing the concatenated tokens.
#[derive(Debug)]
pub struct PromptHasher {
    seed: RootSeed,
    block_size: BlockSize,
    memo: HashMap<(u64, u64, u32), Arc<[BlockHash]>>,
}

/// Memo entries kept before the memo is reset (bounds memory on huge traces).
const MEMO_LIMIT: usize = 2_000_000;

impl PromptHasher {
    /// A hasher for one namespace seed and block size.
    pub fn new(seed: RootSeed, block_size: BlockSize) -> Self {
        Self {
            seed,
            block_size,
            memo: HashMap::new(),
        }
    }

    /// The block size.
    pub fn block_size(&self) -> BlockSize {
        self.block_size
    }

    /// Chained hashes of every full block of the prompt.
    pub fn hashes(&mut self, prompt: &Prompt) -> Vec<BlockHash> {
        let bs = self.block_size.get();
        let mut out: Vec<BlockHash> = Vec::with_capacity(prompt.tokens() as usize / bs + 1);
        let mut prev = self.seed.0;
        let mut idx = 0;
        while idx < prompt.segments.len() {
            let seg = prompt.segments[idx];
            if !(seg.shared && (seg.tokens as usize).is_multiple_of(bs)) {
                break;
            }
            let key = (prev, seg.key, seg.tokens);
            let hs = match self.memo.get(&key) {
                Some(h) => h.clone(),
                None => {
                    let toks: Vec<TokenId> = seg.token_ids().collect();
                    let mut p = prev;
                    let hs: Vec<BlockHash> = toks
                        .chunks_exact(bs)
                        .map(|c| {
                            let h = block_hash(p, c);
                            p = h.0;
                            h
                        })
                        .collect();
                    let hs: Arc<[BlockHash]> = hs.into();
                    if self.memo.len() >= MEMO_LIMIT {
                        self.memo.clear();
                    }
                    self.memo.insert(key, hs.clone());
                    hs
                }
            };
            if let Some(last) = hs.last() {
                prev = last.0;
            }
            out.extend_from_slice(&hs);
            idx += 1;
        }
        if idx < prompt.segments.len() {
            let mut h = ChainHasher::new(RootSeed(prev), self.block_size);
            for seg in &prompt.segments[idx..] {
                let toks: Vec<TokenId> = seg.token_ids().collect();
                h.extend(&toks);
            }
            out.extend_from_slice(h.hashes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warmpath_core::{block_hashes, CheckpointId, HashNamespace};

    fn prompt(parts: &[(u64, u32, bool)]) -> Prompt {
        Prompt {
            segments: parts
                .iter()
                .map(|&(k, t, s)| Segment::new(&[k], t, s))
                .collect(),
        }
    }

    #[test]
    fn memoised_hashes_equal_the_contract_on_concatenated_tokens() {
        let seed = HashNamespace::new(CheckpointId::new("sim")).root_seed();
        let bs = BlockSize(16);
        let mut h = PromptHasher::new(seed, bs);
        for p in [
            prompt(&[(1, 64, true), (2, 40, false)]),
            prompt(&[(1, 64, true), (3, 37, true), (4, 32, true)]),
            prompt(&[(1, 64, true), (2, 40, false)]),
            prompt(&[(5, 7, false)]),
        ] {
            let want = block_hashes(seed, &p.token_ids(), bs);
            assert_eq!(h.hashes(&p), want);
        }
    }

    #[test]
    fn equal_keys_give_equal_tokens_and_text() {
        let a = prompt(&[(9, 30, true), (10, 5, false)]);
        let b = prompt(&[(9, 30, true), (11, 5, false)]);
        assert_eq!(a.token_ids()[..30], b.token_ids()[..30]);
        assert_ne!(a.token_ids()[30..], b.token_ids()[30..]);
        assert_eq!(a.text().split(' ').count(), 36); // leading empty piece + 35 words
        let ta = a.text();
        let tb = b.text();
        let common = ta
            .chars()
            .zip(tb.chars())
            .take_while(|(x, y)| x == y)
            .count();
        assert!(common >= ta.split(' ').take(31).map(|w| w.len() + 1).sum::<usize>() - 1);
    }
}
