//! The signals that stop `warmpath up`: SIGINT (Ctrl-C), SIGTERM, SIGHUP (terminal closed).

use crate::console::say;
use crate::error::StackError;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The installed stop signals.
pub struct Stops {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Stops {
    /// Installs the handlers (from now on these signals no longer kill the process).
    pub fn install() -> Result<Self, StackError> {
        let s = |k: SignalKind| signal(k).map_err(|e| StackError::io("install signal handler", e));
        Ok(Self {
            int: s(SignalKind::interrupt())?,
            term: s(SignalKind::terminate())?,
            hup: s(SignalKind::hangup())?,
        })
    }

    /// Waits for the next stop signal; returns its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

/// Says that `sig` arrived; a stop on a signal is a success.
pub fn stopped(sig: &str) -> Result<(), StackError> {
    say(format!("{sig} received"));
    Ok(())
}
