//! What turns a prompt into the units its blocks are hashed from: the checkpoint's real
//! tokenizer, or, for an engine whose tokenizer the gateway does not have, text units
//! (`warmpath_core::text_units`: the rendered prompt's bytes, four per unit).

use crate::tokenize::{CachedTokenizer, ChatText};
use warmpath_core::{text_units, TokenId};
use warmpath_text::{ChatInput, TextError};

/// A checkpoint's prompt encoder, shared by its replicas.
// Always held in an `Arc`, one per checkpoint: boxing the tokenizer would only add an
// indirection to every request's tokenization.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum PromptEncoder {
    /// The engine's own tokenizer: hashes follow the hashing contract over real tokens.
    Tokens(CachedTokenizer),
    /// No tokenizer: hashes over text units, and prompt lengths estimated from them.
    TextUnits,
}

impl From<CachedTokenizer> for PromptEncoder {
    fn from(t: CachedTokenizer) -> Self {
        PromptEncoder::Tokens(t)
    }
}

impl PromptEncoder {
    /// Units of a chat prompt.
    pub(crate) fn encode_chat<M: ChatText>(
        &self,
        messages: &[M],
    ) -> Result<Vec<TokenId>, TextError> {
        match self {
            PromptEncoder::Tokens(t) => t.encode_chat(messages),
            PromptEncoder::TextUnits => Ok(text_units::pack(&text_units::render_chat(
                messages.iter().map(|m| (m.role(), m.content())),
            ))),
        }
    }

    /// Tokens of a chat rendered from its whole template input (`messages` are its roles
    /// and contents, for text units, which render only those).
    pub(crate) fn encode_chat_input<M: ChatText>(
        &self,
        input: &ChatInput,
        messages: &[M],
    ) -> Result<Vec<TokenId>, TextError> {
        match self {
            PromptEncoder::Tokens(t) => t.encode_input(input),
            PromptEncoder::TextUnits => self.encode_chat(messages),
        }
    }

    /// Units of a text prompt (special tokens added as the engine adds them).
    pub(crate) fn encode(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, TextError> {
        match self {
            PromptEncoder::Tokens(t) => t.encode(text, add_special),
            PromptEncoder::TextUnits => Ok(text_units::pack(text.as_bytes())),
        }
    }

    /// Whether prompt lengths are real token counts (`false`: estimates from text units).
    pub(crate) fn counts_tokens(&self) -> bool {
        matches!(self, PromptEncoder::Tokens(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warmpath_text::ChatMessage;

    #[test]
    fn text_units_need_no_tokenizer_and_keep_prefixes() {
        let e = PromptEncoder::TextUnits;
        let a = e
            .encode_chat(&[
                ChatMessage::new("system", "shared ".repeat(20)),
                ChatMessage::new("user", "a"),
            ])
            .unwrap();
        let b = e
            .encode_chat(&[
                ChatMessage::new("system", "shared ".repeat(20)),
                ChatMessage::new("user", "bb"),
            ])
            .unwrap();
        assert_eq!(a[..30], b[..30]);
        assert_eq!(e.encode("abcdefgh", true).unwrap().len(), 2);
        assert!(!e.counts_tokens());
    }
}
