//! The simulated shared KV tier (a Redis-like store every replica writes to and reads from).
//!
//! Every block a replica computes is also written to the tier (published to the gateways
//! as a `Stored` event with `tier: shared`; the tier's own evictions as `Removed`). On
//! arrival at a replica, a request whose prompt misses the replica's cache looks up the
//! tier: the consecutive run of blocks after its local match that the tier holds is loaded
//! (one lookup plus the tokens at the tier's bandwidth, off the batching steps, as the real
//! replica's HTTP side does), cached, and only the rest is prefilled. A miss that finds
//! nothing in the tier still pays the lookup.

use std::collections::{HashSet, VecDeque};
use warmpath_core::{BlockHash, KvEvent, KvTier};

/// Shared-tier parameters of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierSim {
    /// Load bandwidth, prompt tokens per second (also what replicas report as measured).
    pub tokens_per_s: f64,
    /// Fixed cost of one lookup, ms.
    pub lookup_ms: f64,
    /// Blocks the tier holds; the oldest written go first beyond it.
    pub capacity_blocks: u64,
}

impl TierSim {
    /// Time to load `tokens` prompt tokens (one lookup included), ms.
    pub fn load_ms(&self, tokens: u64) -> f64 {
        self.lookup_ms + tokens as f64 / self.tokens_per_s * 1000.0
    }
}

/// The tier's contents: a set of block hashes with FIFO eviction (first written, first out).
#[derive(Debug)]
pub(crate) struct SharedStore {
    cfg: TierSim,
    set: HashSet<BlockHash>,
    order: VecDeque<BlockHash>,
}

impl SharedStore {
    /// An empty tier.
    pub(crate) fn new(cfg: TierSim) -> Self {
        Self {
            cfg,
            set: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// The parameters.
    pub(crate) fn cfg(&self) -> &TierSim {
        &self.cfg
    }

    /// Blocks held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// Consecutive blocks of `hashes` from `from` that the tier holds, at most `max`.
    pub(crate) fn run_from(&self, hashes: &[BlockHash], from: usize, max: usize) -> usize {
        hashes
            .get(from..)
            .unwrap_or(&[])
            .iter()
            .take(max)
            .take_while(|h| self.set.contains(h))
            .count()
    }

    /// Writes the blocks a replica just stored on its device (its device `Stored` events
    /// in `device`) to the tier; returns the shared-tier events to publish: the blocks
    /// written (those the tier lacked) and the ones evicted for room.
    pub(crate) fn write_through(&mut self, device: &[KvEvent]) -> Vec<KvEvent> {
        let mut out = Vec::new();
        let mut evicted = Vec::new();
        for ev in device {
            let KvEvent::Stored {
                parent,
                hashes,
                tier: KvTier::Device,
            } = ev
            else {
                continue;
            };
            let mut written = Vec::new();
            let mut parent = *parent;
            for &h in hashes {
                if self.set.insert(h) {
                    self.order.push_back(h);
                    written.push(h);
                } else {
                    // Already there: a run written so far ends, the next continues after it.
                    if !written.is_empty() {
                        out.push(stored(parent, std::mem::take(&mut written)));
                    }
                    parent = Some(h);
                }
            }
            if !written.is_empty() {
                out.push(stored(parent, written));
            }
            while self.order.len() as u64 > self.cfg.capacity_blocks {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                    evicted.push(old);
                }
            }
        }
        if !evicted.is_empty() {
            out.push(KvEvent::Removed {
                hashes: evicted,
                tier: KvTier::Shared,
            });
        }
        out
    }
}

fn stored(parent: Option<BlockHash>, hashes: Vec<BlockHash>) -> KvEvent {
    KvEvent::Stored {
        parent,
        hashes,
        tier: KvTier::Shared,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(xs: &[u64]) -> Vec<BlockHash> {
        xs.iter().map(|&x| BlockHash(x)).collect()
    }

    fn dev(parent: Option<u64>, xs: &[u64]) -> KvEvent {
        KvEvent::Stored {
            parent: parent.map(BlockHash),
            hashes: hs(xs),
            tier: KvTier::Device,
        }
    }

    #[test]
    fn writes_new_blocks_through_and_evicts_the_oldest() {
        let mut t = SharedStore::new(TierSim {
            tokens_per_s: 1000.0,
            lookup_ms: 2.0,
            capacity_blocks: 4,
        });
        assert_eq!(t.cfg().load_ms(500), 502.0);
        let out = t.write_through(&[dev(None, &[1, 2, 3])]);
        assert_eq!(
            out,
            vec![KvEvent::Stored {
                parent: None,
                hashes: hs(&[1, 2, 3]),
                tier: KvTier::Shared
            }]
        );
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 0, 10), 3);
        assert_eq!(t.run_from(&hs(&[1, 2, 3, 4]), 1, 1), 1);
        // 2 is there already: the new run starts after it; 1 is evicted for room.
        let out = t.write_through(&[dev(Some(1), &[2, 5, 6]), KvEvent::Cleared]);
        assert_eq!(
            out,
            vec![
                KvEvent::Stored {
                    parent: Some(BlockHash(2)),
                    hashes: hs(&[5, 6]),
                    tier: KvTier::Shared
                },
                KvEvent::Removed {
                    hashes: hs(&[1]),
                    tier: KvTier::Shared
                }
            ]
        );
        assert_eq!(t.len(), 4);
        assert_eq!(t.run_from(&hs(&[1, 2, 3]), 0, 10), 0);
        // Device removals and shared events are not written.
        let out = t.write_through(&[KvEvent::Removed {
            hashes: hs(&[2]),
            tier: KvTier::Device,
        }]);
        assert!(out.is_empty());
        assert_eq!(t.run_from(&hs(&[2, 3, 5, 6]), 0, 10), 4);
    }
}
