//! The gateway's ZeroMQ KV event subscriber following one publisher on loopback, its
//! messages applied to a real prefix index: what the `kv_events_zmq` (a scripted publisher)
//! and `kv_events_engines` (the engines' own publisher code) tests both watch.

use gateway::{CounterSnapshot, SubscriberCounters, ZmqEventsConfig, ZmqSubscriber};
use router_policy::{IndexConfig, PrefixIndex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use warmpath_core::{
    BlockHash, CheckpointId, Epoch, HashNamespace, KvStreamMessage, Millis, ReplicaId,
};

/// The replica every message is applied for.
pub(crate) const R: ReplicaId = ReplicaId(0);

/// The pool's namespace the subscriber re-hashes into (no adapter, no salt).
pub(crate) fn base() -> HashNamespace {
    HashNamespace::new(CheckpointId::new("test-model"))
}

/// The subscriber following one publisher, its messages applied to a prefix index.
pub(crate) struct Follower {
    pub(crate) index: PrefixIndex,
    rx: mpsc::UnboundedReceiver<KvStreamMessage>,
    /// Epochs of the snapshots received (one per connection: a second one is a drop).
    pub(crate) snapshots: Vec<Epoch>,
    pub(crate) counters: Arc<SubscriberCounters>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<CounterSnapshot>,
    /// Bound on every wait.
    pub(crate) wait: Duration,
}

impl Follower {
    /// Starts the subscriber with `cfg` (its first epoch 100), in the namespace of
    /// [`base`]; every wait is bounded by `wait`.
    pub(crate) fn start(cfg: ZmqEventsConfig, wait: Duration) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let sink = move |m| {
            let _ = tx.send(m);
        };
        let sub = ZmqSubscriber::with_epoch(cfg.clone(), cfg.mapper(base()), sink, Epoch(100));
        let counters = sub.counters();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(sub.run(move || flag.load(Ordering::Relaxed)));
        let index = PrefixIndex::new(IndexConfig {
            max_precise_entries: 1 << 12,
            max_approx_entries: 0,
            approx_ttl: Millis(0),
            max_shared_entries: 0,
        });
        Self {
            index,
            rx,
            snapshots: Vec::new(),
            counters,
            stop,
            task,
            wait,
        }
    }

    /// Applies the messages received so far.
    pub(crate) fn drain(&mut self) {
        while let Ok(msg) = self.rx.try_recv() {
            if let KvStreamMessage::Snapshot { epoch, .. } = &msg {
                self.snapshots.push(*epoch);
            }
            self.index.apply_message(R, &msg);
        }
    }

    /// Applies messages as they come until `done` holds; panics after [`Self::wait`].
    pub(crate) async fn wait_until(&mut self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + self.wait;
        loop {
            self.drain();
            if done(self) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; counters {:?}",
                self.counters.snapshot()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The publisher's sequence number the subscriber expects next.
    pub(crate) fn next_seq(&self) -> u64 {
        self.counters.next_seq.load(Ordering::Relaxed)
    }

    /// Leading blocks of `chain` the index says the replica holds.
    pub(crate) fn matched(&self, chain: &[BlockHash]) -> u32 {
        self.index
            .match_prefix(chain, Millis(0))
            .get(R)
            .precise_blocks
    }

    /// Stops the subscriber; its final counters.
    pub(crate) async fn stop(self) -> CounterSnapshot {
        self.stop.store(true, Ordering::Relaxed);
        tokio::time::timeout(self.wait, self.task)
            .await
            .expect("subscriber stops")
            .expect("subscriber task")
    }
}
