//! The cluster view: a plain snapshot per replica that policies read.
//!
//! The gateway (or the simulator) fills it from health checks, load polls and its own
//! in-flight counters; policies never mutate it and never read a clock.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use warmpath_core::ids::{CheckpointId, RegionId, ReplicaId};

/// Replicas a routing decision keeps inline (more spill to the heap).
pub const INLINE_REPLICAS: usize = 8;

/// The eligible replicas of one decision.
pub type Replicas<'a> = SmallVec<[&'a ReplicaSnapshot; INLINE_REPLICAS]>;

/// Health as seen by the caller's health checker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Takes new requests.
    #[default]
    Healthy,
    /// Failing checks or circuit open: never routed to.
    Unhealthy,
    /// Finishing its in-flight work before shutdown: never routed to.
    Draining,
}

/// What the router knows about one replica at decision time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSnapshot {
    /// The replica.
    pub id: ReplicaId,
    /// Health; only [`Health::Healthy`] replicas are eligible.
    pub health: Health,
    /// The exact weights it serves; only replicas serving the request's checkpoint are eligible.
    pub checkpoint: CheckpointId,
    /// Region or zone label, if known.
    pub region: Option<RegionId>,
    /// Requests decoding or prefilling, as last reported by the replica.
    pub running: u32,
    /// Requests queued at the replica, as last reported.
    pub waiting: u32,
    /// Prompt tokens still to prefill (queued plus the unfinished part of running prefills).
    pub queued_prefill_tokens: u64,
    /// Requests the router sent and that have not finished yet, counted locally.
    pub in_flight: u32,
    /// KV blocks in use.
    pub kv_used_blocks: u64,
    /// KV blocks in total; 0 = unknown.
    pub kv_capacity_blocks: u64,
    /// Measured prefill throughput in tokens per second; 0 = unknown (policies use a default).
    pub prefill_tokens_per_s: f64,
    /// Measured rate of loading prompt tokens from the shared KV tier, tokens per second;
    /// 0 = unknown (no tier, or nothing loaded yet: policies use a default).
    #[serde(default)]
    pub tier_tokens_per_s: f64,
    /// What it does in a role-split pool ([`crate::disagg`]).
    #[serde(default)]
    pub role: warmpath_core::ReplicaRole,
    /// Whether it has the LoRA adapter this request names loaded.
    #[serde(default)]
    pub adapter: AdapterState,
}

/// Whether a replica has the LoRA adapter a request names loaded, as far as the caller
/// knows (the engine's report of the adapters it serves, or where the caller sent that
/// adapter lately). `warm` charges a replica that would load it first `adapter_load_ms`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdapterState {
    /// The request names no adapter (the base model): no term.
    #[default]
    NotRequested,
    /// The adapter is loaded there: the request runs at once.
    Loaded,
    /// The adapter is not known to be loaded there: it is loaded before the prefill.
    NotLoaded,
}

impl ReplicaSnapshot {
    /// A healthy, idle replica serving `checkpoint`; fill the rest with struct update syntax.
    pub fn idle(id: ReplicaId, checkpoint: CheckpointId) -> Self {
        Self {
            id,
            checkpoint,
            ..Self::default()
        }
    }

    /// Outstanding requests: the larger of the local in-flight count and the last reported
    /// running + waiting (the report may be stale, the local count misses other gateways).
    pub fn load(&self) -> u32 {
        self.in_flight
            .max(self.running.saturating_add(self.waiting))
    }

    /// Requests the router sent that the last load report does not yet reflect.
    pub fn unreported_requests(&self) -> u32 {
        self.in_flight
            .saturating_sub(self.running.saturating_add(self.waiting))
    }

    /// KV usage as a fraction in `[0, 1]`; 0 when the capacity is unknown.
    pub fn kv_usage(&self) -> f64 {
        if self.kv_capacity_blocks == 0 {
            0.0
        } else {
            (self.kv_used_blocks as f64 / self.kv_capacity_blocks as f64).clamp(0.0, 1.0)
        }
    }

    /// True when it may receive a request for `checkpoint`.
    pub fn is_eligible_for(&self, checkpoint: &CheckpointId) -> bool {
        self.health == Health::Healthy && self.checkpoint == *checkpoint
    }
}

/// Every replica the router knows, in any order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterView {
    /// One snapshot per replica.
    pub replicas: Vec<ReplicaSnapshot>,
}

impl ClusterView {
    /// A view of these replicas.
    pub fn new(replicas: Vec<ReplicaSnapshot>) -> Self {
        Self { replicas }
    }

    /// The snapshot of `id`, if present.
    pub fn get(&self, id: ReplicaId) -> Option<&ReplicaSnapshot> {
        self.replicas.iter().find(|r| r.id == id)
    }

    /// Replicas that may serve `checkpoint`, sorted by id so every policy sees one order
    /// (inline up to [`INLINE_REPLICAS`]: a routing decision allocates nothing for them).
    pub fn eligible<'a>(&'a self, checkpoint: &CheckpointId) -> Replicas<'a> {
        let mut v: Replicas<'a> = self
            .replicas
            .iter()
            .filter(|r| r.is_eligible_for(checkpoint))
            .collect();
        v.sort_unstable_by_key(|r| r.id);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(s: &str) -> CheckpointId {
        CheckpointId::new(s)
    }

    #[test]
    fn eligibility_needs_health_and_checkpoint() {
        let mut a = ReplicaSnapshot::idle(ReplicaId(2), ck("m@1"));
        let b = ReplicaSnapshot {
            health: Health::Draining,
            ..ReplicaSnapshot::idle(ReplicaId(1), ck("m@1"))
        };
        let c = ReplicaSnapshot::idle(ReplicaId(0), ck("m@2"));
        let d = ReplicaSnapshot {
            health: Health::Unhealthy,
            ..ReplicaSnapshot::idle(ReplicaId(3), ck("m@1"))
        };
        a.in_flight = 3;
        let view = ClusterView::new(vec![a, b, c, d]);
        let ids: Vec<ReplicaId> = view.eligible(&ck("m@1")).iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![ReplicaId(2)]);
        assert_eq!(view.eligible(&ck("m@2"))[0].id, ReplicaId(0));
        assert!(view.eligible(&ck("other")).is_empty());
    }

    #[test]
    fn load_takes_the_fresher_of_local_and_reported() {
        let mut r = ReplicaSnapshot::idle(ReplicaId(0), ck("m"));
        r.in_flight = 5;
        r.running = 2;
        r.waiting = 1;
        assert_eq!(r.load(), 5);
        assert_eq!(r.unreported_requests(), 2);
        r.waiting = 10;
        assert_eq!(r.load(), 12);
        assert_eq!(r.unreported_requests(), 0);
        assert_eq!(r.kv_usage(), 0.0);
        r.kv_capacity_blocks = 100;
        r.kv_used_blocks = 25;
        assert!((r.kv_usage() - 0.25).abs() < 1e-12);
    }

    #[test]
    fn health_serialises_snake_case() {
        assert_eq!(
            serde_json::to_string(&Health::Draining).unwrap(),
            "\"draining\""
        );
        let err = serde_json::from_str::<ClusterView>(r#"{"replicas":[],"extra":1}"#);
        assert!(err.is_err());
    }
}
