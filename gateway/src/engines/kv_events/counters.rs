//! Counters of one engine's event subscriber, readable while it runs (for metrics and the
//! dashboard) and returned when it stops.

use super::skip::SkipReason;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, shared between the subscriber and whoever reports them.
#[derive(Debug, Default)]
pub struct SubscriberCounters {
    /// Batches folded into the stream (live and replayed).
    pub batches: AtomicU64,
    /// Of those, batches that came from a replay.
    pub replayed_batches: AtomicU64,
    /// Warmpath events handed to the sink.
    pub events: AtomicU64,
    /// Engine events skipped, per [`SkipReason::index`].
    pub skipped: [AtomicU64; SkipReason::LABELS.len()],
    /// Sequence gaps seen on the live stream.
    pub gaps: AtomicU64,
    /// Replay requests sent.
    pub replays: AtomicU64,
    /// Gap replays that failed or did not reach back far enough.
    pub replay_failures: AtomicU64,
    /// Times the replica's entries were dropped (a new epoch and an empty snapshot).
    pub drops: AtomicU64,
    /// Payloads that did not decode.
    pub decode_errors: AtomicU64,
    /// Messages without the three frames (topic, sequence number, payload).
    pub bad_frames: AtomicU64,
    /// Successful connections of the SUB socket.
    pub connects: AtomicU64,
    /// The engine sequence number expected next: the last one applied plus one (0 before
    /// any, and after the publisher was lost). With the publisher's own count it gives the
    /// subscriber's lag.
    pub next_seq: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CounterSnapshot {
    /// See [`SubscriberCounters::batches`].
    pub batches: u64,
    /// See [`SubscriberCounters::replayed_batches`].
    pub replayed_batches: u64,
    /// See [`SubscriberCounters::events`].
    pub events: u64,
    /// Skipped engine events by reason label ([`SkipReason::LABELS`]), zeros included.
    pub skipped: Vec<(&'static str, u64)>,
    /// See [`SubscriberCounters::gaps`].
    pub gaps: u64,
    /// See [`SubscriberCounters::replays`].
    pub replays: u64,
    /// See [`SubscriberCounters::replay_failures`].
    pub replay_failures: u64,
    /// See [`SubscriberCounters::drops`].
    pub drops: u64,
    /// See [`SubscriberCounters::decode_errors`].
    pub decode_errors: u64,
    /// See [`SubscriberCounters::bad_frames`].
    pub bad_frames: u64,
    /// See [`SubscriberCounters::connects`].
    pub connects: u64,
    /// See [`SubscriberCounters::next_seq`].
    pub next_seq: u64,
}

impl CounterSnapshot {
    /// Skipped events in all.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.iter().map(|s| s.1).sum()
    }

    /// Skipped events for one reason.
    pub fn skipped_for(&self, reason: SkipReason) -> u64 {
        self.skipped[reason.index()].1
    }
}

/// Adds one to a counter.
pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl SubscriberCounters {
    /// Counts a skipped engine event.
    pub fn skip(&self, reason: SkipReason) {
        bump(&self.skipped[reason.index()]);
    }

    /// The counters now.
    pub fn snapshot(&self) -> CounterSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CounterSnapshot {
            batches: get(&self.batches),
            replayed_batches: get(&self.replayed_batches),
            events: get(&self.events),
            skipped: SkipReason::LABELS
                .iter()
                .zip(&self.skipped)
                .map(|(l, c)| (*l, get(c)))
                .collect(),
            gaps: get(&self.gaps),
            replays: get(&self.replays),
            replay_failures: get(&self.replay_failures),
            drops: get(&self.drops),
            decode_errors: get(&self.decode_errors),
            bad_frames: get(&self.bad_frames),
            connects: get(&self.connects),
            next_seq: get(&self.next_seq),
        }
    }
}
