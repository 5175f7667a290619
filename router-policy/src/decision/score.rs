//! How a policy scored the candidates: the rule that decided ([`Branch`]) and each
//! candidate's cost and its terms.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use warmpath_core::ids::ReplicaId;

/// Which rule of the policy made the choice. Stable snake_case names for metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Branch {
    /// A replica holding the prefix was cheapest.
    CacheHit,
    /// The prefix holder was overloaded: sent to a second holder (or its future home) to warm it.
    SpreadHotPrefix,
    /// Nobody holds the prefix: its bounded-load rendezvous home.
    ColdHome,
    /// Chosen by load alone (no prefix signal, or recomputing elsewhere was cheaper).
    LeastLoaded,
    /// Cost model: a replica without the prefix was cheaper than every holder.
    LowestCost,
    /// Load imbalance overrode cache affinity (cache_aware).
    Imbalanced,
    /// Round robin.
    RoundRobin,
    /// Uniform random.
    Random,
    /// The key's first choice on the hash ring.
    ConsistentHash,
    /// The key's first choice was over its load bound; a later one took it.
    ConsistentHashOverflow,
}

impl Branch {
    /// Every branch, for pre-registering metric label values.
    pub const ALL: [Branch; 10] = [
        Branch::CacheHit,
        Branch::SpreadHotPrefix,
        Branch::ColdHome,
        Branch::LeastLoaded,
        Branch::LowestCost,
        Branch::Imbalanced,
        Branch::RoundRobin,
        Branch::Random,
        Branch::ConsistentHash,
        Branch::ConsistentHashOverflow,
    ];

    /// The metric label (same as the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            Branch::CacheHit => "cache_hit",
            Branch::SpreadHotPrefix => "spread_hot_prefix",
            Branch::ColdHome => "cold_home",
            Branch::LeastLoaded => "least_loaded",
            Branch::LowestCost => "lowest_cost",
            Branch::Imbalanced => "imbalanced",
            Branch::RoundRobin => "round_robin",
            Branch::Random => "random",
            Branch::ConsistentHash => "consistent_hash",
            Branch::ConsistentHashOverflow => "consistent_hash_overflow",
        }
    }
}

/// Maximum number of named cost terms per candidate.
pub const MAX_TERMS: usize = 8;

/// Up to [`MAX_TERMS`] named cost terms, stored inline (no allocation per candidate).
/// Serialises as a JSON object, e.g. `{"queue_ms":1.5,"prefill_ms":40.0}`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Terms {
    items: [(&'static str, f64); MAX_TERMS],
    len: u8,
}

impl Terms {
    /// No terms.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a term; terms beyond [`MAX_TERMS`] are dropped (a programming error caught in tests).
    pub fn with(mut self, name: &'static str, value: f64) -> Self {
        debug_assert!((self.len as usize) < MAX_TERMS, "too many cost terms");
        if (self.len as usize) < MAX_TERMS {
            self.items[self.len as usize] = (name, value);
            self.len += 1;
        }
        self
    }

    /// The terms in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.items[..self.len as usize].iter().copied()
    }

    /// The value of a named term.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there are no terms.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Serialize for Terms {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, &v)?;
        }
        m.end()
    }
}

/// How one eligible replica scored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateScore {
    /// The replica.
    pub replica: ReplicaId,
    /// Prefix blocks the index says it holds (max of precise and approximate).
    pub matched_blocks: u32,
    /// True when `matched_blocks` comes from the replica's own KV events.
    pub precise: bool,
    /// The policy's score: predicted TTFT in ms for `warm`, a policy-specific cost otherwise
    /// (lower is better).
    pub cost_ms: f64,
    /// The terms that add up to (or explain) `cost_ms`.
    pub terms: Terms,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_serialise_as_an_object_and_names_are_stable() {
        let t = Terms::new().with("queue_ms", 1.5).with("prefill_ms", 40.0);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"queue_ms":1.5,"prefill_ms":40.0}"#
        );
        assert_eq!(t.get("prefill_ms"), Some(40.0));
        assert_eq!(t.get("missing"), None);
        for b in Branch::ALL {
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{}\"", b.as_str()));
        }
    }
}
