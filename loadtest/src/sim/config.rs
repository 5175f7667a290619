//! What one simulated run is made of: the cluster and its cost profile, the gateways in
//! front of it, and optionally regions (one gateway per region, RTTs, request origins), a
//! checkpoint rollout, or a prefill/decode role split.

use super::disagg::DisaggSim;
use super::profile::CostProfile;
use super::rollout::RolloutSim;
use super::tier::TierSim;
use router_policy::index::IndexConfig;
use router_policy::PrefillOrder;
use router_policy::{RegionMode, Regions, Rtt};
use warmpath_core::{CheckpointId, RegionId};

/// Simulation settings (everything except the workload and the policy).
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of replicas (in a rollout: on the old checkpoint).
    pub replicas: u32,
    /// Per-replica cost model and capacity.
    pub profile: CostProfile,
    /// Delay between a replica's KV change and the router applying it, ms.
    pub kv_event_delay_ms: f64,
    /// Period of load reports (a report is this old at worst), ms; 0 = always fresh.
    pub load_staleness_ms: f64,
    /// Checkpoint every replica serves (in a rollout: the old one).
    pub checkpoint: CheckpointId,
    /// Prefix index bounds.
    pub index: IndexConfig,
    /// Gateways in front of the replicas, each with its own prefix index.
    pub fleet: FleetSim,
    /// Regions: replicas split across them, one gateway per region (replaces `fleet`'s
    /// gateway count).
    pub regions: Option<RegionSim>,
    /// A checkpoint rollout during the run.
    pub rollout: Option<RolloutSim>,
    /// A role split (prefill/decode disaggregation).
    pub disagg: Option<DisaggSim>,
    /// A shared KV tier every replica writes to and loads from.
    pub tier: Option<TierSim>,
    /// The order every replica serves its prefills in (the replica's `--prefill-order`).
    pub prefill_order: PrefillOrder,
    /// The gateway's admission: tenants, classes, objectives, the in-flight cap and its
    /// queue (none: every request is routed on arrival).
    pub admission: Option<super::admission::AdmissionSim>,
}

/// A fleet of gateways in front of the simulated replicas. Requests reach the gateways in
/// turn (as a Service spreads many clients); each gateway routes with its own prefix index.
/// Without regions the gateways share one policy instance and one view of the load (the
/// in-flight counts of all of them); with regions each has its own.
#[derive(Clone, Debug)]
pub struct FleetSim {
    /// Number of gateways (1: a single gateway).
    pub gateways: u32,
    /// Whether replicas publish KV events (to every gateway). Without them each index
    /// holds only routing decisions (the approximate index, as for engines without events).
    pub kv_events: bool,
    /// Whether every gateway's routing decisions reach the other gateways' indexes (a shared
    /// routing history), after `history_delay_ms`.
    pub shared_history: bool,
    /// Delay of the shared history, ms.
    pub history_delay_ms: f64,
}

impl Default for FleetSim {
    fn default() -> Self {
        Self {
            gateways: 1,
            kv_events: true,
            shared_history: false,
            history_delay_ms: 5.0,
        }
    }
}

/// A region's position in [`RegionSim::names`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionIx(pub u16);

impl RegionIx {
    /// As an index.
    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

/// A multi-region cluster: replicas are split evenly across `names` (contiguous id ranges,
/// in order), each region has one gateway whose home it is, and every request is decided
/// by its origin region's gateway. A request served in another region pays the round trip
/// once on its TTFT (and end-to-end latency), not on its inter-token gaps.
#[derive(Clone, Debug)]
pub struct RegionSim {
    /// Region labels, in replica order.
    pub names: Vec<RegionId>,
    /// Round trips between regions (symmetric; a pair not listed costs `unknown_rtt_ms`).
    pub rtt: Vec<Rtt>,
    /// Round trip for a pair not listed, ms.
    pub unknown_rtt_ms: f64,
    /// How every gateway treats other regions.
    pub mode: RegionMode,
    /// `warm`'s spill margin, ms.
    pub spill_margin_ms: f64,
    /// Origin region of every request, in request order.
    pub origins: Vec<RegionIx>,
}

impl RegionSim {
    /// Region of replica `i` of `n`: the regions take contiguous, near-equal id ranges.
    pub fn replica_region(&self, i: usize, n: usize) -> RegionIx {
        let k = self.names.len().max(1);
        let ix = (i * k) / n.max(1);
        RegionIx(u16::try_from(ix.min(k - 1)).unwrap_or(u16::MAX))
    }

    /// The gateway context of region `home`.
    pub fn gateway_regions(&self, home: RegionIx) -> Regions {
        Regions {
            rtt: self.rtt.clone(),
            unknown_rtt_ms: self.unknown_rtt_ms,
            spill_margin_ms: self.spill_margin_ms,
            ..Regions::new(self.names[home.get()].clone(), self.mode)
        }
    }

    /// Round trip between two regions, ms.
    pub fn rtt_ms(&self, a: RegionIx, b: RegionIx) -> f64 {
        if a == b {
            return 0.0;
        }
        let (na, nb) = (&self.names[a.get()], &self.names[b.get()]);
        self.rtt
            .iter()
            .find(|r| (r.a == *na && r.b == *nb) || (r.a == *nb && r.b == *na))
            .map_or(self.unknown_rtt_ms, |r| r.ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions() -> RegionSim {
        let g = Regions::new(RegionId::new("eu"), RegionMode::Spill)
            .with_rtt("eu", "us", 70.0)
            .with_rtt("us", "ap", 140.0);
        RegionSim {
            names: ["eu", "us", "ap"].map(RegionId::new).to_vec(),
            rtt: g.rtt,
            unknown_rtt_ms: 250.0,
            mode: RegionMode::Local,
            spill_margin_ms: 50.0,
            origins: Vec::new(),
        }
    }

    #[test]
    fn replicas_split_evenly_and_rtts_are_symmetric() {
        let r = regions();
        let split: Vec<u16> = (0..7).map(|i| r.replica_region(i, 7).0).collect();
        assert_eq!(split, vec![0, 0, 0, 1, 1, 2, 2]);
        assert_eq!(r.rtt_ms(RegionIx(1), RegionIx(0)), 70.0);
        assert_eq!(r.rtt_ms(RegionIx(2), RegionIx(1)), 140.0);
        assert_eq!(r.rtt_ms(RegionIx(0), RegionIx(2)), 250.0, "unlisted pair");
        assert_eq!(r.rtt_ms(RegionIx(2), RegionIx(2)), 0.0);
        let g = r.gateway_regions(RegionIx(1));
        assert_eq!((g.home.as_str(), g.mode), ("us", RegionMode::Local));
        assert_eq!(
            g.rtt_between(&RegionId::new("us"), &RegionId::new("eu")),
            70.0
        );
    }
}
