//! `warm`'s regional rule: local first, and another region only when its predicted TTFT
//! plus the round trip beats the best local prediction by `spill_margin_ms`.
//!
//! `warm` evaluates the candidates twice when the tenant may use more than one region: once
//! over every allowed region with each replica charged its RTT, once over the home region
//! alone. The request leaves home only when the first evaluation picks a remote replica
//! and [`judge`] agrees the margin is met, or when home has no eligible replica.

use crate::cluster::ReplicaSnapshot;
use crate::policy::request::RouteRequest;
use crate::region::{RegionMode, RegionNote, Regions, SpillReason};
use warmpath_core::ids::RegionId;

/// The regions to weigh for `req` over `replicas`: `Some` in `spill` mode when any
/// eligible replica is outside the home region.
pub(super) fn regions_to_weigh<'a>(
    req: &RouteRequest<'a>,
    replicas: &[&ReplicaSnapshot],
) -> Option<&'a Regions> {
    req.regions
        .filter(|g| g.mode == RegionMode::Spill && replicas.iter().any(|r| !g.is_local(r)))
}

/// One side's best candidate, as the spill rule compares them.
#[derive(Clone, Debug)]
pub(super) struct Pick {
    /// Predicted TTFT at the replica, without the round trip.
    pub(super) ttft_ms: f64,
    /// Round trip from the gateway's region.
    pub(super) rtt_ms: f64,
    /// Prefix blocks it holds.
    pub(super) matched: u32,
    /// Its region.
    pub(super) region: Option<RegionId>,
}

impl Pick {
    fn seen_ms(&self) -> f64 {
        self.ttft_ms + self.rtt_ms
    }
}

/// Decides whether to leave home. `remote` is the remote replica the all-region
/// evaluation would use (`may_spill`: it chose it) or else the best remote for the record.
pub(super) fn judge(
    g: &Regions,
    local: Option<&Pick>,
    remote: Option<&Pick>,
    may_spill: bool,
) -> RegionNote {
    let mut note = RegionNote {
        home: g.home.clone(),
        spilled_to: None,
        reason: None,
        local_ttft_ms: local.map_or(f64::INFINITY, |l| l.ttft_ms),
        remote_ttft_ms: remote.map_or(f64::INFINITY, Pick::seen_ms),
        rtt_ms: remote.map_or(0.0, |r| r.rtt_ms),
    };
    let Some(r) = remote else {
        return note;
    };
    let reason = match local {
        None => Some(SpillReason::NoLocalReplica),
        Some(l) if may_spill && r.seen_ms() + g.spill_margin_ms < l.ttft_ms => {
            Some(if r.matched > l.matched {
                SpillReason::WarmerPrefix
            } else {
                SpillReason::Overloaded
            })
        }
        Some(_) => None,
    };
    if reason.is_some() {
        note.spilled_to = r.region.clone();
        note.reason = reason;
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(ttft: f64, rtt: f64, matched: u32, region: &str) -> Pick {
        Pick {
            ttft_ms: ttft,
            rtt_ms: rtt,
            matched,
            region: Some(RegionId::new(region)),
        }
    }

    #[test]
    fn the_margin_decides_and_the_reason_follows_the_prefix() {
        let g = Regions::new(RegionId::new("eu"), RegionMode::Spill);
        let local = pick(500.0, 0.0, 4, "eu");
        // 300 + 70 + 50 (margin) < 500: spill, same prefix depth → overloaded.
        let n = judge(&g, Some(&local), Some(&pick(300.0, 70.0, 4, "us")), true);
        assert_eq!(n.spilled_to, Some(RegionId::new("us")));
        assert_eq!(n.reason, Some(SpillReason::Overloaded));
        // 390 + 70 + 50 = 510 > 500: stays.
        let n = judge(&g, Some(&local), Some(&pick(390.0, 70.0, 4, "us")), true);
        assert_eq!(n.spilled_to, None);
        assert_eq!(n.remote_ttft_ms, 460.0);
        // A deeper remote prefix.
        let n = judge(&g, Some(&local), Some(&pick(100.0, 140.0, 9, "ap")), true);
        assert_eq!(n.reason, Some(SpillReason::WarmerPrefix));
        // The all-region evaluation kept it local: no spill whatever the numbers.
        let n = judge(&g, Some(&local), Some(&pick(10.0, 70.0, 9, "us")), false);
        assert_eq!(n.spilled_to, None);
        // Nobody at home.
        let n = judge(&g, None, Some(&pick(900.0, 140.0, 0, "ap")), false);
        assert_eq!(n.reason, Some(SpillReason::NoLocalReplica));
        assert!(n.local_ttft_ms.is_infinite());
    }
}
