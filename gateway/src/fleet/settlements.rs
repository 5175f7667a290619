//! Settling what an admission holds on the shared limits (`settle.lua`): the tokens it
//! reserved but did not use, and its lease. A settlement Redis did not answer waits in a
//! bounded queue ([`super::pending::Pending`]) and is replayed when Redis answers again.
//!
//! Replaying is harmless: the script acts only while the lease is in the tenant's lease
//! set, and takes it out, so a second run of a settlement (one that ran on Redis though the
//! gateway saw no answer) changes nothing. An admission the gateway gave up on (its call
//! ran past `state.timeout_ms`) is settled as abandoned: if Redis ran it, its lease ends
//! and its whole reservation is given back; if Redis has not run it yet, a marker makes it
//! a no-op when it does.

use super::pending::{Settlement, MAX_PENDING};
use super::{Fleet, Unanswered};
use std::sync::Arc;

/// Settlements replayed per batch.
const BATCH: usize = 64;

impl Fleet {
    /// Sends `s` in the background; queued when Redis does not answer.
    pub(crate) fn settle(self: &Arc<Self>, s: Settlement) {
        let fleet = self.clone();
        self.handle.spawn(async move {
            if fleet.send(&s).await.is_err() {
                fleet.enqueue(s);
            }
        });
    }

    /// One run of `settle.lua`.
    async fn send(self: &Arc<Self>, s: &Settlement) -> Result<i64, Unanswered> {
        let mut call = self.scripts.settle.prepare_invoke();
        call.key(self.key(&s.tenant, "tpm"))
            .key(self.key(&s.tenant, "conc"))
            .key(self.key(&s.tenant, "gone"))
            .arg(s.tokens_per_minute)
            .arg(s.delta)
            .arg(&s.lease)
            .arg(u8::from(s.abandoned))
            .arg(self.cfg.lease_ttl_s * 1000);
        self.call(&call).await
    }

    /// Queues `s` until Redis answers (counted; dropped when the queue is full).
    pub(crate) fn enqueue(self: &Arc<Self>, s: Settlement) {
        let m = self.metrics();
        if !self.pending.push(s) {
            m.settlements_dropped.inc();
            tracing::warn!(
                max = MAX_PENDING,
                "settlement queue full: a settlement was dropped (its lease lapses with state.lease_ttl_s)"
            );
            return;
        }
        m.settlements_queued.inc();
        // Redis may have come back between the failed call and the push.
        if !self.is_degraded() {
            self.replay_settlements();
        }
    }

    /// Replays the queue in the background (one replay at a time), until it is empty or
    /// Redis stops answering (the rest waits for the next recovery).
    pub(crate) fn replay_settlements(self: &Arc<Self>) {
        if self.pending.len() == 0 || !self.pending.start_replay() {
            return;
        }
        let fleet = self.clone();
        self.handle.spawn(async move {
            let mut replayed = 0u64;
            loop {
                let batch = fleet.pending.take(BATCH);
                if batch.is_empty() {
                    break;
                }
                let mut rest = batch.into_iter();
                let mut failed = None;
                for s in rest.by_ref() {
                    if fleet.send(&s).await.is_err() {
                        failed = Some(s);
                        break;
                    }
                    replayed += 1;
                    fleet.metrics().settlements_replayed.inc();
                }
                if let Some(s) = failed {
                    let mut back = vec![s];
                    back.extend(rest);
                    fleet.pending.put_back(back);
                    break;
                }
            }
            fleet.pending.end_replay();
            if replayed > 0 {
                tracing::info!(
                    replayed,
                    left = fleet.pending.len(),
                    "settlements replayed to Redis"
                );
            }
            // A settlement queued while this replay ended waits for no other recovery.
            if fleet.pending.len() > 0 && !fleet.is_degraded() {
                fleet.replay_settlements();
            }
        });
    }
}
