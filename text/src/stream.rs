//! Incremental detokenisation that never splits a UTF-8 character.

use crate::tokenizer::ChatTokenizer;
use warmpath_core::TokenId;

/// Turns generated ids into text pieces; a piece is only yielded once its bytes form
/// complete UTF-8 (a multi-byte character spread over several byte tokens waits).
#[derive(Debug)]
pub struct StreamDecoder {
    tok: ChatTokenizer,
    ids: Vec<TokenId>,
    prefix_offset: usize,
    read_offset: usize,
}

const REPLACEMENT: char = '\u{FFFD}';

impl ChatTokenizer {
    /// A decoder that turns a stream of generated ids into complete UTF-8 text pieces.
    pub fn stream_decoder(&self) -> StreamDecoder {
        StreamDecoder::new(self.clone())
    }
}

impl StreamDecoder {
    fn new(tok: ChatTokenizer) -> Self {
        Self {
            tok,
            ids: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
        }
    }

    /// Adds one id; returns the new text when it ends on a complete character.
    pub fn push(&mut self, id: TokenId) -> Option<String> {
        self.ids.push(id);
        let prefix = self.decode(self.prefix_offset, self.read_offset);
        let full = self.decode(self.prefix_offset, self.ids.len());
        if full.len() <= prefix.len() || full.ends_with(REPLACEMENT) {
            return None;
        }
        let piece = full.get(prefix.len()..)?.to_string();
        self.prefix_offset = self.read_offset;
        self.read_offset = self.ids.len();
        Some(piece)
    }

    /// Flushes whatever is pending (incomplete bytes become U+FFFD).
    pub fn finish(&mut self) -> Option<String> {
        let prefix = self.decode(self.prefix_offset, self.read_offset);
        let full = self.decode(self.prefix_offset, self.ids.len());
        self.prefix_offset = self.ids.len();
        self.read_offset = self.ids.len();
        let piece = full.get(prefix.len()..).unwrap_or("").to_string();
        (!piece.is_empty()).then_some(piece)
    }

    fn decode(&self, from: usize, to: usize) -> String {
        self.tok.decode(&self.ids[from..to]).unwrap_or_default()
    }
}
