//! KV events: the wire schema a replica uses to tell routers which blocks it holds.
//!
//! Each replica numbers its events with an [`Epoch`] (new on every restart or weight reload)
//! and a gap-free, monotonic [`SeqNo`] within the epoch. A stream starts with a
//! [`KvStreamMessage::Snapshot`] of every stored hash, then carries deltas. A consumer feeds
//! each record through a [`StreamCursor`], which says whether it is the expected next one, a
//! duplicate, a gap (resubscribe for a snapshot) or a new epoch (drop everything you knew).
//!
//! JSON shape (one message per line on the wire):
//! `{"type":"snapshot","epoch":7,"seq":41,"hashes":[...]}`,
//! `{"type":"event","epoch":7,"seq":42,"event":{"kind":"stored","parent":null,"hashes":[...]}}`.

use crate::ids::BlockHash;
use serde::{Deserialize, Serialize};

/// Identifies one life of a replica's cache. Changes on restart and on weight reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Epoch(pub u64);

/// Position of an event within an epoch; the first event after a snapshot at `seq` is `seq+1`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct SeqNo(pub u64);

impl SeqNo {
    /// The sequence number after this one.
    pub fn next(self) -> SeqNo {
        SeqNo(self.0 + 1)
    }
}

/// Where the blocks of a [`KvEvent`] live (vLLM's `medium`, reduced to what routing needs).
///
/// Absent on the wire means [`KvTier::Device`], so streams from replicas that predate the
/// shared tier parse unchanged and device events serialise as they always did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvTier {
    /// The replica's own KV cache: a hit costs nothing; the replica becomes a holder.
    #[default]
    Device,
    /// The cluster's shared KV tier (e.g. Redis): any replica can fetch the blocks at the
    /// tier's bandwidth. The publishing replica does not become a holder.
    Shared,
    /// The publishing replica's own offload tier (vLLM's `medium` `CPU` or `DISK`, LMCache):
    /// only that replica can load the blocks, cheaper than a recompute but not free.
    Offload,
}

impl KvTier {
    /// True for [`KvTier::Device`] (serde's `skip_serializing_if`).
    pub fn is_device(&self) -> bool {
        *self == KvTier::Device
    }
}

/// One change to a replica's cached block set (or, with `tier: shared`, to the shared tier).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum KvEvent {
    /// Blocks written and now reusable. `hashes` is a chain continuing `parent`
    /// (`None`: it starts at the root).
    Stored {
        /// Hash of the block before `hashes[0]`, if any.
        parent: Option<BlockHash>,
        /// The new blocks, in chain order.
        hashes: Vec<BlockHash>,
        /// Where they were written (omitted on the wire for the device).
        #[serde(default, skip_serializing_if = "KvTier::is_device")]
        tier: KvTier,
    },
    /// Blocks evicted.
    Removed {
        /// The evicted blocks.
        hashes: Vec<BlockHash>,
        /// Where they were evicted from (omitted on the wire for the device).
        #[serde(default, skip_serializing_if = "KvTier::is_device")]
        tier: KvTier,
    },
    /// Everything dropped (e.g. weight reload); normally also starts a new epoch.
    Cleared,
}

/// An event with its position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvEventRecord {
    /// The epoch the event belongs to.
    pub epoch: Epoch,
    /// Its sequence number within the epoch.
    pub seq: SeqNo,
    /// What changed.
    pub event: KvEvent,
}

/// One message on a replica's event stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KvStreamMessage {
    /// The full stored set as of `seq` (the last event folded into it).
    Snapshot {
        /// Epoch of the snapshot.
        epoch: Epoch,
        /// Last sequence number included.
        seq: SeqNo,
        /// Every stored block hash.
        hashes: Vec<BlockHash>,
    },
    /// A delta after the snapshot.
    Event(KvEventRecord),
}

/// What a consumer should do with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The expected next record: apply it.
    Apply,
    /// Already applied (replay after a resume): ignore it.
    Duplicate,
    /// Records were lost between `expected` and `got`: state is stale, resubscribe.
    Gap {
        /// The sequence number that was due.
        expected: SeqNo,
        /// The one that arrived.
        got: SeqNo,
    },
    /// The replica restarted or reloaded: drop everything known about it, then resync.
    NewEpoch,
}

/// Tracks a consumer's position in one replica's stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamCursor {
    position: Option<(Epoch, SeqNo)>,
}

impl StreamCursor {
    /// A cursor that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Position after the last applied record or snapshot: resume from `seq + 1`.
    pub fn position(&self) -> Option<(Epoch, SeqNo)> {
        self.position
    }

    /// Resets to a snapshot's position.
    pub fn reset_to(&mut self, epoch: Epoch, seq: SeqNo) {
        self.position = Some((epoch, seq));
    }

