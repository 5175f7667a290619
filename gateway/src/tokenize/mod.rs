//! Tokenizing exactly as the replica does, fast.
//!
//! The chat template is rendered to text, then the text is cut at the added tokens that the
//! HF tokenizer itself splits on first (non-normalized added tokens such as `<|im_start|>`).
//! The pieces between them are tokenized independently by the tokenizer anyway, so
//! tokenizing piece by piece gives the same ids as tokenizing the whole text; each long piece
//! is cached by a 128-bit content hash in a bounded LRU, so a shared system prompt costs one
//! hash instead of one BPE run. A long chat is not even rendered whole: [`skeleton`]
//! renders the template around placeholders and hashes the long contents in place.
//! Uncached pieces go through the tokenizer's fast byte-level path when it has one.
//!
//! Message text is literal (issue #25, role injection): only the template's own text is
//! cut at added tokens; a content's special-token strings stay ordinary text, as in the
//! replica's `ChatTokenizer::encode_chat` (see `warmpath_text`'s `literal` module).

#[cfg(test)]
mod agent_tests;
mod chat_text;
pub(crate) mod gate;
mod piece_cache;
mod skeleton;

pub(crate) use chat_text::ChatText;

use piece_cache::{PieceCache, MAX_CACHED_TOKENS};
pub(crate) use skeleton::SKELETON_MIN_BYTES;
use skeleton::{straddles, Frame, Part, Skeleton};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::Arc;
use warmpath_core::TokenId;
use warmpath_text::{ChatInput, ChatMessage, ChatSegment, ChatTokenizer, TextError, TokenizerSpec};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

impl ChatText for ChatMessage {
    fn role(&self) -> &str {
        &self.role
    }
    fn content(&self) -> &str {
        &self.content
    }
}

/// Owned copies, for the paths that render a chat whole.
fn owned<M: ChatText>(messages: &[M]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| ChatMessage::new(m.role(), m.content()))
        .collect()
}

/// A replica's tokenizer plus the per-piece token cache.
pub struct CachedTokenizer {
    inner: ChatTokenizer,
    splitter: Option<(AhoCorasick, Vec<TokenId>)>,
    /// The added tokens again, finding overlapping occurrences, and the longest one's
    /// length: set when the template passed [`Skeleton::probe`].
    skeleton: Option<(AhoCorasick, usize)>,
    cache: Mutex<PieceCache>,
    /// Rendered skeleton frames by chat shape (roles and empty contents): few shapes recur.
    frames: Mutex<LruCache<u128, Arc<Frame>>>,
    min_cached_bytes: usize,
}

