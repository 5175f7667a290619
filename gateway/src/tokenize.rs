//! Tokenizing exactly as the replica does, fast.
//!
//! The chat template is rendered to text, then the text is cut at the added tokens that the
//! HF tokenizer itself splits on first (non-normalized added tokens such as `<|im_start|>`).
//! The pieces between them are tokenized independently by the tokenizer anyway, so
//! tokenizing piece by piece gives the same ids as tokenizing the whole text; each long piece
//! is cached by a 128-bit content hash in a bounded LRU, so a shared system prompt costs one
//! hash instead of one BPE run.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use lru::LruCache;
use parking_lot::Mutex;
use router_policy::TokenId;
use std::num::NonZeroUsize;
use std::sync::Arc;
use warmpath_protocol::text::{ChatMessage, ChatTokenizer, TextError, TokenizerSpec};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

/// A replica's tokenizer plus the per-piece token cache.
pub struct CachedTokenizer {
    inner: ChatTokenizer,
    splitter: Option<(AhoCorasick, Vec<TokenId>)>,
    cache: Mutex<LruCache<u128, Arc<[TokenId]>>>,
    min_cached_bytes: usize,
}

impl std::fmt::Debug for CachedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedTokenizer")
            .field("inner", &self.inner)
            .finish()
    }
}

impl CachedTokenizer {
    /// Builds the tokenizer a replica described.
    pub fn new(
        spec: &TokenizerSpec,
        cache_entries: usize,
        min_cached_bytes: usize,
    ) -> Result<Self, TextError> {
        let inner = ChatTokenizer::from_spec(spec)?;
        let splitter = build_splitter(&spec.tokenizer);
        let cap = NonZeroUsize::new(cache_entries).unwrap_or(NonZeroUsize::MIN);
        Ok(Self {
            inner,
            splitter,
            cache: Mutex::new(LruCache::new(cap)),
            min_cached_bytes,
        })
    }

    /// The underlying tokenizer.
    pub fn inner(&self) -> &ChatTokenizer {
        &self.inner
    }

    /// Chat prompt tokens (template with generation prompt). A short chat (at most
    /// [`PROMPT_CACHE_MAX_BYTES`] of roles and contents) is looked up whole by a content
    /// hash of its messages first, so a repeated short prompt costs one hash: no template
    /// rendering, no scan. Otherwise the template is rendered and the text goes through the
    /// piece cache.
    pub fn encode_chat(&self, messages: &[ChatMessage]) -> Result<Vec<TokenId>, TextError> {
        let bytes: usize = messages
            .iter()
            .map(|m| m.role.len() + m.content.len())
            .sum();
        if bytes > PROMPT_CACHE_MAX_BYTES {
            let text = self.inner.render_chat(messages, true)?;
            return self.encode(&text, true);
        }
        let key = chat_key(messages);
        if let Some(hit) = self.cache.lock().get(&key) {
            return Ok(hit.to_vec());
        }
        let text = self.inner.render_chat(messages, true)?;
        let ids = self.encode(&text, true)?;
        self.cache.lock().put(key, ids.as_slice().into());
        Ok(ids)
    }

    /// Chat prompt tokens without the cache (reference path).
    pub fn encode_chat_uncached(
        &self,
        messages: &[ChatMessage],
    ) -> Result<Vec<TokenId>, TextError> {
        self.inner.encode_chat(messages)
    }

    /// Encodes `text` as `ChatTokenizer::encode` does, through the piece cache.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, TextError> {
        let Some((ac, ids)) = &self.splitter else {
            return self.inner.encode(text, add_special);
        };
        let mut out = Vec::with_capacity(text.len() / 3 + 4);
        if add_special && self.inner.spec().add_bos {
            if let Some(bos) = self.inner.bos_token() {
                out.push(bos);
            }
        }
        let mut at = 0;
        for m in ac.find_iter(text) {
            self.encode_piece(&text[at..m.start()], &mut out)?;
            out.push(ids[m.pattern().as_usize()]);
            at = m.end();
        }
        self.encode_piece(&text[at..], &mut out)?;
        Ok(out)
    }

    fn encode_piece(&self, piece: &str, out: &mut Vec<TokenId>) -> Result<(), TextError> {
        if piece.is_empty() {
            return Ok(());
        }
        if piece.len() < self.min_cached_bytes {
            out.extend(self.inner.encode(piece, false)?);
            return Ok(());
        }
        let key = xxh3_128(piece.as_bytes());
        if let Some(hit) = self.cache.lock().get(&key) {
            out.extend_from_slice(hit);
            return Ok(());
        }
        let ids: Arc<[TokenId]> = self.inner.encode(piece, false)?.into();
        out.extend_from_slice(&ids);
        self.cache.lock().put(key, ids);
        Ok(())
    }

    /// Entries in the piece cache.
    pub fn cached_pieces(&self) -> usize {
        self.cache.lock().len()
    }
}

