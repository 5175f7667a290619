//! The KV event log behind `GET /v1/kv/events`: the replica's cached block set, a numbered
//! history of its changes (a bounded ring), and a wake-up signal for followers.
//!
//! The engine loop publishes after each step, i.e. only after the pages were written. A
//! reader asks for what follows its position; when the ring no longer reaches back that
//! far, or the epoch differs, it gets a snapshot instead.
//!
//! The snapshot is the device cache only: `tier: shared` events (blocks in the cluster's
//! shared KV tier) pass through the ring to live readers but never enter the stored set.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::watch;
use warmpath_core::{BlockHash, Epoch, KvEvent, KvEventRecord, KvStreamMessage, KvTier, SeqNo};

/// Default number of records kept for resuming readers.
pub const DEFAULT_RING: usize = 4096;

#[derive(Debug)]
struct Inner {
    epoch: Epoch,
    seq: SeqNo,
    stored: HashSet<BlockHash>,
    ring: VecDeque<KvEventRecord>,
    cap: usize,
}

/// Shared event log (one per replica).
#[derive(Debug)]
pub struct EventLog {
    inner: Mutex<Inner>,
    tx: watch::Sender<(Epoch, SeqNo)>,
}

/// A fresh epoch: random per process (and per reload).
pub fn random_epoch() -> Epoch {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(now);
    h.write_u32(std::process::id());
    Epoch(h.finish())
}

