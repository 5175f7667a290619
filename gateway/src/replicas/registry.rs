//! The replica set: every registered replica, the tokenizer shared per checkpoint, and the
//! in-flight slots that bound what each replica is sent.

use super::addr::ReplicaAddr;
use super::replica::{InsertError, Replica, UpstreamMeta};
use crate::encoder::PromptEncoder;
use crate::routing::Router;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use warmpath_core::{CheckpointId, ReplicaId};
use warmpath_protocol::replica_api::ReplicaInfo;

/// A held in-flight slot on a replica, with the prompt tokens it counts as pending there;
/// released on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    replica: Arc<Replica>,
    freed: Arc<Notify>,
    prefill: AtomicU64,
}

impl Slot {
    /// The replica this slot is on.
    pub(crate) fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// The request went upstream with `tokens` prompt tokens to prefill: they count as
    /// the replica's pending prefill until [`Self::prefill_done`] (or the drop).
    pub(crate) fn prefill_sent(&self, tokens: u64) {
        let before = self.prefill.swap(tokens, Ordering::AcqRel);
        self.replica.pending_prefill.sub(before);
        self.replica.pending_prefill.add(tokens);
    }

    /// The response started: the prompt is no longer pending.
    pub(crate) fn prefill_done(&self) {
        let n = self.prefill.swap(0, Ordering::AcqRel);
        self.replica.pending_prefill.sub(n);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.prefill_done();
        self.replica.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.freed.notify_waiters();
    }
}

/// All replicas.
pub(crate) struct Registry {
    replicas: RwLock<Vec<Arc<Replica>>>,
    next_id: AtomicU32,
    tokenizers: Mutex<HashMap<CheckpointId, Arc<PromptEncoder>>>,
    freed: Arc<Notify>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("replicas", &self.replicas.read().len())
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry.
    pub(crate) fn new() -> Self {
        Self {
            replicas: RwLock::new(Vec::new()),
            next_id: AtomicU32::new(0),
            tokenizers: Mutex::new(HashMap::new()),
            freed: Arc::new(Notify::new()),
        }
    }

    /// Every registered replica (draining included).
    pub(crate) fn all(&self) -> Vec<Arc<Replica>> {
        self.replicas.read().clone()
    }

    /// The replica with id `id`.
    pub(crate) fn get(&self, id: ReplicaId) -> Option<Arc<Replica>> {
        self.replicas.read().iter().find(|r| r.id == id).cloned()
    }

    /// The tokenizer already built for `checkpoint`, if a replica of it registered before.
    pub(crate) fn tokenizer(&self, checkpoint: &CheckpointId) -> Option<Arc<PromptEncoder>> {
        self.tokenizers.lock().get(checkpoint).cloned()
    }

    /// Keeps `t` as the tokenizer of `checkpoint` unless one is there already; returns the
    /// one kept, shared by every replica of the checkpoint.
    pub(crate) fn share_tokenizer(
        &self,
        checkpoint: &CheckpointId,
        t: PromptEncoder,
    ) -> Arc<PromptEncoder> {
        self.tokenizers
            .lock()
            .entry(checkpoint.clone())
            .or_insert_with(|| Arc::new(t))
            .clone()
    }

    /// Whether a replica at `addr` is registered.
    pub(crate) fn contains(&self, addr: &ReplicaAddr) -> bool {
        self.replicas.read().iter().any(|r| &r.addr == addr)
    }

    /// Registers a Warmpath replica whose info and tokenizer are already known (no discovery).
    pub(crate) fn insert(
        &self,
        addr: ReplicaAddr,
        info: ReplicaInfo,
        tokenizer: Arc<PromptEncoder>,
    ) -> Result<Arc<Replica>, InsertError> {
        let meta = UpstreamMeta::warmpath(&info.model);
        self.insert_upstream(addr, info, tokenizer, meta)
    }