/// Largest chat (bytes of roles and contents) cached whole by [`CachedTokenizer::encode_chat`].
pub const PROMPT_CACHE_MAX_BYTES: usize = 4096;

/// The cache key of a whole chat: a 128-bit hash of its messages, length-prefixed so no two
/// message lists share an encoding, and domain-separated from the keys of text pieces.
fn chat_key(messages: &[ChatMessage]) -> u128 {
    let mut h = Xxh3::new();
    h.update(b"warmpath.chat-prompt.v1\0");
    for m in messages {
        h.update(&(m.role.len() as u64).to_le_bytes());
        h.update(m.role.as_bytes());
        h.update(&(m.content.len() as u64).to_le_bytes());
        h.update(m.content.as_bytes());
    }
    h.digest128()
}

/// The added tokens the HF tokenizer splits on before normalizing, if splitting on them is
/// exactly equivalent (no lstrip/rstrip/single-word behaviour); otherwise `None`, and the
/// whole text is tokenized in one go.
fn build_splitter(tokenizer: &serde_json::Value) -> Option<(AhoCorasick, Vec<TokenId>)> {
    let added = tokenizer.get("added_tokens")?.as_array()?;
    let mut pats = Vec::new();
    let mut ids = Vec::new();
    for t in added {
        let normalized = t
            .get("normalized")
            .and_then(|v| v.as_bool())
            .unwrap_or(true);
        if normalized {
            continue;
        }
        let flag = |k: &str| t.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
        if flag("lstrip") || flag("rstrip") || flag("single_word") {
            return None;
        }
        let content = t.get("content")?.as_str()?;
        let id = t.get("id")?.as_u64()?;
        pats.push(content.to_string());
        ids.push(TokenId(u32::try_from(id).ok()?));
    }
    if pats.is_empty() {
        return None;
    }
    let ac = AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&pats)
        .ok()?;
    Some((ac, ids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::byte_level_spec;
    use rand::{Rng, SeedableRng};

    fn random_text(rng: &mut rand::rngs::StdRng, len: usize) -> String {
        const WORDS: &[&str] = &[
            "the",
            " cache",
            " prefix",
            "ü",
            "日本",
            " <|im_start|>",
            "<|im_end|>",
            "\n",
            "  ",
            " routing",
            "!",
            "?",
            " 42",
            "tok",
            "<|im_",
            "|>",
            "é",
            " a",
        ];
        (0..len)
            .map(|_| WORDS[rng.gen_range(0..WORDS.len())])
            .collect()
    }

    #[test]
    fn cached_and_uncached_tokenization_are_identical() {
        let tok = CachedTokenizer::new(&byte_level_spec(), 64, 8).unwrap();
        assert!(tok.splitter.is_some());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let system = random_text(&mut rng, 400);
        // Past PROMPT_CACHE_MAX_BYTES: rendered every time, pieces cached.
        let long_system = random_text(&mut rng, 3000);
        assert!(long_system.len() > PROMPT_CACHE_MAX_BYTES);
        for i in 0..200 {
            let sys = if i % 2 == 0 { &system } else { &long_system };
            let mut msgs = vec![ChatMessage::new("system", sys.clone())];
            for j in 0..rng.gen_range(1..4) {
                let role = if j % 2 == 0 { "user" } else { "assistant" };
                let n = rng.gen_range(0..60);
                msgs.push(ChatMessage::new(role, random_text(&mut rng, n)));
            }
            let a = tok.encode_chat(&msgs).unwrap();
            let b = tok.encode_chat_uncached(&msgs).unwrap();
            assert_eq!(a, b, "chat {i} differs");
            // Again: short chats now come from the whole-prompt cache.
            assert_eq!(
                tok.encode_chat(&msgs).unwrap(),
                b,
                "chat {i} differs cached"
            );
            let raw = random_text(&mut rng, 80);
            assert_eq!(
                tok.encode(&raw, true).unwrap(),
                tok.inner().encode(&raw, true).unwrap()
            );
        }
        assert!(tok.cached_pieces() > 0);
        assert!(tok.cached_pieces() <= 64);
    }
}
