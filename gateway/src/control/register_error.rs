//! [`RegisterError`]: why an upstream could not be registered.

use super::client::ClientError;
use crate::replicas::InsertError;

/// Registration failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegisterError {
    /// Bad URL, or one that does not make a valid header value.
    #[error("{0}")]
    Url(String),
    /// Discovery request failed.
    #[error("cannot reach {url}{path}: {source}")]
    Discovery {
        /// Replica URL.
        url: String,
        /// Endpoint.
        path: &'static str,
        /// Cause.
        source: ClientError,
    },
    /// The replica hashes with another scheme version.
    #[error("replica {0} uses hash scheme {1}, the gateway uses {2}")]
    Scheme(String, u32, u32),
    /// The tokenizer spec does not build.
    #[error("replica {0} tokenizer: {1}")]
    Tokenizer(String, String),
    /// Already registered.
    #[error("replica {0} is already registered")]
    Duplicate(String),
    /// An engine upstream lists no model and its pool names none.
    #[error("{0}: GET /v1/models lists no model and the pool names none")]
    Models(String),
}

impl From<InsertError> for RegisterError {
    fn from(e: InsertError) -> Self {
        match e {
            InsertError::Url(u) => Self::Url(u),
            InsertError::Duplicate(u) => Self::Duplicate(u),
        }
    }
}