    /// Classifies `rec`; advances the cursor only when the answer is [`Observation::Apply`].
    pub fn observe(&mut self, epoch: Epoch, seq: SeqNo) -> Observation {
        match self.position {
            None => Observation::Gap {
                expected: SeqNo(0),
                got: seq,
            },
            Some((e, _)) if e != epoch => Observation::NewEpoch,
            Some((_, last)) if seq <= last => Observation::Duplicate,
            Some((e, last)) if seq == last.next() => {
                self.position = Some((e, seq));
                Observation::Apply
            }
            Some((_, last)) => Observation::Gap {
                expected: last.next(),
                got: seq,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_is_stable() {
        let m = KvStreamMessage::Event(KvEventRecord {
            epoch: Epoch(7),
            seq: SeqNo(42),
            event: KvEvent::Stored {
                parent: None,
                hashes: vec![BlockHash(1), BlockHash(2)],
                tier: KvTier::Device,
            },
        });
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(
            s,
            r#"{"type":"event","epoch":7,"seq":42,"event":{"kind":"stored","parent":null,"hashes":[1,2]}}"#
        );
        assert_eq!(serde_json::from_str::<KvStreamMessage>(&s).unwrap(), m);
        let snap = KvStreamMessage::Snapshot {
            epoch: Epoch(7),
            seq: SeqNo(41),
            hashes: vec![BlockHash(9)],
        };
        assert_eq!(
            serde_json::to_string(&snap).unwrap(),
            r#"{"type":"snapshot","epoch":7,"seq":41,"hashes":[9]}"#
        );
        let cleared = serde_json::to_string(&KvEvent::Cleared).unwrap();
        assert_eq!(cleared, r#"{"kind":"cleared"}"#);
    }

    #[test]
    fn tier_is_omitted_for_the_device_and_defaults_to_it() {
        // Device events: byte-identical to the schema before tiers existed.
        let stored = KvEvent::Stored {
            parent: Some(BlockHash(3)),
            hashes: vec![BlockHash(4)],
            tier: KvTier::Device,
        };
        assert_eq!(
            serde_json::to_string(&stored).unwrap(),
            r#"{"kind":"stored","parent":3,"hashes":[4]}"#
        );
        let removed = KvEvent::Removed {
            hashes: vec![BlockHash(5)],
            tier: KvTier::Device,
        };
        assert_eq!(
            serde_json::to_string(&removed).unwrap(),
            r#"{"kind":"removed","hashes":[5]}"#
        );
        // Old JSON (no tier) parses as the device.
        let old: KvEvent = serde_json::from_str(r#"{"kind":"removed","hashes":[5]}"#).unwrap();
        assert_eq!(old, removed);
        let old: KvEvent =
            serde_json::from_str(r#"{"kind":"stored","parent":3,"hashes":[4]}"#).unwrap();
        assert_eq!(old, stored);
        // Shared events carry the tier, and round-trip.
        let shared = KvEvent::Stored {
            parent: None,
            hashes: vec![BlockHash(7)],
            tier: KvTier::Shared,
        };
        let s = serde_json::to_string(&shared).unwrap();
        assert_eq!(
            s,
            r#"{"kind":"stored","parent":null,"hashes":[7],"tier":"shared"}"#
        );
        assert_eq!(serde_json::from_str::<KvEvent>(&s).unwrap(), shared);
        let gone = KvEvent::Removed {
            hashes: vec![BlockHash(7)],
            tier: KvTier::Shared,
        };
        let s = serde_json::to_string(&gone).unwrap();
        assert_eq!(s, r#"{"kind":"removed","hashes":[7],"tier":"shared"}"#);
        assert_eq!(serde_json::from_str::<KvEvent>(&s).unwrap(), gone);
        // Still strict: unknown fields and unknown tiers are refused.
        for bad in [
            r#"{"kind":"removed","hashes":[5],"medium":"GPU"}"#,
            r#"{"kind":"removed","hashes":[5],"tier":"cpu"}"#,
        ] {
            assert!(serde_json::from_str::<KvEvent>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cursor_detects_gaps_duplicates_and_epochs() {
        let mut c = StreamCursor::new();
        assert!(matches!(
            c.observe(Epoch(1), SeqNo(1)),
            Observation::Gap { .. }
        ));
        c.reset_to(Epoch(1), SeqNo(5));
        assert_eq!(c.observe(Epoch(1), SeqNo(6)), Observation::Apply);
        assert_eq!(c.observe(Epoch(1), SeqNo(6)), Observation::Duplicate);
        assert_eq!(
            c.observe(Epoch(1), SeqNo(8)),
            Observation::Gap {
                expected: SeqNo(7),
                got: SeqNo(8)
            }
        );
        assert_eq!(c.position(), Some((Epoch(1), SeqNo(6))));
        assert_eq!(c.observe(Epoch(2), SeqNo(1)), Observation::NewEpoch);
    }
}
