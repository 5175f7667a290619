//! Regions: where the deciding gateway is, how far every other region is, and which
//! regions a tenant's data may be processed in.
//!
//! Every policy applies the same two filters before it scores anyone
//! ([`Regions::narrow`]):
//! 1. **Residency** (per tenant, e.g. `[eu]`): a replica outside the list, or with no region
//!    label, is never eligible. Nothing overrides it: no spill, no retry, no fallback.
//! 2. **Mode** (per gateway):
//!    - `global`: regions are ignored (every allowed replica competes, no RTT charged);
//!    - `local`: only the home region's replicas; when it has none eligible, the nearest
//!      region that has some;
//!    - `spill` (the default): a policy that predicts TTFT (`warm`) sees every allowed
//!      region, charges each remote replica the round trip, and leaves home only when
//!      the remote prediction plus RTT beats the local one by `spill_margin_ms`; every
//!      other policy behaves as in `local` (its scores are not times, so they cannot be
//!      compared with an RTT).
//!
//! A replica without a region label counts as local (single-region deployments label
//! nothing).

use crate::cluster::ReplicaSnapshot;
use crate::error::RouteError;
use serde::{Deserialize, Serialize};
use warmpath_core::ids::RegionId;

pub use crate::decision::{RegionNote, SpillReason};

/// How a gateway treats replicas outside its home region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionMode {
    /// Ignore regions (residency still applies).
    Global,
    /// Home region only (the nearest other region when home has no eligible replica).
    Local,
    /// Home first; another region when its predicted TTFT plus RTT wins by a margin.
    #[default]
    Spill,
}

/// One measured or configured round trip between two regions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rtt {
    /// One end.
    pub a: RegionId,
    /// The other end.
    pub b: RegionId,
    /// Round-trip time in ms (symmetric).
    pub ms: f64,
}

/// The deciding gateway's regional context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regions {
    /// The gateway's own region.
    pub home: RegionId,
    /// How other regions are treated.
    #[serde(default)]
    pub mode: RegionMode,
    /// Round trips between regions (symmetric; a region to itself is 0).
    #[serde(default)]
    pub rtt: Vec<Rtt>,
    /// Round trip assumed for a pair the matrix does not list, in ms.
    #[serde(default = "default_unknown_rtt_ms")]
    pub unknown_rtt_ms: f64,
    /// A remote replica must beat the best local prediction by this much (ms) to take the
    /// request.
    #[serde(default = "default_spill_margin_ms")]
    pub spill_margin_ms: f64,
}

fn default_unknown_rtt_ms() -> f64 {
    250.0
}

fn default_spill_margin_ms() -> f64 {
    50.0
}

impl Regions {
    /// A gateway in `home` with no RTTs known yet.
    pub fn new(home: RegionId, mode: RegionMode) -> Self {
        Self {
            home,
            mode,
            rtt: Vec::new(),
            unknown_rtt_ms: default_unknown_rtt_ms(),
            spill_margin_ms: default_spill_margin_ms(),
        }
    }

    /// Adds the round trip between `a` and `b`.
    pub fn with_rtt(mut self, a: &str, b: &str, ms: f64) -> Self {
        self.rtt.push(Rtt {
            a: RegionId::new(a),
            b: RegionId::new(b),
            ms,
        });
        self
    }

    /// Checks the values; errors name the key.
    pub fn validate(&self) -> Result<(), RouteError> {
        if self.home.as_str().is_empty() {
            return Err(RouteError::invalid("regions.home", "must be non-empty"));
        }
        for r in &self.rtt {
            if !(r.ms.is_finite() && r.ms >= 0.0) {
                return Err(RouteError::invalid(
                    "regions.rtt.ms",
                    format!(
                        "{} between {} and {} is not a finite ms >= 0",
                        r.ms, r.a, r.b
                    ),
                ));
            }
        }
        for (key, v) in [
            ("regions.unknown_rtt_ms", self.unknown_rtt_ms),
            ("regions.spill_margin_ms", self.spill_margin_ms),
        ] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return Err(RouteError::invalid(
                    key,
                    format!("{v} is outside [0, 1000000]"),
                ));
            }
        }
        Ok(())
    }

    /// True when `r` is in the home region (or carries no region label).
    pub fn is_local(&self, r: &ReplicaSnapshot) -> bool {
        r.region.as_ref().is_none_or(|g| *g == self.home)
    }

    /// Round trip from home to `r`'s region, in ms (0 for a local replica).
    pub fn rtt_to(&self, r: &ReplicaSnapshot) -> f64 {
        match &r.region {
            None => 0.0,
            Some(g) => self.rtt_between(&self.home, g),
        }
    }

    /// Round trip between two regions, in ms.
    pub fn rtt_between(&self, a: &RegionId, b: &RegionId) -> f64 {
        if a == b {
            return 0.0;
        }
        self.rtt
            .iter()
            .find(|r| (r.a == *a && r.b == *b) || (r.a == *b && r.b == *a))
            .map_or(self.unknown_rtt_ms, |r| r.ms)
    }

    /// Keeps the replicas a request from this gateway may be sent to before any scoring:
    /// every one when the mode is `global` (or `spill` and the policy compares RTTs
    /// itself), otherwise the home region's, or the nearest region's when home has none.
    pub(crate) fn narrow<'a>(
        &self,
        replicas: &mut crate::cluster::Replicas<'a>,
        policy_compares_rtt: bool,
    ) {
        let keep_all = match self.mode {
            RegionMode::Global => true,
            RegionMode::Spill => policy_compares_rtt,
            RegionMode::Local => false,
        };
        if keep_all || replicas.is_empty() {
            return;
        }
        if replicas.iter().any(|r| self.is_local(r)) {
            replicas.retain(|r| self.is_local(r));
            return;
        }
        let nearest = replicas
            .iter()
            .map(|r| self.rtt_to(r))
            .fold(f64::INFINITY, f64::min);
        let region = replicas
            .iter()
            .find(|r| self.rtt_to(r) == nearest)
            .and_then(|r| r.region.clone());
        replicas.retain(|r| r.region == region);
    }
}

