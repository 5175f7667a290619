//! Rendering a chat without copying its contents.
//!
//! A 25 KB system prompt costs more to render (minijinja concatenates it into the output,
//! copying it several times) and to scan for added tokens than to hash. So a long chat's
//! contents are swapped for short placeholders, the template renders a small [`Frame`],
//! and the contents are put back only as references: the prompt is the frame's literal
//! text with the contents between. A frame depends only on the chat's shape (roles, and
//! which contents are empty), so it is rendered once per shape and cached; a long chat of
//! a known shape costs no template render at all. The piece of the prompt that holds a
//! content (from the added token before it to the one after it) is looked up in the piece
//! cache by a hash streamed over its parts; only a miss ever builds its text.
//!
//! This is exact when the template inserts contents verbatim (no filters, no branches on
//! the text), which [`Skeleton::probe`] checks once per tokenizer on sample chats, and when
//! no added token straddles the edge of a content, which [`straddles`] checks per request.
//! Whenever either fails, the caller renders the whole chat instead.

use super::chat_text::ChatText;
use aho_corasick::AhoCorasick;
use std::sync::Arc;
use warmpath_text::{ChatMessage, ChatTokenizer, TextError};
use xxhash_rust::xxh3::Xxh3;

/// A long chat goes through a skeleton when one of its contents is at least this long.
pub(crate) const SKELETON_MIN_BYTES: usize = 1024;

/// Marks a placeholder; a chat whose roles or short contents contain it is rendered whole.
const MARK: char = '\u{E000}';
const MARK_END: char = '\u{E001}';

/// One part of a prompt: literal text of the skeleton, or a message's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part<'a> {
    /// Text the template produced (added tokens included).
    Lit(&'a str),
    /// A content, verbatim.
    Content(&'a str),
}

impl<'a> Part<'a> {
    /// The text of the part.
    pub(super) fn text(self) -> &'a str {
        match self {
            Part::Lit(s) | Part::Content(s) => s,
        }
    }
}

/// What the template makes of one chat *shape* (its roles, and which contents are empty)
/// with every non-empty content swapped for a placeholder: literal text, and per cut the
/// index of the message whose content goes there. It depends on the shape alone, so it is
/// rendered once per shape and cached: a chat of a known shape costs no template render.
#[derive(Debug)]
pub(super) struct Frame {
    text: String,
    /// (byte offset in `text`, message index), in order.
    cuts: Vec<(usize, usize)>,
}

impl Frame {
    /// The cache key of the shape of `messages`, domain-separated from the other keys.
    pub(super) fn key<M: ChatText>(messages: &[M]) -> u128 {
        let mut h = Xxh3::new();
        h.update(b"warmpath.chat-frame.v1\0");
        for m in messages {
            let role = m.role();
            h.update(&(role.len() as u64).to_le_bytes());
            h.update(role.as_bytes());
            h.update(&[u8::from(m.content().is_empty())]);
        }
        h.digest128()
    }

    /// Renders the frame of `messages`' shape (with the generation prompt). Empty contents
    /// render as themselves (a template may branch on emptiness). `None` when a role holds
    /// the placeholder mark or a placeholder does not come back exactly once and in order
    /// (the template changed it).
    pub(super) fn render<M: ChatText>(
        tok: &ChatTokenizer,
        messages: &[M],
    ) -> Result<Option<Self>, TextError> {
        let mut left_out = Vec::new();
        let mut shown = Vec::with_capacity(messages.len());
        for (i, m) in messages.iter().enumerate() {
            let role = m.role();
            if role.contains(MARK) {
                return Ok(None);
            }
            if m.content().is_empty() {
                shown.push(ChatMessage::new(role, ""));
            } else {
                left_out.push(i);
                shown.push(ChatMessage::new(role, placeholder(i)));
            }
        }
        let rendered = tok.render_chat(&shown, true)?;
        let mut text = String::with_capacity(rendered.len());
        let mut cuts = Vec::with_capacity(left_out.len());
        let mut rest = rendered.as_str();
        let mut expect = left_out.iter();
        while let Some(at) = rest.find(MARK) {
            text.push_str(&rest[..at]);
            let after = &rest[at + MARK.len_utf8()..];
            let Some(end) = after.find(MARK_END) else {
                return Ok(None);
            };
            let index: Option<usize> = after[..end].parse().ok();
            let Some(i) = index.filter(|i| Some(i) == expect.next()) else {
                return Ok(None);
            };
            cuts.push((text.len(), i));
            rest = &after[end + MARK_END.len_utf8()..];
        }
        if expect.next().is_some() {
            return Ok(None);
        }
        text.push_str(rest);
        Ok(Some(Self { text, cuts }))
    }
}

