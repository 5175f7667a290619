//! [`DevErr`]: cudarc errors as [`EngineError::Device`], with what was being done.

use crate::error::EngineError;

/// Maps a cudarc error into [`EngineError::Device`] with what was being done.
pub(crate) trait DevErr<T> {
    /// Wraps the error with `what`.
    fn dev(self, what: &str) -> Result<T, EngineError>;
}

impl<T, E: std::fmt::Display> DevErr<T> for Result<T, E> {
    fn dev(self, what: &str) -> Result<T, EngineError> {
        self.map_err(|e| EngineError::Device(format!("cuda: {what}: {e}")))
    }
}
