//! [`ChatMessage`]: one turn of a conversation, as the chat template reads it.

use serde::{Deserialize, Serialize};

/// One chat message, as in the OpenAI API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// Message text.
    pub content: String,
}

impl ChatMessage {
    /// Builds a message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}
