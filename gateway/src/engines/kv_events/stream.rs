//! [`EventStream`]: an engine's batches folded into Warmpath's KV stream for one replica: an
//! empty snapshot opening each epoch, then events with contiguous sequence numbers.
//!
//! The engine sends no snapshot of what it holds, so the stream only ever reports blocks it
//! saw stored. When it loses its place (a gap no replay covers, a publisher restart, a
//! payload that does not decode) it [drops](EventStream::drop_all) everything: a new epoch
//! and an empty snapshot, which makes the prefix index forget the replica's entries at once.

use super::counters::{bump, SubscriberCounters};
use super::rehash::EventMapper;
use super::wire::{decode_batch, WireError};
use std::sync::Arc;
use warmpath_core::{Epoch, KvEventRecord, KvStreamMessage, SeqNo};

/// Where the fold is, and where its messages go.
pub(crate) struct EventStream<S> {
    mapper: EventMapper,
    sink: S,
    epoch: Epoch,
    seq: SeqNo,
    counters: Arc<SubscriberCounters>,
}

impl<S: FnMut(KvStreamMessage)> EventStream<S> {
    /// A stream that will open with `first_epoch` (see [`EventStream::start`]).
    pub(crate) fn new(
        mapper: EventMapper,
        sink: S,
        first_epoch: Epoch,
        counters: Arc<SubscriberCounters>,
    ) -> Self {
        Self {
            mapper,
            sink,
            epoch: first_epoch,
            seq: SeqNo(0),
            counters,
        }
    }

    /// Opens the first epoch with an empty snapshot.
    pub(crate) fn start(&mut self) {
        self.snapshot();
    }

    /// The mapper (for inspection).
    #[cfg(test)]
    pub(crate) fn mapper(&self) -> &EventMapper {
        &self.mapper
    }

    /// Folds one payload in: every event it maps becomes a record, every skip is counted.
    /// On a decode error nothing is emitted; the caller decides (the subscriber drops).
    pub(crate) fn apply(&mut self, payload: &[u8], replayed: bool) -> Result<(), WireError> {
        let batch = decode_batch(payload)?;
        bump(&self.counters.batches);
        if replayed {
            bump(&self.counters.replayed_batches);
        }
        for event in &batch.events {
            match self.mapper.map(event) {
                Ok(Some(event)) => {
                    self.seq = self.seq.next();
                    bump(&self.counters.events);
                    (self.sink)(KvStreamMessage::Event(KvEventRecord {
                        epoch: self.epoch,
                        seq: self.seq,
                        event,
                    }));
                }
                Ok(None) => {}
                Err(reason) => {
                    tracing::debug!(reason = reason.label(), "engine KV event skipped");
                    self.counters.skip(reason);
                }
            }
        }
        Ok(())
    }

    /// Forgets everything: clears the mapper and opens a new epoch with an empty snapshot.
    pub(crate) fn drop_all(&mut self, why: &str) {
        tracing::info!(
            why,
            epoch = self.epoch.0 + 1,
            "dropping the engine's KV entries"
        );
        bump(&self.counters.drops);
        self.mapper.clear();
        self.epoch = Epoch(self.epoch.0.wrapping_add(1));
        self.seq = SeqNo(0);
        self.snapshot();
    }

    fn snapshot(&mut self) {
        (self.sink)(KvStreamMessage::Snapshot {
            epoch: self.epoch,
            seq: self.seq,
            hashes: Vec::new(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warmpath_core::{BlockSize, CheckpointId, HashNamespace, KvEvent};

    fn payload(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/vllm_events/vllm_v2/{name}.hex",
            env!("CARGO_MANIFEST_DIR")
        );
        hex::decode(std::fs::read_to_string(path).unwrap().trim()).unwrap()
    }

    #[test]
    fn records_are_numbered_per_epoch_and_a_drop_opens_a_new_one() {
        let seed = HashNamespace::new(CheckpointId::new("m"));
        let counters = Arc::new(SubscriberCounters::default());
        let mut out = Vec::new();
        let mut s = EventStream::new(
            EventMapper::new(seed, BlockSize(16), 100),
            |m| out.push(m),
            Epoch(5),
            counters.clone(),
        );
        s.start();
        s.apply(&payload("stored_a"), false).unwrap();
        s.apply(&payload("skips"), true).unwrap();
        s.apply(&payload("stored_b"), false).unwrap();
        assert!(s.apply(b"\xc1", false).is_err());
        s.drop_all("test");
        assert!(s.mapper().is_empty());
        s.apply(&payload("stored_c"), false).unwrap();
        let heads: Vec<(u64, u64, bool)> = out
            .iter()
            .map(|m| match m {
                KvStreamMessage::Snapshot { epoch, seq, hashes } => {
                    assert!(hashes.is_empty());
                    (epoch.0, seq.0, true)
                }
                KvStreamMessage::Event(r) => {
                    assert!(matches!(r.event, KvEvent::Stored { .. }));
                    (r.epoch.0, r.seq.0, false)
                }
            })
            .collect();
        assert_eq!(
            heads,
            vec![
                (5, 0, true),
                (5, 1, false),
                (5, 2, false),
                (6, 0, true),
                (6, 1, false)
            ]
        );
        let c = counters.snapshot();
        assert_eq!(
            (c.batches, c.replayed_batches, c.events, c.drops),
            (4, 1, 3, 1)
        );
        // vllm_v2's skips: LoRA by id only, block size 32, unknown parent (its CPU removal
        // names a block the CPU tier never held: nothing to remove, nothing skipped).
        assert_eq!(c.skipped_total(), 3);
    }
}
