//! One dependency edge between two modules, with the first place that makes it.

use std::fmt;
use std::path::PathBuf;

/// One dependency edge and the first place (by file, then line) that makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeExample {
    pub from: String,
    pub to: String,
    pub file: PathBuf,
    pub line: usize,
}

impl fmt::Display for EdgeExample {
    /// `from -> to  (file:line)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> {}  ({}:{})",
            self.from,
            self.to,
            self.file.display(),
            self.line
        )
    }
}
