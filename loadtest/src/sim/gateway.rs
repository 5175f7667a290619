//! The routing side of a simulated run: the gateways, each with its own prefix index and,
//! in a regional run, its own policy instance, view of the cluster (its own in-flight
//! counts) and home region. Plain `--gateways N` runs share one policy and one view, as
//! before regions existed, so their results are unchanged.

use super::config::{RegionIx, SimConfig};
use super::events::Deliver;
use router_policy::cluster::{ClusterView, ReplicaSnapshot};
use router_policy::index::PrefixIndex;
use router_policy::policy::{Policy, RouteRequest};
use router_policy::DisaggConfig;
use router_policy::{Decision, PolicyConfig, Regions, RouteError};
use warmpath_core::{
    BlockHash, BlockSize, CheckpointId, KvStreamMessage, Millis, RegionId, ReplicaId,
};

/// One gateway.
pub(super) struct Gateway {
    /// Its prefix index.
    pub(super) index: PrefixIndex,
    /// Its home region and regional context (regional runs).
    pub(super) home: Option<(RegionIx, Regions)>,
    policy: usize,
    view: usize,
}

/// The gateways, their policies and their views.
pub(super) struct Router {
    pub(super) gateways: Vec<Gateway>,
    policies: Vec<Box<dyn Policy>>,
    views: Vec<ClusterView>,
    /// Per replica: the deliveries of its KV events and their delays, ms.
    kv_routes: Vec<Vec<(Deliver, f64)>>,
    /// Per replica: its region (regional runs).
    pub(super) replica_region: Vec<Option<RegionIx>>,
    /// When a role-split pool splits a request.
    disagg: DisaggConfig,
}

/// One request as the event loop hands it to a gateway.
pub(super) struct Ask<'a> {
    pub(super) checkpoint: &'a CheckpointId,
    pub(super) hashes: &'a [BlockHash],
    pub(super) prompt_tokens: u32,
    pub(super) block_size: BlockSize,
    pub(super) now_ms: f64,
}

impl Router {
    /// Builds the gateways for `cfg` over `checkpoints[i]` per replica, with policies from
    /// `pc` (validated by the caller).
    pub(super) fn new(cfg: &SimConfig, pc: &PolicyConfig, checkpoints: &[CheckpointId]) -> Self {
        let n = checkpoints.len();
        let replica_region: Vec<Option<RegionIx>> = (0..n)
            .map(|i| cfg.regions.as_ref().map(|g| g.replica_region(i, n)))
            .collect();
        let label = |i: usize| -> Option<RegionId> {
            let (g, ix) = (cfg.regions.as_ref()?, replica_region[i]?);
            Some(g.names[ix.get()].clone())
        };
        let view = ClusterView::new(
            (0..n)
                .map(|i| ReplicaSnapshot {
                    kv_capacity_blocks: cfg.profile.kv_capacity_blocks,
                    prefill_tokens_per_s: cfg.profile.prefill_tokens_per_s,
                    tier_tokens_per_s: cfg.tier.map_or(0.0, |t| t.tokens_per_s),
                    region: label(i),
                    role: cfg.disagg.as_ref().map(|d| d.role(i)).unwrap_or_default(),
                    ..ReplicaSnapshot::idle(ReplicaId(i as u32), checkpoints[i].clone())
                })
                .collect(),
        );
        let delay = cfg.kv_event_delay_ms;
        let (gateways, policies, views, kv_routes) = match &cfg.regions {
            None => {
                let k = cfg.fleet.gateways.max(1) as usize;
                let gateways = (0..k)
                    .map(|_| Gateway {
                        index: PrefixIndex::new(cfg.index.clone()),
                        home: None,
                        policy: 0,
                        view: 0,
                    })
                    .collect();
                let routes = vec![vec![(Deliver::All, delay)]; n];
                (gateways, vec![pc.build()], vec![view], routes)
            }
            Some(g) => {
                let k = g.names.len();
                let gateways: Vec<Gateway> = (0..k)
                    .map(|h| {
                        let home = RegionIx(h as u16);
                        Gateway {
                            index: PrefixIndex::new(cfg.index.clone()),
                            home: Some((home, g.gateway_regions(home))),
                            policy: h,
                            view: h,
                        }
                    })
                    .collect();
                // KV events cross the round trip's one way to a remote gateway.
                let routes = (0..n)
                    .map(|i| {
                        let at = replica_region[i].unwrap_or_default();
                        (0..k)
                            .map(|h| {
                                let one_way = g.rtt_ms(RegionIx(h as u16), at) / 2.0;
                                (Deliver::One(h), delay + one_way)
                            })
                            .collect()
                    })
                    .collect();
                let policies = (0..k).map(|_| pc.build()).collect();
                (gateways, policies, vec![view; k], routes)
            }
        };
        Self {
            gateways,
            policies,
            views,
            kv_routes,
            replica_region,
            disagg: cfg
                .disagg
                .as_ref()
                .map(|d| d.config.clone())
                .unwrap_or_default(),
        }
    }