/// A chat as its shape's [`Frame`] plus its contents, referenced in place.
#[derive(Debug)]
pub(super) struct Skeleton<'m> {
    frame: Arc<Frame>,
    /// Every message's content, by message index.
    contents: Vec<&'m str>,
}

impl<'m> Skeleton<'m> {
    /// `messages` over the frame of their shape.
    pub(super) fn new<M: ChatText>(frame: Arc<Frame>, messages: &'m [M]) -> Self {
        Self {
            frame,
            contents: messages.iter().map(|m| m.content()).collect(),
        }
    }

    /// Renders `messages` as a skeleton without the frame cache. `None` when no content is
    /// at least `min_bytes` long (nothing worth leaving out) or [`Frame::render`] refuses.
    pub(super) fn render<M: ChatText>(
        tok: &ChatTokenizer,
        messages: &'m [M],
        min_bytes: usize,
    ) -> Result<Option<Self>, TextError> {
        if !worth_it(messages, min_bytes) {
            return Ok(None);
        }
        Ok(Frame::render(tok, messages)?.map(|f| Self::new(Arc::new(f), messages)))
    }

    /// The prompt as parts, in order: literal text and contents, empty literals dropped.
    pub(super) fn parts(&self) -> Vec<Part<'_>> {
        let text = self.frame.text.as_str();
        let mut out = Vec::with_capacity(2 * self.frame.cuts.len() + 1);
        let mut at = 0;
        for &(cut, i) in &self.frame.cuts {
            if cut > at {
                out.push(Part::Lit(&text[at..cut]));
            }
            out.push(Part::Content(self.contents[i]));
            at = cut;
        }
        if at < text.len() {
            out.push(Part::Lit(&text[at..]));
        }
        out
    }

    /// The whole prompt text (reference path and tests).
    pub(super) fn assemble(&self) -> String {
        self.parts().iter().map(|p| p.text()).collect()
    }

    /// Whether the template inserts contents verbatim: sample chats (leading and trailing
    /// whitespace, quotes, braces, with and without a system message) render to the same
    /// text directly and through a skeleton.
    pub(super) fn probe(tok: &ChatTokenizer) -> bool {
        let samples: [&[(&str, &str)]; 3] = [
            &[
                ("system", "  You are terse.\n"),
                ("user", " hi {{ x }} \"q\" "),
            ],
            &[
                ("user", "\nfirst\n"),
                ("assistant", "'a' "),
                ("user", "  x"),
            ],
            &[
                ("system", "s"),
                ("user", "u1"),
                ("assistant", "a1"),
                ("user", "\tu2\t"),
            ],
        ];
        samples.iter().all(|sample| {
            let msgs: Vec<ChatMessage> = sample
                .iter()
                .map(|(r, c)| ChatMessage::new(*r, *c))
                .collect();
            match (
                tok.render_chat(&msgs, true),
                Skeleton::render(tok, &msgs, 0),
            ) {
                (Ok(direct), Ok(Some(sk))) => direct == sk.assemble(),
                _ => false,
            }
        })
    }
}

/// Whether a chat is worth a skeleton: one of its contents is at least `min_bytes` long.
pub(super) fn worth_it<M: ChatText>(messages: &[M], min_bytes: usize) -> bool {
    messages.iter().any(|m| m.content().len() >= min_bytes)
}

fn placeholder(i: usize) -> String {
    format!("{MARK}{i}{MARK_END}")
}

/// Whether an occurrence of an added token in the concatenated `parts` crosses the edge of
/// a content part. `overlapping` must find every occurrence (standard match kind); `max_len`
/// is the longest added token in bytes.
pub(super) fn straddles(parts: &[Part<'_>], overlapping: &AhoCorasick, max_len: usize) -> bool {
    let reach = max_len.saturating_sub(1);
    if reach == 0 {
        return false;
    }
    for edge in 1..parts.len() {
        let (left, right) = (parts[edge - 1], parts[edge]);
        if !matches!(left, Part::Content(_)) && !matches!(right, Part::Content(_)) {
            continue;
        }
        // Up to `reach` bytes on each side of the edge, across short parts.
        let mut before = Vec::with_capacity(reach);
        for p in parts[..edge].iter().rev() {
            let b = p.text().as_bytes();
            let take = (reach - before.len()).min(b.len());
            before.splice(0..0, b[b.len() - take..].iter().copied());
            if before.len() == reach {
                break;
            }
        }
        let split = before.len();
        let mut window = before;
        for p in &parts[edge..] {
            let b = p.text().as_bytes();
            let take = (split + reach - window.len()).min(b.len());
            window.extend_from_slice(&b[..take]);
            if window.len() == split + reach {
                break;
            }
        }
        if overlapping
            .find_overlapping_iter(&window)
            .any(|m| m.start() < split && m.end() > split)
        {
            return true;
        }
    }
    false
}