/// True when a tenant pinned to `residency` (empty = anywhere) may use replica `r`. A
/// replica without a region label is refused by any pin: residency fails closed.
pub fn resident(residency: &[RegionId], r: &ReplicaSnapshot) -> bool {
    allows(residency, r.region.as_ref())
}

/// True when a tenant pinned to `residency` (empty = anywhere) may have its data in
/// `region`: a replica's, or its shared KV tier's. No region fails closed under any pin.
/// The one residency rule, for the router, pre-warm and the tier alike.
pub fn allows(residency: &[RegionId], region: Option<&RegionId>) -> bool {
    residency.is_empty() || region.is_some_and(|g| residency.contains(g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterView, Replicas};
    use warmpath_core::ids::{CheckpointId, ReplicaId};

    fn rep(id: u32, region: Option<&str>) -> ReplicaSnapshot {
        ReplicaSnapshot {
            region: region.map(RegionId::new),
            ..ReplicaSnapshot::idle(ReplicaId(id), CheckpointId::new("m"))
        }
    }

    fn ids(v: &Replicas<'_>) -> Vec<u32> {
        v.iter().map(|r| r.id.0).collect()
    }

    #[test]
    fn rtt_is_symmetric_zero_at_home_and_defaulted_when_unknown() {
        let g = Regions::new(RegionId::new("eu"), RegionMode::Spill)
            .with_rtt("eu", "us", 70.0)
            .with_rtt("us", "ap", 140.0);
        let (eu, us, ap) = (
            RegionId::new("eu"),
            RegionId::new("us"),
            RegionId::new("ap"),
        );
        assert_eq!(g.rtt_between(&us, &eu), 70.0);
        assert_eq!(g.rtt_between(&ap, &us), 140.0);
        assert_eq!(g.rtt_between(&eu, &eu), 0.0);
        assert_eq!(g.rtt_between(&eu, &ap), g.unknown_rtt_ms);
        assert_eq!(g.rtt_to(&rep(0, None)), 0.0);
        assert!(g.is_local(&rep(0, None)) && g.is_local(&rep(1, Some("eu"))));
        assert!(!g.is_local(&rep(2, Some("us"))));
        g.validate().unwrap();
        let bad = g.clone().with_rtt("eu", "sa", f64::NAN);
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("regions.rtt.ms"));
    }

    #[test]
    fn residency_fails_closed_on_unlabelled_replicas() {
        let eu = [RegionId::new("eu")];
        assert!(resident(&eu, &rep(0, Some("eu"))));
        assert!(!resident(&eu, &rep(1, Some("us"))));
        assert!(!resident(&eu, &rep(2, None)));
        assert!(resident(&[], &rep(2, None)));
    }

    #[test]
    fn narrowing_by_mode() {
        let view = ClusterView::new(vec![
            rep(0, Some("us")),
            rep(1, Some("eu")),
            rep(2, Some("ap")),
            rep(3, Some("eu")),
        ]);
        let all = || view.eligible(&CheckpointId::new("m"));
        let base = Regions::new(RegionId::new("eu"), RegionMode::Local)
            .with_rtt("eu", "us", 70.0)
            .with_rtt("eu", "ap", 140.0);
        let mut v = all();
        base.narrow(&mut v, true);
        assert_eq!(ids(&v), vec![1, 3], "local keeps home only");
        let spill = Regions {
            mode: RegionMode::Spill,
            ..base.clone()
        };
        let mut v = all();
        spill.narrow(&mut v, true);
        assert_eq!(ids(&v).len(), 4, "spill keeps all for an RTT-aware policy");
        let mut v = all();
        spill.narrow(&mut v, false);
        assert_eq!(ids(&v), vec![1, 3], "spill is local for other policies");
        let global = Regions {
            mode: RegionMode::Global,
            ..base.clone()
        };
        let mut v = all();
        global.narrow(&mut v, false);
        assert_eq!(ids(&v).len(), 4);
        // Home has nobody: the nearest region.
        let mut v = all();
        v.retain(|r| r.region.as_ref().is_some_and(|g| g.as_str() != "eu"));
        base.narrow(&mut v, false);
        assert_eq!(ids(&v), vec![0]);
    }
}
