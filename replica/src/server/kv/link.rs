//! The KV subsystem's link to the engine loop: what every [`KvSource`](super::source::KvSource)
//! load asks of it, the same way: the prompt's chain hashes under this replica's checkpoint
//! and the tenant's salt, how many leading blocks it holds already, and caching a run of
//! checked blocks. A [`KvLink`] is a narrow handle (the loop's channel and the facts the
//! checks need), not the whole server state.

use super::block::ImportBlock;
use super::budget::LoadBudget;
use super::record::record_layout;
use crate::server::metrics::Metrics;
use crate::server::worker::WorkerMsg;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use warmpath_core::{
    block_hashes, BlockHash, BlockSize, CacheSalt, CheckpointId, HashNamespace, TokenId,
};
use warmpath_engine::KvLayout;
use warmpath_protocol::kv_block::KvRecordLayout;

/// The engine loop as the KV subsystem sees it.
#[derive(Clone, Debug)]
pub struct KvLink {
    submit: Sender<WorkerMsg>,
    checkpoint: CheckpointId,
    block_size: usize,
    layout: KvRecordLayout,
    metrics: Metrics,
    budget: Arc<LoadBudget>,
}

impl KvLink {
    /// A link over the loop's channel, for a model with `checkpoint` and pages of `layout`;
    /// loads share `budget`.
    pub fn new(
        submit: Sender<WorkerMsg>,
        checkpoint: CheckpointId,
        block_size: usize,
        layout: KvLayout,
        metrics: Metrics,
        budget: Arc<LoadBudget>,
    ) -> Self {
        Self {
            submit,
            checkpoint,
            block_size,
            layout: record_layout(layout),
            metrics,
            budget,
        }
    }

    /// The byte budget every load reserves its footprint in.
    pub fn budget(&self) -> &LoadBudget {
        &self.budget
    }

    /// The most bytes one block costs on its way into the pool: its record as received and
    /// its values decoded, side by side while it is checked.
    pub fn block_bytes(&self) -> u64 {
        2 * self.layout.record_bytes() as u64
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The record layout this replica's pages have.
    pub fn layout(&self) -> KvRecordLayout {
        self.layout
    }

    /// The replica's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Sends a message that carries a reply channel to the engine loop and awaits the reply
    /// (`None` when the loop is gone).
    async fn ask<T>(
        &self,
        msg: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> WorkerMsg,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit.send(msg(tx)).ok()?;
        rx.await.ok()
    }

    /// `prompt`'s full-block chain hashes as this replica computes them (its checkpoint, the
    /// tenant's `salt`), and how many leading blocks of them its cache holds.
    pub async fn held_prefix(
        &self,
        prompt: &[TokenId],
        salt: Option<&CacheSalt>,
    ) -> (Vec<BlockHash>, usize) {
        let ns = HashNamespace::new(self.checkpoint.clone()).with_salt(salt.cloned());
        let hashes = block_hashes(ns.root_seed(), prompt, BlockSize(self.block_size as u32));
        let have = self
            .ask(|reply| WorkerMsg::CachedPrefix {
                hashes: hashes.clone(),
                reply,
            })
            .await
            .unwrap_or(0);
        (hashes, have)
    }

    /// Caches `blocks` (checked, in chain order, following the held prefix); returns how many
    /// the pool took.
    pub async fn import(&self, blocks: Vec<ImportBlock>) -> usize {
        if blocks.is_empty() {
            return 0;
        }
        self.ask(|reply| WorkerMsg::Import { blocks, reply })
            .await
            .unwrap_or(0)
    }
}
