//! A routing decision on its way to the fleet's shared history ([`super::history`]), and
//! the bounded queue between the request path and the history writer.

use tokio::sync::mpsc;
use warmpath_core::BlockHash;

/// Decisions waiting to be written, at most.
const QUEUE: usize = 4096;

/// One routing decision to share.
#[derive(Debug)]
pub(crate) struct Routed {
    /// The replica's URL (ids are per gateway).
    pub replica: String,
    /// The prompt's block hashes.
    pub hashes: Vec<BlockHash>,
}

/// The writer's queue: the sender the fleet keeps, the receiver its writer drains.
pub(crate) fn queue() -> (mpsc::Sender<Routed>, mpsc::Receiver<Routed>) {
    mpsc::channel(QUEUE)
}