    /// Registers a replica of any engine whose info and encoder are already known.
    pub(crate) fn insert_upstream(
        &self,
        addr: ReplicaAddr,
        info: ReplicaInfo,
        tokenizer: Arc<PromptEncoder>,
        upstream: UpstreamMeta,
    ) -> Result<Arc<Replica>, InsertError> {
        let id = ReplicaId(self.next_id.fetch_add(1, Ordering::AcqRel));
        let replica = Arc::new(Replica::new(id, addr, info, tokenizer, upstream)?);
        {
            let mut list = self.replicas.write();
            if list.iter().any(|r| r.addr == replica.addr) {
                return Err(InsertError::Duplicate(replica.addr.url()));
            }
            list.push(replica.clone());
        }
        tracing::info!(replica = %replica.id, url = %replica.addr.url(), model = %replica.info.model,
            engine = replica.upstream.engine.as_str(), checkpoint = %replica.info.checkpoint, block_size = replica.info.block_size.0, "registered replica");
        Ok(replica)
    }

    /// Stops sending new requests to a replica; in-flight ones finish.
    pub(crate) fn drain(&self, id: ReplicaId) -> bool {
        match self.get(id) {
            Some(r) => {
                r.draining.store(true, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Removes a replica: it leaves routing and the index; its tasks stop.
    pub(crate) fn remove(&self, id: ReplicaId, router: &Router) -> Option<Arc<Replica>> {
        let mut list = self.replicas.write();
        let pos = list.iter().position(|r| r.id == id)?;
        let r = list.remove(pos);
        r.removed.store(true, Ordering::Release);
        drop(list);
        router.forget_replica(id);
        Some(r)
    }

    /// Models served by at least one replica, sorted.
    pub(crate) fn models(&self) -> Vec<String> {
        let mut m: Vec<String> = self
            .replicas
            .read()
            .iter()
            .flat_map(|r| r.upstream.models.iter().cloned())
            .collect();
        m.sort();
        m.dedup();
        m
    }

    /// The replicas that may serve `model` now: one checkpoint (the one with the most
    /// routable replicas; ties go to the lexically greatest id, i.e. usually the newest),
    /// not draining. `None` when no replica serves the model at all.
    pub(crate) fn candidates(
        &self,
        model: &str,
        now: std::time::Instant,
    ) -> Option<(CheckpointId, Vec<Arc<Replica>>)> {
        let list = self.replicas.read();
        let serving = || list.iter().filter(|r| r.serves(model));
        let first = serving().next()?;
        let best = if serving().all(|r| r.info.checkpoint == first.info.checkpoint) {
            // The usual case: one checkpoint per model, nothing to count.
            first.info.checkpoint.clone()
        } else {
            // Mid-rollout: the checkpoint with the most routable replicas. A replica set has
            // few checkpoints, so a small vector beats a hash map here.
            let mut counts: Vec<(&CheckpointId, usize)> = Vec::with_capacity(2);
            for r in serving() {
                let ok = r.routable(now);
                match counts.iter_mut().find(|(c, _)| *c == &r.info.checkpoint) {
                    Some((_, n)) => *n += usize::from(ok),
                    None => counts.push((&r.info.checkpoint, usize::from(ok))),
                }
            }
            counts
                .iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)))
                .map(|(c, _)| (*c).clone())?
        };
        let reps = serving()
            .filter(|r| r.info.checkpoint == best && !r.draining.load(Ordering::Acquire))
            .cloned()
            .collect();
        Some((best, reps))
    }

    /// The replicas serving `model` on `checkpoint` (a rollout's choice), not draining.
    pub(crate) fn on_checkpoint(
        &self,
        model: &str,
        checkpoint: &CheckpointId,
    ) -> Vec<Arc<Replica>> {
        self.replicas
            .read()
            .iter()
            .filter(|r| {
                r.serves(model)
                    && r.info.checkpoint == *checkpoint
                    && !r.draining.load(Ordering::Acquire)
            })
            .cloned()
            .collect()
    }

    /// Takes an in-flight slot on `r` if it is below `max`.
    pub(crate) fn try_acquire(&self, r: &Arc<Replica>, max: u32) -> Option<Slot> {
        // Compare-and-swap, never add-then-undo: a failed try must neither release a
        // slot (whose drop wakes every waiter, and each waiter's dispatch tries again: a
        // wake-up storm while requests wait) nor make the count pass `max` for a moment
        // (a concurrent try would fail on a slot that is free).
        r.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Slot {
            replica: r.clone(),
            freed: self.freed.clone(),
            prefill: AtomicU64::new(0),
        })
    }

