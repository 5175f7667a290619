//! [`ChatInputError`]: a chat request's fields that the template cannot take.

/// Why a request's chat fields cannot be rendered: a client error (HTTP 400).
#[derive(Debug, thiserror::Error)]
#[error("`{param}` {problem}")]
pub struct ChatInputError {
    /// The field, as the client wrote it (`tools`, `messages`, ...).
    pub param: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

/// The error for `param`.
pub(super) fn err<T>(param: &'static str, problem: impl Into<String>) -> Result<T, ChatInputError> {
    Err(ChatInputError {
        param,
        problem: problem.into(),
    })
}
