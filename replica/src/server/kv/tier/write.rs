//! The tier's write side: the engine loop's byte-bounded queue ([`TierSink`]) and the task
//! that empties it into Redis ([`run_writer`]), announcing what it wrote on the replica's
//! KV event stream as `tier: shared` events (routers learn which blocks any replica could
//! fetch; the replica's own device snapshot is not affected).

use super::conn::TierConn;
use super::mac::TierMac;
use crate::server::events::EventLog;
use crate::server::kv::block::ExportedBlock;
use crate::server::kv::record::encode;
use crate::server::metrics::Metrics;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use warmpath_core::{KvEvent, KvTier};
use warmpath_protocol::kv_block::{tier_key, KvRecordLayout};

/// Blocks written per pipelined round trip, at most.
const BATCH: usize = 32;

/// Where the engine loop puts the blocks it computed. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TierSink {
    tx: UnboundedSender<(ExportedBlock, u64)>,
    queued: Arc<AtomicU64>,
    limit: u64,
    metrics: Metrics,
}

impl TierSink {
    /// A sink holding at most `limit` bytes of records, and the writer's end of it.
    pub fn new(limit: u64, metrics: Metrics) -> (Self, UnboundedReceiver<(ExportedBlock, u64)>) {
        let (tx, rx) = unbounded_channel();
        let sink = Self {
            tx,
            queued: Arc::new(AtomicU64::new(0)),
            limit,
            metrics,
        };
        (sink, rx)
    }

    /// Whether a block of `bytes` fits now; one that does not is counted as dropped. Asked
    /// before the page is read, so a full queue costs the engine loop nothing.
    pub fn has_room(&self, bytes: u64) -> bool {
        let fits = self.queued.load(Ordering::Relaxed) + bytes <= self.limit;
        if !fits {
            self.metrics
                .kv_tier_writes
                .with_label_values(&["dropped"])
                .inc();
        }
        fits
    }

    /// Queues a block whose record takes `bytes` (after [`Self::has_room`]).
    pub fn push(&self, block: ExportedBlock, bytes: u64) {
        let now = self.queued.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.metrics.kv_tier_queue_bytes.set(now as i64);
        if self.tx.send((block, bytes)).is_err() {
            self.release(bytes);
        }
    }

    fn release(&self, bytes: u64) {
        let now = self.queued.fetch_sub(bytes, Ordering::Relaxed) - bytes;
        self.metrics.kv_tier_queue_bytes.set(now as i64);
    }
}

/// Writes queued blocks to Redis until the sink's senders are gone: each batch is one
/// pipeline of `SET key record`. A batch that cannot be written (no connection, an error)
/// is counted as `failed` and let go: the tier is a cache. A written batch is published on
/// `events` as one `Stored` event with `tier: shared` (no parent: a batch mixes sequences).
/// With `mac`, each value is sealed to its key ([`TierMac::seal`]).
pub async fn run_writer(
    mut rx: UnboundedReceiver<(ExportedBlock, u64)>,
    conn: TierConn,
    layout: KvRecordLayout,
    mac: Option<TierMac>,
    sink: TierSink,
    events: Arc<EventLog>,
) {
    let m = sink.metrics.clone();
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(b) = rx.recv().await {
        batch.push(b);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(b) => batch.push(b),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let bytes: u64 = batch.iter().map(|(_, n)| n).sum();
        let mut pipe = redis::pipe();
        let mut written_bytes = 0u64;
        let hashes: Vec<_> = batch.iter().map(|(b, _)| b.hash).collect();
        for (b, _) in batch.drain(..) {
            let key = tier_key(b.hash);
            let record = encode(layout, b);
            let value = match &mac {
                Some(m) => m.seal(&key, &record),
                None => record,
            };
            written_bytes += value.len() as u64;
            pipe.set(key, value).ignore();
        }
        let outcome = match conn.get() {
            None => {
                conn.failed("write", &"not connected");
                "failed"
            }
            Some(mut c) => match pipe.query_async::<()>(&mut c).await {
                Ok(()) => {
                    m.kv_tier_write_bytes.inc_by(written_bytes);
                    events.publish(vec![KvEvent::Stored {
                        parent: None,
                        hashes,
                        tier: KvTier::Shared,
                    }]);
                    "written"
                }
                Err(e) => {
                    conn.failed("write", &e);
                    "failed"
                }
            },
        };
        m.kv_tier_writes.with_label_values(&[outcome]).inc_by(n);
        sink.release(bytes);
    }
}
