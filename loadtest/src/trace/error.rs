//! Why a trace could not be read, and the one function that reads a trace file.

use std::path::{Path, PathBuf};

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("cannot read trace {path}: {source}")]
    Io {
        /// The trace path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// One line is malformed.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The trace path (or `<input>` for in-memory text).
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The trace has no rows.
    #[error("trace {path} has no requests")]
    Empty {
        /// The trace path.
        path: PathBuf,
    },
}

impl TraceError {
    pub(crate) fn line(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self::Line {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

/// Reads a whole trace file.
pub fn read_trace_text(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })
}