/// Chat shapes whose frames are kept.
const FRAME_CACHE_ENTRIES: usize = 256;

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
        let skeleton = match &splitter {
            Some((ac, _)) if Skeleton::probe(&inner) => overlapping(&spec.tokenizer, ac),
            _ => None,
        };
        let cap = NonZeroUsize::new(cache_entries).unwrap_or(NonZeroUsize::MIN);
        Ok(Self {
            inner,
            splitter,
            skeleton,
            cache: Mutex::new(PieceCache::new(cap, MAX_CACHED_TOKENS)),
            frames: Mutex::new(LruCache::new(
                NonZeroUsize::new(FRAME_CACHE_ENTRIES).unwrap_or(NonZeroUsize::MIN),
            )),
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
    /// rendering, no scan. A longer chat with a long content goes through a [`Skeleton`]
    /// when the template allows it (its shape's frame cached, its contents hashed in place),
    /// otherwise it is rendered whole; either way through the piece cache.
    pub fn encode_chat<M: ChatText>(&self, messages: &[M]) -> Result<Vec<TokenId>, TextError> {
        let bytes: usize = messages
            .iter()
            .map(|m| m.role().len() + m.content().len())
            .sum();
        if bytes > PROMPT_CACHE_MAX_BYTES {
            if let Some(ids) = self.encode_chat_skeleton(messages)? {
                return Ok(ids);
            }
            return self.encode_chat_segments(messages);
        }
        let key = chat_key(messages);
        if let Some(hit) = self.cache.lock().get(&key) {
            return Ok(hit.to_vec());
        }
        let ids = self.encode_chat_segments(messages)?;
        self.cache.lock().put(key, ids.as_slice().into());
        Ok(ids)
    }

    /// A chat rendered whole, as the replica encodes it: the template's control tokens,
    /// and the text between them (message text literal) through the piece cache.
    fn encode_chat_segments<M: ChatText>(&self, messages: &[M]) -> Result<Vec<TokenId>, TextError> {
        let segments = self.inner.chat_segments(&owned(messages), true)?;
        self.encode_segments(&segments)
    }

    /// A chat rendered from its whole template input (tools, tool calls, documents,
    /// template kwargs), as the replica's `ChatTokenizer::encode_input` encodes it: every
    /// string of the request literal, the text between control tokens through the piece
    /// cache. Not cached whole, not a skeleton.
    pub fn encode_input(&self, input: &ChatInput) -> Result<Vec<TokenId>, TextError> {
        let segments = self.inner.input_segments(input)?;
        self.encode_segments(&segments)
    }

    fn encode_segments(&self, segments: &[ChatSegment]) -> Result<Vec<TokenId>, TextError> {
        let mut out = Vec::new();
        self.inner.push_bos(segments, &mut out);
        for seg in segments {
            match seg {
                ChatSegment::Special(id) => out.push(*id),
                ChatSegment::Text(text) => self.encode_piece(text, &mut out)?,
            }
        }
        Ok(out)
    }

    /// Chat prompt tokens without the cache (reference path).
    pub fn encode_chat_uncached<M: ChatText>(
        &self,
        messages: &[M],
    ) -> Result<Vec<TokenId>, TextError> {
        self.inner.encode_chat(&owned(messages))
    }

    /// Encodes `text` as `ChatTokenizer::encode` does, through the piece cache.
    pub(crate) fn encode(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, TextError> {
        if self.splitter.is_none() {
            return self.inner.encode(text, add_special);
        }
        let mut out = Vec::with_capacity(text.len() / 3 + 4);
        if add_special {
            self.push_bos(&mut out);
        }
        self.encode_split(text, &mut out)?;
        Ok(out)
    }

    fn push_bos(&self, out: &mut Vec<TokenId>) {
        if self.inner.spec().add_bos {
            if let Some(bos) = self.inner.bos_token() {
                out.push(bos);
            }
        }
    }

    /// The BOS pushed before a chat when the template wrote one first: one BOS, as the
    /// replica's `ChatTokenizer::push_bos` gives (a content never encodes to BOS).
    fn drop_doubled_bos(&self, out: &mut Vec<TokenId>) {
        let Some(bos) = self.inner.bos_token() else {
            return;
        };
        if self.inner.spec().add_bos && out.len() >= 2 && out[0] == bos && out[1] == bos {
            out.remove(0);
        }
    }

    /// Appends the ids of `text`: cut at added tokens, each piece through the cache.
    fn encode_split(&self, text: &str, out: &mut Vec<TokenId>) -> Result<(), TextError> {
        let Some((ac, ids)) = &self.splitter else {
            out.extend(self.inner.encode(text, false)?);
            return Ok(());
        };
        let mut at = 0;
        for m in ac.find_iter(text) {
            self.encode_piece(&text[at..m.start()], out)?;
            out.push(ids[m.pattern().as_usize()]);
            at = m.end();
        }
        self.encode_piece(&text[at..], out)
    }

    /// A long chat's ids through a [`Skeleton`]: `None` when the template or the chat does
    /// not allow it (the caller renders it whole).
    fn encode_chat_skeleton<M: ChatText>(
        &self,
        messages: &[M],
    ) -> Result<Option<Vec<TokenId>>, TextError> {
        let (Some((ac, ids)), Some((overlap, max_len))) = (&self.splitter, &self.skeleton) else {
            return Ok(None);
        };
        if !skeleton::worth_it(messages, SKELETON_MIN_BYTES) {
            return Ok(None);
        }
        // A role is rendered into the frame, where added tokens are matched: one holding
        // special-token text goes the whole-chat way, which keeps it literal.
        if messages.iter().any(|m| ac.is_match(m.role())) {
            return Ok(None);
        }
        let key = Frame::key(messages);
        let cached = self.frames.lock().get(&key).cloned();
        let frame = match cached {
            Some(f) => f,
            None => {
                let Some(f) = Frame::render(&self.inner, messages)? else {
                    return Ok(None);
                };
                let f = Arc::new(f);
                self.frames.lock().put(key, f.clone());
                f
            }
        };
        let sk = Skeleton::new(frame, messages);
        let parts = sk.parts();
        if straddles(&parts, overlap, *max_len) {
            return Ok(None);
        }
        // English runs ~4 bytes per token: a third of the bytes is one allocation, no regrow.
        let bytes: usize = parts.iter().map(|p| p.text().len()).sum();
        let mut out = Vec::with_capacity(bytes / 3 + 8);
        self.push_bos(&mut out);
        let mut piece: Vec<Part<'_>> = Vec::with_capacity(4);
        for part in parts {
            match part {
                Part::Content(_) => piece.push(part),
                Part::Lit(lit) => {
                    let mut at = 0;
                    for m in ac.find_iter(lit) {
                        piece.push(Part::Lit(&lit[at..m.start()]));
                        self.encode_parts(&mut piece, &mut out)?;
                        out.push(ids[m.pattern().as_usize()]);
                        at = m.end();
                    }
                    piece.push(Part::Lit(&lit[at..]));
                }
            }
        }
        self.encode_parts(&mut piece, &mut out)?;
        self.drop_doubled_bos(&mut out);
        Ok(Some(out))
    }

    /// Appends the ids of the text between two added tokens, given as parts (and clears
    /// them). Literal text alone is a plain piece; with a content in it, the piece is looked
    /// up by a hash streamed over the parts and built as text only on a miss. A content is
    /// literal text: special-token strings in it are never cut out (role injection), the
    /// same ids as the replica's `ChatTokenizer::encode_chat`.
    fn encode_parts(
        &self,
        parts: &mut Vec<Part<'_>>,
        out: &mut Vec<TokenId>,
    ) -> Result<(), TextError> {
        parts.retain(|p| !p.text().is_empty());
        match parts.as_slice() {
            [] => {}
            [Part::Lit(lit)] => self.encode_piece(lit, out)?,
            _ => {
                let mut h = Xxh3::new();
                for p in parts.iter() {
                    h.update(p.text().as_bytes());
                }
                let key = h.digest128();
                let hit = self.cache.lock().get(&key).cloned();
                if let Some(hit) = hit {
                    out.extend_from_slice(&hit);
                } else {
                    let text: String = parts.iter().map(|p| p.text()).collect();
                    let start = out.len();
                    self.inner.encode_plain_into(&text, out)?;
                    self.cache.lock().put(key, out[start..].into());
                }
            }
        }
        parts.clear();
        Ok(())
    }

    fn encode_piece(&self, piece: &str, out: &mut Vec<TokenId>) -> Result<(), TextError> {
        if piece.is_empty() {
            return Ok(());
        }
        if piece.len() < self.min_cached_bytes {
            return self.inner.encode_plain_into(piece, out);
        }
        let key = xxh3_128(piece.as_bytes());
        if let Some(hit) = self.cache.lock().get(&key) {
            out.extend_from_slice(hit);
            return Ok(());
        }
        let start = out.len();
        self.inner.encode_plain_into(piece, out)?;
        self.cache.lock().put(key, out[start..].into());
        Ok(())
    }

    /// Whether long chats are rendered as skeletons (the template passed the probe).
    pub fn renders_skeletons(&self) -> bool {
        self.skeleton.is_some()
    }

    /// Entries in the piece cache.
    pub fn cached_pieces(&self) -> usize {
        self.cache.lock().len()
    }
}

/// Largest chat (bytes of roles and contents) cached whole by [`CachedTokenizer::encode_chat`].
pub(crate) const PROMPT_CACHE_MAX_BYTES: usize = 4096;

/// The cache key of a whole chat: a 128-bit hash of its messages, length-prefixed so no two
/// message lists share an encoding, and domain-separated from the keys of text pieces.
fn chat_key<M: ChatText>(messages: &[M]) -> u128 {
    let mut h = Xxh3::new();
    h.update(b"warmpath.chat-prompt.v1\0");
    for m in messages {
        let (role, content) = (m.role(), m.content());
        h.update(&(role.len() as u64).to_le_bytes());
        h.update(role.as_bytes());
        h.update(&(content.len() as u64).to_le_bytes());
        h.update(content.as_bytes());
    }
    h.digest128()
}

/// The splitter's added tokens in an automaton that finds overlapping occurrences, and the
/// longest one's length in bytes.
fn overlapping(
    tokenizer: &serde_json::Value,
    splitter: &AhoCorasick,
) -> Option<(AhoCorasick, usize)> {
    let added = tokenizer.get("added_tokens")?.as_array()?;
    let pats: Vec<&str> = added
        .iter()
        .filter(|t| t.get("normalized").and_then(|v| v.as_bool()) == Some(false))
        .filter_map(|t| t.get("content")?.as_str())
        .collect();
    // Every added token must be one the splitter finds: the replica's chat path cuts the
    // template's text at all of them.
    if pats.len() != splitter.patterns_len() || pats.len() != added.len() {
        return None;
    }
    let max = pats.iter().map(|p| p.len()).max()?;
    Some((AhoCorasick::new(&pats).ok()?, max))
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
    use rand::{Rng, SeedableRng};
    use warmpath_text::bytelevel::chatml_bpe_spec as byte_level_spec;

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
        assert!(tok.renders_skeletons());
        assert!(tok.inner().has_fast_path());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let system = random_text(&mut rng, 400);
        // Past PROMPT_CACHE_MAX_BYTES: rendered as a skeleton, pieces cached.
        let long_system = random_text(&mut rng, 3000);
        assert!(long_system.len() > PROMPT_CACHE_MAX_BYTES);
        for i in 0..200 {
            let sys = if i % 2 == 0 { &system } else { &long_system };
            let mut msgs = vec![ChatMessage::new("system", sys.clone())];
            for j in 0..rng.gen_range(1..4) {
                let role = if j % 2 == 0 { "user" } else { "assistant" };
                // Sometimes a long turn too, added tokens and all.
                let n = if i % 5 == 0 {
                    600
                } else {
                    rng.gen_range(0..60)
                };
                msgs.push(ChatMessage::new(role, random_text(&mut rng, n)));
            }
            let a = tok.encode_chat(&msgs).unwrap();
            let b = tok.encode_chat_uncached(&msgs).unwrap();
            assert_eq!(a, b, "chat {i} differs");
            // Again: short chats now come from the whole-prompt cache, long ones hit pieces.
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

    #[test]
    fn skeletons_assemble_to_the_rendered_prompt() {
        let tok = CachedTokenizer::new(&byte_level_spec(), 64, 8).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for i in 0..50 {
            let first = if i % 3 == 0 { "user" } else { "system" };
            let msgs = vec![
                ChatMessage::new(first, random_text(&mut rng, 500)),
                ChatMessage::new("user", random_text(&mut rng, 5)),
                ChatMessage::new("assistant", random_text(&mut rng, 400)),
                ChatMessage::new("user", random_text(&mut rng, 7)),
            ];
            let sk = Skeleton::render(tok.inner(), &msgs, SKELETON_MIN_BYTES)
                .unwrap()
                .expect("long contents are left out");
            assert_eq!(sk.assemble(), tok.inner().render_chat(&msgs, true).unwrap());
            assert!(sk.parts().iter().any(|p| matches!(p, Part::Content(_))));
        }
        // A content holding the placeholder mark is never rendered into the frame, so it
        // cannot be mistaken for a placeholder: still exact.
        let msgs = vec![
            ChatMessage::new("system", "x".repeat(5000)),
            ChatMessage::new("user", "\u{E000}0\u{E001}"),
        ];
        let sk = Skeleton::render(tok.inner(), &msgs, SKELETON_MIN_BYTES)
            .unwrap()
            .expect("a skeleton");
        assert_eq!(sk.assemble(), tok.inner().render_chat(&msgs, true).unwrap());
        // A role holding it: rendered whole.
        let msgs = vec![
            ChatMessage::new("system", "x".repeat(5000)),
            ChatMessage::new("\u{E000}0\u{E001}", "hi"),
        ];
        assert!(Skeleton::render(tok.inner(), &msgs, SKELETON_MIN_BYTES)
            .unwrap()
            .is_none());
        assert_eq!(
            tok.encode_chat(&msgs).unwrap(),
            tok.encode_chat_uncached(&msgs).unwrap()
        );
    }

    #[test]
    fn one_frame_serves_every_chat_of_a_shape_and_shapes_differ_by_empty_contents() {
        let tok = CachedTokenizer::new(&byte_level_spec(), 64, 8).unwrap();
        let sys = "s ".repeat(PROMPT_CACHE_MAX_BYTES);
        let chat = |user: &str, assistant: &str| {
            vec![
                ChatMessage::new("system", sys.clone()),
                ChatMessage::new("user", user),
                ChatMessage::new("assistant", assistant),
                ChatMessage::new("user", "next?"),
            ]
        };
        let chats = [
            chat("first question", "an answer"),
            chat("second, different question", "another answer"),
            chat("third", ""),
            chat("", ""),
            chat("fourth", "yet another"),
        ];
        for msgs in &chats {
            assert_eq!(
                tok.encode_chat(msgs).unwrap(),
                tok.encode_chat_uncached(msgs).unwrap()
            );
        }
        // Shapes: both set, assistant empty, both empty.
        assert_eq!(tok.frames.lock().len(), 3);
    }

    #[test]
    fn an_added_token_across_a_content_edge_is_detected() {
        let tok = CachedTokenizer::new(&byte_level_spec(), 64, 8).unwrap();
        let (overlap, max_len) = tok.skeleton.as_ref().unwrap();
        let cases = [
            (vec![Part::Lit("a<|im_"), Part::Content("end|>b")], true),
            (vec![Part::Content("x<|im"), Part::Lit("_start|>")], true),
            // Across a short literal between two contents.
            (
                vec![
                    Part::Content("<|i"),
                    Part::Lit("m_e"),
                    Part::Content("nd|>"),
                ],
                true,
            ),
            (
                vec![Part::Lit("<|im_end|>"), Part::Content("<|im_end|>")],
                false,
            ),
            (vec![Part::Lit("system\n"), Part::Content("text")], false),
        ];
        for (parts, want) in cases {
            assert_eq!(straddles(&parts, overlap, *max_len), want, "{parts:?}");
        }
    }

    #[test]
    fn a_template_that_edits_contents_is_never_rendered_as_a_skeleton() {
        let mut spec = byte_level_spec();
        spec.chat_template = Some(
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
                .into(),
        );
        let tok = CachedTokenizer::new(&spec, 64, 8).unwrap();
        assert!(!tok.renders_skeletons());
        let msgs = vec![
            ChatMessage::new("system", format!("  {}  ", "y ".repeat(3000))),
            ChatMessage::new("user", " hi "),
        ];
        assert_eq!(
            tok.encode_chat(&msgs).unwrap(),
            tok.encode_chat_uncached(&msgs).unwrap()
        );
    }
}
