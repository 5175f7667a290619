//! [`ClientError`]: why an exchange failed.

/// A request failure.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connect failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The HTTP exchange failed (bad response, connection closed early).
    #[error("http: {0}")]
    Http(#[from] hyper::Error),
    /// Deadline passed.
    #[error("timed out")]
    Timeout,
    /// The request could not be built, or the response was unusable (not JSON, a body
    /// over its limit).
    #[error("bad exchange: {0}")]
    Protocol(String),
    /// Non-2xx status (from the helpers that want a success).
    #[error("status {0}")]
    Status(u16),
    /// Not a plain `http://host[:port][/path]` URL.
    #[error("bad URL {0}")]
    Url(String),
}