impl EventLog {
    /// An empty log in `epoch`, keeping `cap` records for resumption.
    pub fn new(epoch: Epoch, cap: usize) -> Self {
        let (tx, _) = watch::channel((epoch, SeqNo(0)));
        Self {
            inner: Mutex::new(Inner {
                epoch,
                seq: SeqNo(0),
                stored: HashSet::new(),
                ring: VecDeque::new(),
                cap: cap.max(1),
            }),
            tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current position.
    pub fn position(&self) -> (Epoch, SeqNo) {
        let g = self.lock();
        (g.epoch, g.seq)
    }

    /// Appends `events` (in order) and wakes followers. `Cleared` starts a new epoch.
    pub fn publish(&self, events: Vec<KvEvent>) {
        if events.is_empty() {
            return;
        }
        let pos = {
            let mut g = self.lock();
            for ev in events {
                if matches!(ev, KvEvent::Cleared) {
                    g.epoch = random_epoch();
                    g.seq = SeqNo(0);
                    g.ring.clear();
                }
                g.apply(&ev);
                g.seq = g.seq.next();
                let rec = KvEventRecord {
                    epoch: g.epoch,
                    seq: g.seq,
                    event: ev,
                };
                if g.ring.len() == g.cap {
                    g.ring.pop_front();
                }
                g.ring.push_back(rec);
            }
            (g.epoch, g.seq)
        };
        self.tx.send_replace(pos);
    }

    /// What a reader at `after` (its last applied `(epoch, seq)`, or `None` for a new
    /// reader) should receive next: the following records, or a snapshot when the ring
    /// does not reach back or the epoch differs. Returns the reader's new position.
    pub fn read(&self, after: Option<(Epoch, SeqNo)>) -> (Vec<KvStreamMessage>, (Epoch, SeqNo)) {
        let g = self.lock();
        let now = (g.epoch, g.seq);
        let from = match after {
            Some((e, s)) if e == g.epoch && s <= g.seq => Some(s),
            // A reader in another epoch follows a clear live when the ring holds the new
            // epoch from its start, a `Cleared` record (which empties whatever it held).
            Some((e, _))
                if e != g.epoch
                    && g.ring
                        .front()
                        .is_some_and(|r| r.seq == SeqNo(1) && r.event == KvEvent::Cleared) =>
            {
                Some(SeqNo(0))
            }
            _ => None,
        };
        if let Some(s) = from {
            let first = g.ring.front().map(|r| r.seq).unwrap_or(g.seq.next());
            if s == g.seq {
                return (Vec::new(), now);
            }
            if s.next() >= first {
                let msgs = g
                    .ring
                    .iter()
                    .filter(|r| r.seq > s)
                    .cloned()
                    .map(KvStreamMessage::Event)
                    .collect();
                return (msgs, now);
            }
        }
        let mut hashes: Vec<BlockHash> = g.stored.iter().copied().collect();
        hashes.sort_unstable();
        (
            vec![KvStreamMessage::Snapshot {
                epoch: g.epoch,
                seq: g.seq,
                hashes,
            }],
            now,
        )
    }

    /// A receiver that changes whenever something is published.
    pub fn subscribe(&self) -> watch::Receiver<(Epoch, SeqNo)> {
        self.tx.subscribe()
    }

    /// The stored set (for tests and the info endpoint).
    pub fn stored_len(&self) -> usize {
        self.lock().stored.len()
    }
}

impl Inner {
    fn apply(&mut self, ev: &KvEvent) {
        match ev {
            KvEvent::Stored {
                hashes,
                tier: KvTier::Device,
                ..
            } => self.stored.extend(hashes.iter().copied()),
            KvEvent::Removed {
                hashes,
                tier: KvTier::Device,
            } => {
                for h in hashes {
                    self.stored.remove(h);
                }
            }
            // The shared tier is not this replica's cache.
            KvEvent::Stored { .. } | KvEvent::Removed { .. } => {}
            KvEvent::Cleared => self.stored.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(xs: &[u64]) -> KvEvent {
        KvEvent::Stored {
            parent: None,
            hashes: xs.iter().map(|&x| BlockHash(x)).collect(),
            tier: KvTier::Device,
        }
    }

    #[test]
    fn shared_tier_events_reach_readers_but_not_the_snapshot() {
        let log = EventLog::new(Epoch(5), 8);
        log.publish(vec![stored(&[1])]);
        let (_, pos) = log.read(None);
        let shared = KvEvent::Stored {
            parent: None,
            hashes: vec![BlockHash(1), BlockHash(2)],
            tier: KvTier::Shared,
        };
        log.publish(vec![
            shared.clone(),
            KvEvent::Removed {
                hashes: vec![BlockHash(1)],
                tier: KvTier::Shared,
            },
        ]);
        let (msgs, _) = log.read(Some(pos));
        assert!(matches!(&msgs[0], KvStreamMessage::Event(r) if r.event == shared));
        assert_eq!(msgs.len(), 2);
        // The device set still holds 1 (a shared removal is not a device eviction) and not 2.
        assert_eq!(log.stored_len(), 1);
        let (snap, _) = log.read(None);
        assert!(
            matches!(&snap[0], KvStreamMessage::Snapshot { hashes, .. } if hashes == &vec![BlockHash(1)])
        );
    }

    #[test]
    fn new_reader_gets_snapshot_then_deltas() {
        let log = EventLog::new(Epoch(5), 8);
        log.publish(vec![stored(&[1, 2])]);
        let (msgs, pos) = log.read(None);
        assert_eq!(
            msgs,
            vec![KvStreamMessage::Snapshot {
                epoch: Epoch(5),
                seq: SeqNo(1),
                hashes: vec![BlockHash(1), BlockHash(2)]
            }]
        );
        log.publish(vec![KvEvent::Removed {
            hashes: vec![BlockHash(1)],
            tier: KvTier::Device,
        }]);
        let (msgs, pos2) = log.read(Some(pos));
        assert_eq!(msgs.len(), 1);
        assert!(matches!(&msgs[0], KvStreamMessage::Event(r) if r.seq == SeqNo(2)));
        assert_eq!(pos2, (Epoch(5), SeqNo(2)));
        assert!(log.read(Some(pos2)).0.is_empty());
    }

    #[test]
    fn too_old_or_foreign_positions_get_a_snapshot() {
        let log = EventLog::new(Epoch(5), 2);
        for i in 0..5 {
            log.publish(vec![stored(&[i])]);
        }
        // Ring holds seq 4 and 5: resuming after 3 works, after 2 does not.
        assert!(matches!(
            log.read(Some((Epoch(5), SeqNo(3)))).0[0],
            KvStreamMessage::Event(_)
        ));
        assert!(matches!(
            log.read(Some((Epoch(5), SeqNo(2)))).0[0],
            KvStreamMessage::Snapshot { .. }
        ));
        assert!(matches!(
            log.read(Some((Epoch(9), SeqNo(5)))).0[0],
            KvStreamMessage::Snapshot { .. }
        ));
        assert!(matches!(
            log.read(Some((Epoch(5), SeqNo(99)))).0[0],
            KvStreamMessage::Snapshot { .. }
        ));
        // A foreign epoch gets a snapshot even while the ring reaches back to seq 1.
        let fresh = EventLog::new(Epoch(6), 8);
        fresh.publish(vec![stored(&[1])]);
        assert!(matches!(
            fresh.read(Some((Epoch(9), SeqNo(0)))).0[0],
            KvStreamMessage::Snapshot { .. }
        ));
    }

    #[test]
    fn clear_starts_a_new_epoch_that_live_readers_follow() {
        let log = EventLog::new(Epoch(5), 8);
        log.publish(vec![stored(&[1])]);
        let (_, pos) = log.read(None);
        log.publish(vec![KvEvent::Cleared, stored(&[7])]);
        let (epoch, seq) = log.position();
        assert_ne!(epoch, Epoch(5));
        assert_eq!(seq, SeqNo(2));
        let (msgs, _) = log.read(Some(pos));
        assert!(
            matches!(&msgs[0], KvStreamMessage::Event(r) if r.event == KvEvent::Cleared && r.seq == SeqNo(1) && r.epoch == epoch)
        );
        assert_eq!(log.stored_len(), 1);
    }
}