    /// Waits until some slot is released (or `timeout` passes).
    pub(crate) async fn wait_for_free_slot(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.freed.notified())
            .await
            .is_ok()
    }

    /// Counts replicas currently ejected.
    pub(crate) fn ejected_count(&self, now: std::time::Instant) -> usize {
        self.replicas
            .read()
            .iter()
            .filter(|r| r.health.lock().is_ejected(now))
            .count()
    }

    /// Number of registered replicas.
    pub(crate) fn len(&self) -> usize {
        self.replicas.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::PromptEncoder;
    use warmpath_core::BlockSize;

    fn add(reg: &Registry, port: u16, checkpoint: &str) -> Arc<Replica> {
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new(checkpoint),
            block_size: BlockSize(16),
            hash_scheme: warmpath_core::SCHEME_VERSION,
            capacity_blocks: 1024,
            max_context: 4096,
            region: None,
            device: "cpu".into(),
            role: Default::default(),
            kv_store_region: None,
        };
        let addr = ReplicaAddr::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        reg.insert(addr, info, Arc::new(PromptEncoder::TextUnits))
            .unwrap()
    }

    #[test]
    fn without_a_rollout_the_checkpoint_with_most_routable_replicas_serves() {
        let reg = Registry::new();
        let now = std::time::Instant::now();
        let a1 = add(&reg, 1, "m@a");
        add(&reg, 2, "m@b");
        // A tie: the lexically greatest id (usually the newest) wins.
        let (ck, reps) = reg.candidates("m", now).unwrap();
        assert_eq!((ck.as_str(), reps.len()), ("m@b", 1));
        add(&reg, 3, "m@a");
        let (ck, reps) = reg.candidates("m", now).unwrap();
        assert_eq!((ck.as_str(), reps.len()), ("m@a", 2));
        // A draining replica neither counts nor is offered: one each again, the tie to m@b.
        assert!(reg.drain(a1.id));
        let (ck, reps) = reg.candidates("m", now).unwrap();
        assert_eq!((ck.as_str(), reps.len()), ("m@b", 1));
        assert_eq!(reg.on_checkpoint("m", &CheckpointId::new("m@a")).len(), 1);
        assert_eq!(reg.on_checkpoint("m", &CheckpointId::new("m@b")).len(), 1);
        assert!(reg.candidates("other", now).is_none());
    }

    /// A try on a full replica changes nothing and wakes no waiter (it once released a
    /// slot it never held, and every waiter's dispatch tried again: a wake-up storm).
    #[tokio::test]
    async fn a_failed_try_neither_counts_nor_wakes_the_waiters() {
        let reg = Registry::new();
        let r = add(&reg, 1, "m@a");
        let held = reg.try_acquire(&r, 1).expect("a free slot");
        let waiter = {
            let freed = reg.freed.clone();
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_millis(300), freed.notified())
                    .await
                    .is_ok()
            })
        };
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        for _ in 0..10 {
            assert!(reg.try_acquire(&r, 1).is_none());
        }
        assert_eq!(r.in_flight.load(Ordering::Acquire), 1);
        assert!(!waiter.await.unwrap(), "a failed try woke a waiter");
        drop(held);
        assert_eq!(r.in_flight.load(Ordering::Acquire), 0);
        assert!(reg.try_acquire(&r, 1).is_some());
    }
}
