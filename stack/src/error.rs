//! The one error type of `warmpath`.

use std::path::PathBuf;

/// Everything that can stop `warmpath up`.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// A sibling binary is missing.
    #[error(
        "`{name}` not found at {}; build it next to warmpath: \
         cargo build --release -p replica -p gateway -p warmpath",
        path.display()
    )]
    MissingBinary {
        /// Binary name.
        name: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A port is taken.
    #[error("port {port} on 127.0.0.1 is in use ({what}); pick another with {flag}")]
    PortInUse {
        /// The port.
        port: u16,
        /// What it was for.
        what: &'static str,
        /// The flag that moves it.
        flag: &'static str,
    },
    /// A flag value is out of range.
    #[error("invalid argument: {0}")]
    Args(String),
    /// A process could not be started.
    #[error("cannot start {what}: {source}")]
    Spawn {
        /// Which process.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A process exited while it should be running.
    #[error("{what} exited ({status}); last lines of {}:\n{tail}", log.display())]
    Exited {
        /// Which process.
        what: String,
        /// Its exit status.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The end of the log.
        tail: String,
    },
    /// The gateway exited while the stack was serving (this stops the stack).
    #[error("the gateway exited ({status}) while serving; last lines of {}:\n{tail}", log.display())]
    GatewayExited {
        /// Its exit status.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The end of the log.
        tail: String,
    },
    /// A process did not become ready in time.
    #[error("{what} was not ready after {secs} s; last lines of {}:\n{tail}", log.display())]
    NotReady {
        /// Which process.
        what: String,
        /// How long we waited.
        secs: u64,
        /// Its log file.
        log: PathBuf,
        /// The end of the log.
        tail: String,
    },
    /// An HTTP exchange with a local process failed.
    #[error("http {0}")]
    Http(String),
    /// File system or other I/O.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// Exit status of `warmpath up` when it could not start the stack.
pub const EXIT_START_FAILED: u8 = 1;
/// Exit status of `warmpath up` when the gateway exited while serving.
pub const EXIT_GATEWAY_EXITED: u8 = 3;

impl StackError {
    /// The exit status `warmpath` ends with after this error (see `warmpath up --help`).
    pub fn exit_code(&self) -> u8 {
        match self {
            StackError::GatewayExited { .. } => EXIT_GATEWAY_EXITED,
            _ => EXIT_START_FAILED,
        }
    }

    /// An I/O error with context.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        StackError::Io {
            what: what.into(),
            source,
        }
    }
}

/// The last `n` lines of a log file (empty when unreadable).
pub fn log_tail(path: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
