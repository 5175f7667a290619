//! Where a [`KvSource`](super::source::KvSource) puts the blocks it fetched: a [`Sink`]
//! caches them in batches of [`BATCH_BLOCKS`] while the fetch goes on, so a load holds at
//! most one batch in memory, whatever the prompt's length, and stops fetching as soon as
//! the pool has no room.

use super::block::ImportBlock;
use super::link::KvLink;

/// Blocks a load holds before it hands them to the engine loop.
pub const BATCH_BLOCKS: usize = 16;

/// The pool took fewer blocks than it was given: stop fetching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolFull;

/// Checked blocks on their way into the pool, in chain order.
#[derive(Debug)]
pub struct Sink<'a> {
    link: &'a KvLink,
    pending: Vec<ImportBlock>,
    taken: usize,
    cached: usize,
    full: bool,
}

impl<'a> Sink<'a> {
    /// An empty sink into `link`'s pool.
    pub fn new(link: &'a KvLink) -> Self {
        Self {
            link,
            pending: Vec::with_capacity(BATCH_BLOCKS),
            taken: 0,
            cached: 0,
            full: false,
        }
    }

    /// Blocks taken so far: the next block's index is the load's first plus this.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// Blocks the pool has cached so far.
    pub fn cached(&self) -> usize {
        self.cached
    }

    /// Whether the pool refused blocks.
    pub fn pool_full(&self) -> bool {
        self.full
    }

    /// Takes the next checked block; caches the batch once it is whole. `Err` when the pool
    /// refused part of a batch: the source should stop.
    pub async fn push(&mut self, block: ImportBlock) -> Result<(), PoolFull> {
        if self.full {
            return Err(PoolFull);
        }
        self.pending.push(block);
        self.taken += 1;
        if self.pending.len() >= BATCH_BLOCKS {
            self.flush().await?;
        }
        Ok(())
    }

    /// Caches what is pending.
    pub async fn flush(&mut self) -> Result<(), PoolFull> {
        if self.full {
            return Err(PoolFull);
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(BATCH_BLOCKS));
        let n = batch.len();
        let got = self.link.import(batch).await;
        self.cached += got.min(n);
        if got < n {
            self.full = true;
            return Err(PoolFull);
        }
        Ok(())
    }
}
