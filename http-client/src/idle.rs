//! [`Idle`]: a [`Pool`](crate::Pool)'s idle connections, which a body read to its end
//! returns its connection to.

use crate::conn::Sender;
use std::sync::Mutex;

/// The idle connections (at most `max`).
#[derive(Debug)]
pub(crate) struct Idle {
    senders: Mutex<Vec<Sender>>,
    max: usize,
}

impl Idle {
    /// None idle yet; at most `max` kept.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            senders: Mutex::new(Vec::new()),
            max,
        }
    }

    /// Keeps `sender` for the next request, unless `max` are kept already.
    pub(crate) fn put(&self, sender: Sender) {
        if let Ok(mut s) = self.senders.lock() {
            if s.len() < self.max && !sender.is_closed() {
                s.push(sender);
            }
        }
    }

    /// An idle connection still open, if any.
    pub(crate) fn take(&self) -> Option<Sender> {
        let mut s = self.senders.lock().ok()?;
        while let Some(sender) = s.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// How many are idle.
    pub(crate) fn len(&self) -> usize {
        self.senders.lock().map(|s| s.len()).unwrap_or(0)
    }
}
