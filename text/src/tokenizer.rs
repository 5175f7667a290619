//! [`ChatTokenizer`]: a HF `tokenizers` tokenizer plus chat template and special tokens.

use crate::chat_input::ChatInput;
use crate::error::TextError;
use crate::fast_bpe::FastByteLevel;
use crate::literal::{ChatSegment, Specials};
use crate::literal_input::escape_input;
use crate::message::ChatMessage;
use crate::template::ChatTemplate;
use std::str::FromStr;
use std::sync::Arc;
use tokenizers::Tokenizer;
use warmpath_core::TokenId;
use warmpath_protocol::tokenizer_spec::TokenizerSpec;

/// Tokenizer + chat template, built from a [`TokenizerSpec`]. Cheap to clone.
#[derive(Clone)]
pub struct ChatTokenizer {
    spec: Arc<TokenizerSpec>,
    inner: Arc<Tokenizer>,
    /// `inner` with special-token matching off: message text (see [`crate::literal`]).
    literal: Arc<Tokenizer>,
    specials: Option<Arc<Specials>>,
    template: Option<Arc<ChatTemplate>>,
    fast: Option<FastByteLevel>,
    /// Whether `fast` also encodes literal text: every added token is special, so the HF
    /// literal path matches none of them either.
    fast_literal: bool,
    bos: Option<TokenId>,
    stop: Vec<TokenId>,
}

impl std::fmt::Debug for ChatTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTokenizer")
            .field("vocab_size", &self.inner.get_vocab_size(true))
            .field("bos", &self.bos)
            .field("stop", &self.stop)
            .finish()
    }
}

impl ChatTokenizer {
    /// Rebuilds the tokenizer described by `spec`.
    pub fn from_spec(spec: &TokenizerSpec) -> Result<Self, TextError> {
        let json = serde_json::to_string(&spec.tokenizer)
            .map_err(|e| TextError::InvalidTokenizer(e.to_string()))?;
        let inner =
            Tokenizer::from_str(&json).map_err(|e| TextError::InvalidTokenizer(e.to_string()))?;
        let lookup = |s: &str| {
            inner
                .token_to_id(s)
                .map(TokenId)
                .ok_or_else(|| TextError::UnknownSpecialToken(s.to_string()))
        };
        let bos = spec.bos_token.as_deref().map(lookup).transpose()?;
        let mut stop = Vec::new();
        for s in spec.stop_tokens.iter().chain(spec.eos_token.iter()) {
            let id = lookup(s)?;
            if !stop.contains(&id) {
                stop.push(id);
            }
        }
        let template = match &spec.chat_template {
            Some(src) => Some(Arc::new(ChatTemplate::new(src)?)),
            None => None,
        };
        let mut literal = inner.clone();
        literal.set_encode_special_tokens(true);
        let added = added_tokens(&spec.tokenizer);
        let fast_literal = added.iter().all(|t| t.2);
        let specials: Vec<(String, TokenId)> = added.into_iter().map(|t| (t.0, t.1)).collect();
        let inner = Arc::new(inner);
        let fast = FastByteLevel::from_spec(&spec.tokenizer, inner.clone());
        Ok(Self {
            spec: Arc::new(spec.clone()),
            inner,
            literal: Arc::new(literal),
            specials: Specials::new(&specials).map(Arc::new),
            template,
            fast,
            fast_literal,
            bos,
            stop,
        })
    }

    /// The spec this tokenizer was built from (serve it to rebuild an identical one).
    pub fn spec(&self) -> &TokenizerSpec {
        &self.spec
    }

