//! The serialisable description of a tokenizer and chat template, as a replica publishes it.

use serde::{Deserialize, Serialize};

/// Everything needed to rebuild a replica's tokenizer (`warmpath_text::ChatTokenizer`):
/// served by the replica at [`crate::replica_api::PATH_TOKENIZER`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenizerSpec {
    /// A Hugging Face `tokenizer.json` document (model, pre-tokenizer, decoder, added tokens).
    pub tokenizer: serde_json::Value,
    /// Jinja chat template (`tokenizer.chat_template`), if the model has one.
    #[serde(default)]
    pub chat_template: Option<String>,
    /// Beginning-of-sequence token text, if any.
    #[serde(default)]
    pub bos_token: Option<String>,
    /// End-of-sequence token text, if any (also exposed to the chat template).
    #[serde(default)]
    pub eos_token: Option<String>,
    /// Token texts that end generation (EOS, end-of-turn).
    #[serde(default)]
    pub stop_tokens: Vec<String>,
    /// Whether `encode(.., add_special = true)` prepends the BOS token.
    #[serde(default)]
    pub add_bos: bool,
}
