//! What the tokenizer needs of a chat message, whatever type holds it (the request
//! reader's borrowed messages, the template's owned ones).

/// A chat message as the tokenizer reads it: owned (`warmpath_text::ChatMessage`) or borrowed from a
/// request body ([`crate::body::request::Message`]), so a request's contents are never copied
/// just to be hashed. Only paths that render a chat whole build owned messages.
pub trait ChatText {
    /// `system`, `user`, `assistant`, ...
    fn role(&self) -> &str;
    /// Message text.
    fn content(&self) -> &str;
}