    /// Asks gateway `g` for a replica (in a role-split pool: the decode replica, and the
    /// prefill replica in the explanation when it splits the request).
    pub(super) fn route(&mut self, g: usize, ask: &Ask<'_>) -> Result<Decision, RouteError> {
        let gw = &self.gateways[g];
        let req = RouteRequest {
            checkpoint: ask.checkpoint,
            hashes: ask.hashes,
            prompt_tokens: ask.prompt_tokens,
            block_size: ask.block_size,
            now: Millis(ask.now_ms as u64),
            regions: gw.home.as_ref().map(|(_, r)| r),
            residency: &[],
        };
        let policy = self.policies[gw.policy].as_mut();
        router_policy::disagg::select(policy, &self.disagg, &req, &self.views[gw.view], &gw.index)
    }

    /// The predicted TTFT of `ask` on the replica where it would start first, by gateway
    /// `g`'s view and index (`warm`'s queue and prefill terms: the reported prefill backlog
    /// and the uncached prompt at the replica's rate, `default_rate` tokens/s when it
    /// reports none), ms, with the prompt tokens that replica holds. Decides nothing.
    pub(super) fn predict_ttft(&self, g: usize, ask: &Ask<'_>, default_rate: f64) -> (f64, u32) {
        let gw = &self.gateways[g];
        let m = gw.index.match_prefix(ask.hashes, Millis(ask.now_ms as u64));
        let bs = ask.block_size.0;
        self.views[gw.view]
            .replicas
            .iter()
            .filter(|r| r.checkpoint == *ask.checkpoint)
            .map(|r| {
                let rate = if r.prefill_tokens_per_s > 0.0 {
                    r.prefill_tokens_per_s
                } else {
                    default_rate
                };
                let held = m.get(r.id);
                let blocks = held.precise_blocks.max(held.approx_blocks);
                let cached = (blocks * bs).min(ask.prompt_tokens.saturating_sub(1));
                let work = r.queued_prefill_tokens as f64 + f64::from(ask.prompt_tokens - cached);
                (work / rate.max(1.0) * 1000.0, cached)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or((f64::INFINITY, 0))
    }

    /// Gateway `g` sent a request to replica `ri` (its in-flight count rises).
    pub(super) fn sent(&mut self, g: usize, ri: usize) {
        let v = self.gateways[g].view;
        self.views[v].replicas[ri].in_flight += 1;
    }

    /// A request gateway `g` sent to replica `ri` finished.
    pub(super) fn finished(&mut self, g: usize, ri: usize) {
        let v = self.gateways[g].view;
        let snap = &mut self.views[v].replicas[ri];
        snap.in_flight = snap.in_flight.saturating_sub(1);
    }

    /// Where replica `ri`'s KV events go, and after how long.
    pub(super) fn kv_routes(&self, ri: usize) -> &[(Deliver, f64)] {
        &self.kv_routes[ri]
    }

    /// Applies a KV message from replica `r` to the indexes it is for.
    pub(super) fn apply_kv(&mut self, r: ReplicaId, msg: &KvStreamMessage, to: Deliver) {
        match to {
            Deliver::All => {
                for gw in &mut self.gateways {
                    gw.index.apply_message(r, msg);
                }
            }
            Deliver::One(g) => {
                self.gateways[g].index.apply_message(r, msg);
            }
        }
    }

    /// Copies replica `ri`'s load report into every view.
    pub(super) fn report(&mut self, ri: usize, load: (u32, u32, u64, u64)) {
        let (running, waiting, queued, used) = load;
        for view in &mut self.views {
            let snap = &mut view.replicas[ri];
            snap.running = running;
            snap.waiting = waiting;
            snap.queued_prefill_tokens = queued;
            snap.kv_used_blocks = used;
        }
    }

    /// Region of replica `ri` (regional runs).
    pub(super) fn region_of(&self, ri: usize) -> Option<RegionIx> {
        self.replica_region[ri]
    }

    /// Home region of gateway `g` (regional runs).
    pub(super) fn home_of(&self, g: usize) -> Option<RegionIx> {
        self.gateways[g].home.as_ref().map(|(h, _)| *h)
    }
}
