//! [`ConfigError`]: what is wrong with a configuration, naming the key at fault.

/// A configuration error naming the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// Path given.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The YAML did not parse or has unknown keys.
    #[error("invalid config: {0}")]
    Parse(String),
    /// A value is out of range.
    #[error("invalid config key `{key}`: {reason}")]
    Invalid {
        /// Dotted key path.
        key: String,
        /// Why.
        reason: String,
    },
}
