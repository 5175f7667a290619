//! What `warm` remembers per replica between decisions: the prefill work it sent there, and
//! when it first saw the replica's current load report (so it can age a stale report).

use crate::cluster::ReplicaSnapshot;
use std::collections::HashMap;
use warmpath_core::ids::ReplicaId;

/// Among equally cheap cold candidates, one whose routed prefill work should have ended
/// under this many ms ago ranks below those idle for longer: the drain estimate uses the
/// prefill rate alone and ignores step overheads and interleaved decode steps, so such a
/// replica may still be busy. Past it, idle replicas are equal.
pub(super) const SETTLE_MS: f64 = 100.0;

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// Prefill work (ms at the replica's rate) this policy sent, left at `backlog_at`.
    backlog_ms: f64,
    backlog_at: u64,
    /// True once this policy has sent the replica anything.
    routed: bool,
    /// The load report last seen (queued prefill tokens, running, waiting) and when first seen.
    report: (u64, u32, u32),
    report_seen_at: u64,
}

/// What a `warm` instance knows about one replica at decision time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    /// ms since the replica's current load report was first seen (0 when new).
    pub(super) report_age_ms: f64,
    /// Prefill work (ms) this policy sent that is still left; `None` if it sent none.
    pub(super) backlog_ms: Option<f64>,
    /// How long ago (ms, capped at [`SETTLE_MS`]) that work should have finished;
    /// [`SETTLE_MS`] when it sent none.
    pub(super) settled_ms: f64,
}

/// Per-replica memory of one `warm` instance (a few words per replica).
#[derive(Debug, Default)]
pub(super) struct Tracker {
    entries: HashMap<ReplicaId, Entry>,
}

impl Tracker {
    /// Notes `r`'s load report (one that differs from the last one seen is new as of `now`)
    /// and returns what this policy knows about `r` at `now`, in one map lookup.
    pub(super) fn observe(&mut self, r: &ReplicaSnapshot, now: u64) -> Seen {
        let report = (r.queued_prefill_tokens, r.running, r.waiting);
        let e = self.entries.entry(r.id).or_insert(Entry {
            report,
            report_seen_at: now,
            ..Entry::default()
        });
        if e.report != report {
            e.report = report;
            e.report_seen_at = now;
        }
        let since_sent = now.saturating_sub(e.backlog_at) as f64;
        Seen {
            report_age_ms: now.saturating_sub(e.report_seen_at) as f64,
            backlog_ms: e.routed.then(|| (e.backlog_ms - since_sent).max(0.0)),
            settled_ms: if e.routed {
                (since_sent - e.backlog_ms).clamp(0.0, SETTLE_MS)
            } else {
                SETTLE_MS
            },
        }
    }

    /// Prefill work (ms) this policy sent to `r` still left at `now`; `None` if it sent none.
    pub(super) fn backlog_ms(&self, r: ReplicaId, now: u64) -> Option<f64> {
        self.entries
            .get(&r)
            .filter(|e| e.routed)
            .map(|e| (e.backlog_ms - now.saturating_sub(e.backlog_at) as f64).max(0.0))
    }

    /// Takes back `ms` of the prefill work [`Tracker::charge`] recorded for `r`. When
    /// none is left, `r` counts as settled, as if this policy had sent it nothing.
    pub(super) fn withdraw(&mut self, r: ReplicaId, now: u64, ms: f64) {
        let Some(left) = self.backlog_ms(r, now) else {
            return;
        };
        if let Some(e) = self.entries.get_mut(&r) {
            e.backlog_ms = (left - ms).max(0.0);
            e.backlog_at = now;
            e.routed = e.backlog_ms > 0.0;
        }
    }

    /// Records `ms` of prefill work sent to `r` at `now`.
    pub(super) fn charge(&mut self, r: ReplicaId, now: u64, ms: f64) {
        let left = self.backlog_ms(r, now).unwrap_or(0.0) + ms;
        let e = self.entries.entry(r).or_insert(Entry {
            report_seen_at: now,
            ..Entry::default()
        });
        e.backlog_ms = left;
        e.backlog_at = now;
        e.routed = true;
    }
}