    /// Number of entries in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Encodes `text`. Special-token texts (e.g. `<|im_start|>`) always map to their ids;
    /// `add_special` prepends BOS when the model asks for it.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<TokenId>, TextError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| TextError::Tokenizer(e.to_string()))?;
        let mut out = Vec::with_capacity(enc.get_ids().len() + 1);
        if add_special && self.spec.add_bos {
            if let Some(bos) = self.bos {
                out.push(bos);
            }
        }
        out.extend(enc.get_ids().iter().map(|&i| TokenId(i)));
        Ok(out)
    }

    /// Appends the ids of `text` as literal text, without BOS: special-token strings in it
    /// are ordinary text (message contents, see [`crate::literal`]). For text without
    /// special-token strings, the same ids as [`Self::encode`]. For byte-level BPE
    /// tokenizers it skips the HF pipeline ([`FastByteLevel`]).
    pub fn encode_plain_into(&self, text: &str, out: &mut Vec<TokenId>) -> Result<(), TextError> {
        match &self.fast {
            Some(fast) if self.fast_literal => {
                fast.encode_into(text, out).map_err(TextError::Tokenizer)
            }
            _ => {
                let enc = self
                    .literal
                    .encode(text, false)
                    .map_err(|e| TextError::Tokenizer(e.to_string()))?;
                out.extend(enc.get_ids().iter().map(|&i| TokenId(i)));
                Ok(())
            }
        }
    }

    /// Whether [`Self::encode_plain_into`] takes the fast byte-level path.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// Renders `messages` with the chat template.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TextError> {
        let mut input = ChatInput::from_messages(messages);
        input.add_generation_prompt = add_generation_prompt;
        self.render_input(&input)
    }

    /// Renders a whole chat request's template input as the engine does (no escaping).
    pub fn render_input(&self, input: &ChatInput) -> Result<String, TextError> {
        let template = self.template.as_ref().ok_or(TextError::NoChatTemplate)?;
        template.render(
            input,
            self.spec.bos_token.as_deref(),
            self.spec.eos_token.as_deref(),
        )
    }

    /// Renders `messages` (with the generation prompt when `add_generation_prompt`) cut
    /// into the control tokens the template wrote and the text between them, in which
    /// special-token strings from the messages are literal text ([`crate::literal`]).
    pub fn chat_segments(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<ChatSegment>, TextError> {
        let mut input = ChatInput::from_messages(messages);
        input.add_generation_prompt = add_generation_prompt;
        self.input_segments(&input)
    }

    /// [`Self::chat_segments`] of a whole chat request's template input: every string
    /// of the request literal (see `literal_input`).
    pub fn input_segments(&self, input: &ChatInput) -> Result<Vec<ChatSegment>, TextError> {
        let Some(specials) = &self.specials else {
            let text = self.render_input(input)?;
            return Ok(vec![ChatSegment::Text(text)]);
        };
        let escaped = escape_input(specials, input);
        let rendered = self.render_input(&escaped)?;
        Ok(specials.segments(&rendered))
    }

    /// Whether `text` holds a special-token string (the chat path makes it literal).
    pub fn has_special_text(&self, text: &str) -> bool {
        self.specials.as_ref().is_some_and(|s| s.occur_in(text))
    }

    /// Renders `messages` with the generation prompt and encodes the result: the
    /// template's control tokens as such, message text always literal.
    pub fn encode_chat(&self, messages: &[ChatMessage]) -> Result<Vec<TokenId>, TextError> {
        self.encode_input(&ChatInput::from_messages(messages))
    }

    /// Renders a chat request's template input and encodes it (see [`Self::encode_chat`]).
    pub fn encode_input(&self, input: &ChatInput) -> Result<Vec<TokenId>, TextError> {
        let segments = self.input_segments(input)?;
        let mut out = Vec::new();
        self.push_bos(&segments, &mut out);
        for seg in &segments {
            match seg {
                ChatSegment::Special(id) => out.push(*id),
                ChatSegment::Text(text) => self.encode_plain_into(text, &mut out)?,
            }
        }
        Ok(out)
    }

    /// Pushes BOS when the model asks for it and the template did not write it first
    /// (one BOS, as llama.cpp and vLLM's HF path both give for a template that writes
    /// `bos_token`).
    pub fn push_bos(&self, segments: &[ChatSegment], out: &mut Vec<TokenId>) {
        if !self.spec.add_bos {
            return;
        }
        if let Some(bos) = self.bos {
            if segments.first() != Some(&ChatSegment::Special(bos)) {
                out.push(bos);
            }
        }
    }

    /// Decodes `ids`, special tokens included. Invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[TokenId]) -> Result<String, TextError> {
        let raw: Vec<u32> = ids.iter().map(|t| t.0).collect();
        self.inner
            .decode(&raw, false)
            .map_err(|e| TextError::Tokenizer(e.to_string()))
    }

    /// Tokens that end generation.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.stop
    }

    /// The BOS token id, if the model has one.
    pub fn bos_token(&self) -> Option<TokenId> {
        self.bos
    }

    /// The text of token `id`, if it exists.
    pub fn id_to_token(&self, id: TokenId) -> Option<String> {
        self.inner.id_to_token(id.0)
    }
}

/// The added tokens of a `tokenizer.json` document: (content, id, special).
fn added_tokens(json: &serde_json::Value) -> Vec<(String, TokenId, bool)> {
    let Some(added) = json.get("added_tokens").and_then(|a| a.as_array()) else {
        return Vec::new();
    };
    added
        .iter()
        .filter_map(|t| {
            let content = t.get("content")?.as_str()?.to_string();
            let id = u32::try_from(t.get("id")?.as_u64()?).ok()?;
            let special = t.get("special").and_then(|v| v.as_bool()).unwrap_or(false);
            Some((content, TokenId(id), special))
        })
        .collect()
}
