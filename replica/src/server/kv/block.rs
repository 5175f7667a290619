//! A KV block as it leaves the pool ([`ExportedBlock`], streamed under an [`Export`] or
//! written to the tier) and as it enters it ([`ImportBlock`], checked, from any
//! [`KvSource`](super::source::KvSource)).

use half::f16;
use tokio::sync::mpsc::Sender;
use warmpath_core::{BlockHash, TokenId};

/// One cached block of a prefill, as the engine loop hands it out.
#[derive(Debug)]
pub struct ExportedBlock {
    /// Position of the block in the prompt.
    pub index: usize,
    /// Its chain hash.
    pub hash: BlockHash,
    /// The previous block's chain hash.
    pub parent: Option<BlockHash>,
    /// Its tokens.
    pub tokens: Vec<TokenId>,
    /// The page's values, in the record's payload order.
    pub values: Vec<f16>,
}

/// Blocks an export holds for a receiver slower than the prefill: past them the export
/// stops (the stream still ends cleanly; the decode replica computes the rest), so a
/// prefill replica's memory for one transfer is bounded whatever the prompt's length.
pub const EXPORT_QUEUE_BLOCKS: usize = 64;

/// Where a prefill's blocks go, and which of them.
#[derive(Debug)]
pub struct Export {
    /// The stream's sender, bounded ([`EXPORT_QUEUE_BLOCKS`]).
    pub tx: Sender<ExportedBlock>,
    /// Leading blocks the receiver holds already.
    pub skip: usize,
    /// Blocks handled so far (sent or skipped).
    pub(crate) next: usize,
}

impl Export {
    /// Sends blocks from `skip` on to `tx`.
    pub fn new(tx: Sender<ExportedBlock>, skip: usize) -> Self {
        Self { tx, skip, next: 0 }
    }
}

/// One checked block to cache.
#[derive(Debug)]
pub struct ImportBlock {
    /// Its chain hash.
    pub hash: BlockHash,
    /// The previous block's chain hash (`None` for the first block of a prompt).
    pub parent: Option<BlockHash>,
    /// The page's values.
    pub values: Vec<f16>,
}
