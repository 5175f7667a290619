//! The engine loop's side of KV transfer between replicas.
//!
//! * **Export** (a prefill replica): a sequence submitted with an [`Export`](crate::server::kv::block::Export) sends each
//!   full prompt block, from `skip` on, the step that caches it: the transfer overlaps
//!   the chunked prefill block by block. The sender is dropped with the sequence, which
//!   ends the stream. The queue is bounded: a receiver that falls a whole queue behind
//!   gets the blocks sent so far, then the stream's end.
//! * **Import** (a decode replica): [`Loop::import`] writes blocks a prefill replica sent
//!   into free pages and caches them along their chain, exactly as if this replica had
//!   computed them; the request submitted next finds them as a cached prefix. The caller
//!   has checked every block (checksum, layout, chain hash under this replica's
//!   checkpoint and the tenant's salt, tokens) before it gets here.

use super::Live;
use super::Loop;
use crate::server::kv::block::{ExportedBlock, ImportBlock};
use crate::server::sched::{PlanItem, Sequence};
use warmpath_engine::EngineError;
use warmpath_kv_cache::{Inserted, NodeId};

impl Loop {
    /// Block `i` of `seq` (cached in its page `seq.nodes[i]`), read out of the pool.
    pub(super) fn exported_block(
        &self,
        seq: &Sequence<Live>,
        i: usize,
    ) -> Result<ExportedBlock, EngineError> {
        let bs = self.block_size.get();
        let hashes = seq.hasher.hashes();
        Ok(ExportedBlock {
            index: i,
            hash: hashes[i],
            parent: i.checked_sub(1).map(|p| hashes[p]),
            tokens: seq.tokens()[i * bs..(i + 1) * bs].to_vec(),
            values: self
                .engine
                .read_page(self.sched.cache().page(seq.nodes[i]))?,
        })
    }

    /// Sends the prompt blocks the step just cached to each exporting sequence.
    pub(super) fn export_cached(&mut self, items: &[PlanItem]) {
        let bs = self.block_size.get();
        for it in items {
            let Some(seq) = self.sched.get(it.id) else {
                continue;
            };
            let Some(export) = &seq.extra.export else {
                continue;
            };
            let full = seq.nodes.len().min(seq.prompt_len() / bs);
            let mut blocks = Vec::new();
            for i in export.next.max(export.skip)..full {
                match self.exported_block(seq, i) {
                    Ok(b) => blocks.push(b),
                    Err(e) => {
                        // Nothing more can be exported: the receiver computes the rest.
                        tracing::warn!(error = %e, "KV export stopped");
                        break;
                    }
                }
            }
            let sent = blocks.len();
            let Some(seq) = self.sched.get_mut(it.id) else {
                continue;
            };
            if let Some(export) = &mut seq.extra.export {
                export.next = full.max(export.next);
                for b in blocks {
                    if let Err(e) = export.tx.try_send(b) {
                        if matches!(e, tokio::sync::mpsc::error::TrySendError::Full(_)) {
                            // The receiver fell behind by a whole queue: stop here (the
                            // stream still ends cleanly; it computes the rest).
                            tracing::warn!(
                                queued = crate::server::kv::block::EXPORT_QUEUE_BLOCKS,
                                "KV export stopped: the receiver is too slow"
                            );
                            export.next = usize::MAX;
                        }
                        break;
                    }
                }
            }
            self.metrics.kv_export_blocks.inc_by(sent as u64);
        }
    }

    /// Caches `blocks` along their chain: a block whose parent is not cached, or that
    /// finds no free page, ends the import there. Returns the leading blocks of the
    /// chain that are cached afterwards (imported or already there).
    pub(super) fn import(&mut self, blocks: &[ImportBlock]) -> usize {
        let mut path: Vec<NodeId> = Vec::with_capacity(blocks.len() + 1);
        let cache = self.sched.cache_mut();
        // The chain must hang off a cached parent (or start a prompt).
        if let Some(parent) = blocks.first().and_then(|b| b.parent) {
            match cache.lookup(parent) {
                Some(n) => {
                    cache.lock(&[n]);
                    path.push(n);
                }
                None => return 0,
            }
        }
        let base = path.len();
        for b in blocks {
            let cache = self.sched.cache_mut();
            if let Some(n) = cache.lookup(b.hash) {
                cache.lock(&[n]);
                path.push(n);
                continue;
            }
            let Some(pages) = cache.alloc(1) else {
                break;
            };
            let page = pages[0];
            if let Err(e) = self.engine.write_page(page, &b.values) {
                tracing::warn!(error = %e, "KV import stopped");
                self.sched.cache_mut().free_pages(&[page]);
                break;
            }
            let cache = self.sched.cache_mut();
            match cache.insert(path.last().copied(), b.hash, page) {
                Inserted::New(n) => path.push(n),
                Inserted::Existing(n) => {
                    cache.free_pages(&[page]);
                    path.push(n);
                }
            }
        }
        let cached = path.len() - base;
        let cache = self.sched.cache_mut();
        cache.unlock(&path);
        // The gateway learns at once that this replica holds the prefix.
        self.events.publish(cache.take_events());
        self.publish_load();
        cached
    }
}
