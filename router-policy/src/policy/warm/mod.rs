//! `warm` (the default): route by predicted time to first token, charging recompute.
//!
//! For each eligible replica r, with rate = its measured prefill tokens/s (or the default):
//!
//! ```text
//! queue_ms(r)     = max(aged_report_ms(r), backlog_ms(r))     if this policy routed to r
//!                 = aged_report_ms(r) + unreported_requests * avg_request_tokens / rate  otherwise
//! aged_report_ms  = max(queued_prefill_tokens / rate - ms since this report was first seen, 0)
//! fetch_ms(r)     = tier_lookup_ms + fetched(r) / tier_rate * 1000   if fetched(r) > 0, else 0
//!                   fetched(r) = tokens of the tier_blocks(r) blocks after r's own match
//!                   tier_rate  = r's measured tier_tokens_per_s, else default_tier_tokens_per_s
//! prefill_ms(r)   = uncached(r) / rate,  uncached(r) = prompt_tokens - min((matched_blocks +
//!                   tier_blocks) * B, prompt_tokens)
//! kv_ms(r)        = 0                                   if k <= kv_pressure_threshold
//!                 = kv_pressure_weight_ms * (k - thr) / max(1 - k, 0.01)   otherwise
//!                   where k = (pinned + blocks this prompt adds) / kv_capacity and
//!                   pinned = kv_used_blocks - blocks the index says r caches
//! recompute_ms(r) = recompute_weight * x * (uncached(r) - min over replicas of uncached) / rate
//!                   x = 2 if storing those blocks would fill r's cache, else 1
//! adapter_ms(r)   = adapter_load_ms   if the request names a LoRA adapter r has not loaded
//!                                     (`ReplicaSnapshot::adapter`), else 0
//! cost_ms(r)      = queue_ms + fetch_ms + prefill_ms + kv_ms + adapter_ms + recompute_ms
//! ```
//! `queue_ms + fetch_ms + prefill_ms + kv_ms + adapter_ms` is the request's predicted TTFT.
//! An adapter's prefixes are hashed in its own namespace, so a replica warm for the base
//! model predicts no hit for it; with nobody holding the adapter's prefix, `adapter_ms`
//! sends the request where the adapter is loaded rather than to an equally idle replica that
//! would load it (and evict another adapter) first.
//! - `tier_blocks(r)` ([`PrefixMatches::tier_blocks`]): the consecutive blocks after r's own
//!   match that the shared KV tier holds. A replica fetches them before its prefill (the
//!   replica's HTTP side loads them, so they are not queued engine work), which lets an idle
//!   non-holder beat a busy holder when the tier is fast enough.
//!   A replica's own offload tier (vLLM's CPU or disk `medium`:
//!   [`PrefixMatches::offload_blocks`]) counts the same way: `tier_blocks(r)` is the larger
//!   of the shared run and r's offload run, fetched at the same rate.
//! - `backlog_ms(r)`: the prefill work this policy sent to r, drained at r's rate since it
//!   was sent. Between load reports it tells a replica that just received a long cold prompt
//!   from one whose prompt is almost done, which a request count cannot.
//! - A load report is up to one report period old: its queued tokens are aged at the prefill
//!   rate from the moment this policy first saw them (the replica kept working since).
//! - `unreported_requests` ([`ReplicaSnapshot::unreported_requests`]) at `avg_request_tokens`
//!   (an average of the uncached tokens this policy routed) stand in for the backlog when
//!   this policy has none for r (say, just after a restart).
//! - The KV barrier counts only blocks that cannot be evicted: cached blocks (as the prefix
//!   index knows them) are reclaimable, so a full cache of old prefixes is no pressure.
//! - `recompute_ms` charges a replica for the prefix tokens it would compute again: prefill
//!   work that later requests queue behind and a duplicate of the prefix in the cluster's
//!   cache; twice when storing the duplicate evicts as many blocks of other prefixes.
//!
//! Branches, in order:
//! 1. **cold_home** (nobody holds the first block) / **least_loaded** (no full block): the
//!    lowest cost, so a cold prompt goes where the least prefill work is queued. Candidates
//!    within `cold_tie_tolerance_ms` rank by: idle for at least a settle time (whose last
//!    routed work should have ended a while ago: the drain estimate ignores step overheads),
//!    then room in the cache for the prompt (storing it evicts nothing), then the rendezvous
//!    rank of the prefix's first `home_prefix_blocks` blocks, so gateways that share no state
//!    agree on an idle cluster.
//! 2. **cache_hit** / **lowest_cost**: the lowest cost wins; candidates within
//!    `tie_tolerance_ms` of it count as tied and holders win ties (then the lower cost), so
//!    a holder with a short queue keeps its prefix's traffic rather than duplicating it on an
//!    idle replica for a marginal gain. `lowest_cost` when the winner holds none of the prompt.
//! 3. **spread_hot_prefix**: if that winner is a holder whose queue wait exceeds another
//!    replica's by more than both `spread_queue_gap_ms` and `spread_prefill_multiple` x the
//!    prefix's own prefill time, send the request to a clearly less queued second holder, or
//!    else to the prefix's next rendezvous home among non-holders whose cache has room for
//!    the prefix (usage including cached blocks stays under `kv_pressure_threshold`: copying
//!    a prefix into a full cache evicts others), unless that would cost more than
//!    `spread_max_slowdown` x the winner's TTFT. Every gateway picks the same target.
//!
//! [`ReplicaSnapshot::unreported_requests`]: crate::cluster::ReplicaSnapshot::unreported_requests
//! [`PrefixMatches::tier_blocks`]: crate::index::PrefixMatches::tier_blocks
//! [`PrefixMatches::offload_blocks`]: crate::index::PrefixMatches::offload_blocks

mod config;
mod cost;
mod spill;
mod state;

pub use config::WarmConfig;

use super::common::{decide, mix64, prefix_key, rendezvous_score, Eligible};
use crate::cluster::{AdapterState, ClusterView, ReplicaSnapshot, INLINE_REPLICAS};
use crate::decision::{Branch, CandidateScore, Decision, Terms};
use crate::error::RouteError;
use crate::index::PrefixIndex;
use crate::policy::request::{Policy, RouteRequest};
use crate::region::{RegionNote, Regions};
use cost::{measured_rate, Cost, Held};
use smallvec::SmallVec;
use state::Tracker;
use warmpath_core::ids::ReplicaId;

/// Weight of the newest sample in the average uncached tokens per request.
const EWMA_ALPHA: f64 = 0.1;

/// The predicted-TTFT policy.
#[derive(Debug)]
pub struct Warm {
    cfg: WarmConfig,
    avg_request_tokens: f64,
    /// Per-replica memory: work sent, age of the current load report.
    tracker: Tracker,
}

impl Warm {
    /// A policy with no history.
    pub fn new(cfg: WarmConfig) -> Self {
        let avg_request_tokens = cfg.initial_request_tokens;
        Self {
            cfg,
            avg_request_tokens,
            tracker: Tracker::default(),
        }
    }

    /// The current estimate of uncached tokens per request.
    pub fn avg_request_tokens(&self) -> f64 {
        self.avg_request_tokens
    }

    /// True when storing `blocks` more in `r`'s cache would take its usage (cached blocks
    /// included) above `kv_pressure_threshold`, i.e. would evict other prefixes.
    fn cache_full(&self, r: &ReplicaSnapshot, blocks: u64) -> bool {
        r.kv_capacity_blocks > 0
            && (r.kv_used_blocks + blocks) as f64
                > self.cfg.kv_pressure_threshold * r.kv_capacity_blocks as f64
    }
}

/// One evaluation of a set of candidates: the rule that fired, the chosen index, and every
/// candidate's score and cost parts.
struct Eval {
    branch: Branch,
    chosen: usize,
    candidates: Vec<CandidateScore>,
    costs: SmallVec<[Cost; INLINE_REPLICAS]>,
}

impl Policy for Warm {
    fn name(&self) -> &'static str {
        "warm"
    }

    fn select(
        &mut self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
        index: &PrefixIndex,
    ) -> Result<Decision, RouteError> {
        let el = Eligible::gather_regional(req, view, index, true)?;
        let (ev, chosen_id, region) = match spill::regions_to_weigh(req, &el.replicas) {
            None => {
                let ev = self.evaluate(req, &el, index, None);
                let id = el.replicas[ev.chosen].id;
                (ev, id, None)
            }
            Some(g) => self.weigh_regions(req, &el, index, g),
        };
        let sample = f64::from(ev.costs[ev.chosen].uncached);
        self.avg_request_tokens += EWMA_ALPHA * (sample - self.avg_request_tokens);
        let ms = sample / ev.costs[ev.chosen].tokens_per_ms;
        self.tracker.charge(chosen_id, req.now.0, ms);
        let mut d = decide(self.name(), ev.branch, ev.chosen, ev.candidates);
        d.explanation.region = region;
        d.charged_ms = ms;
        Ok(d)
    }

    fn withdraw(&mut self, decision: &Decision, now: warmpath_core::Millis) {
        self.tracker
            .withdraw(decision.replica, now.0, decision.charged_ms);
    }
}

impl Warm {
    /// Scores `el`'s replicas and applies the branches; `regions` charges each one the round
    /// trip from the gateway's region (an `rtt_ms` term in its cost).
    fn evaluate(
        &mut self,
        req: &RouteRequest<'_>,
        el: &Eligible<'_>,
        index: &PrefixIndex,
        regions: Option<&Regions>,
    ) -> Eval {
        let chain_len = req.hashes.len() as u32;
        let bs = u64::from(req.block_size.0.max(1));
        // A replica that has not measured its prefill rate yet (fresh, or never prefilled)
        // is costed at the mean rate its measured peers report, so an idle newcomer does not
        // look orders of magnitude faster than a warm holder; the configured default only
        // applies while nobody has measured.
        let (sum, n) = el
            .replicas
            .iter()
            .filter_map(|r| measured_rate(r))
            .fold((0.0, 0u32), |(s, n), x| (s + x, n + 1));
        let fallback_rate = if n > 0 {
            sum / f64::from(n)
        } else {
            self.cfg.default_prefill_tokens_per_s
        };
        // Measured rates within `rate_noise_ratio` of the peers' mean count as the mean.
        let peers = cost::PeerRates {
            fallback: fallback_rate,
            noise: (n > 1).then_some((fallback_rate, self.cfg.rate_noise_ratio)),
        };
        let mut costs: SmallVec<[Cost; INLINE_REPLICAS]> = SmallVec::new();
        for r in &el.replicas {
            let seen = self.tracker.observe(r, req.now.0);
            let local = el.matches.get(r.id).blocks().min(chain_len);
            let held = Held {
                local,
                // A replica's own offload tier is costed like the shared tier.
                tier: el
                    .matches
                    .tier_blocks(r.id)
                    .max(el.matches.offload_blocks(r.id))
                    .min(chain_len - local),
                cached: index.precise_blocks(r.id) as u64,
            };
            let mut c = cost::cost(
                &self.cfg,
                req,
                r,
                seen,
                held,
                peers,
                self.avg_request_tokens,
            );
            c.rtt_ms = regions.map_or(0.0, |g| g.rtt_to(r));
            costs.push(c);
        }
        let min_uncached = costs.iter().map(|c| c.uncached).min().unwrap_or(0);
        // The fetch terms are shown only when some replica could fetch from the tier.
        let tiered = el.matches.any_tier();
        let candidates: Vec<CandidateScore> = el
            .replicas
            .iter()
            .zip(&costs)
            .map(|(r, c)| {
                let extra = c.uncached - min_uncached;
                // Storing the duplicate in a full cache evicts as many blocks of other
                // prefixes, which someone computes again later: charged twice.
                let evicts = self.cache_full(r, u64::from(extra).div_ceil(bs));
                let weight = self.cfg.recompute_weight * if evicts { 2.0 } else { 1.0 };
                let recompute_ms = weight * f64::from(extra) / c.tokens_per_ms;
                let mut terms = Terms::new()
                    .with("queue_ms", c.queue_ms)
                    .with("prefill_ms", c.prefill_ms)
                    .with("kv_pressure_ms", c.kv_ms)
                    .with("recompute_ms", recompute_ms);
                if tiered {
                    terms = terms
                        .with("fetch_ms", c.fetch_ms)
                        .with("tier_blocks", f64::from(c.tier_blocks));
                }
                if regions.is_some() {
                    terms = terms.with("rtt_ms", c.rtt_ms);
                }
                if r.adapter != AdapterState::NotRequested {
                    terms = terms.with("adapter_load_ms", c.adapter_ms);
                }
                el.score(req, r, c.ttft() + c.rtt_ms + recompute_ms, terms)
            })
            .collect();
        let any_holder = candidates.iter().any(|c| c.matched_blocks > 0);
        let (branch, chosen) = if !any_holder {
            let branch = if req.hashes.is_empty() {
                Branch::LeastLoaded
            } else {
                Branch::ColdHome
            };
            let ch = self.cold_choice(req, el, &candidates, &costs);
            (branch, ch)
        } else {
            let best = self.warm_choice(&candidates);
            if candidates[best].matched_blocks == 0 {
                (Branch::LowestCost, best)
            } else if let Some(t) = self.spread_target(req, el, &candidates, &costs, best) {
                (Branch::SpreadHotPrefix, t)
            } else {
                (Branch::CacheHit, best)
            }
        };
        Eval {
            branch,
            chosen,
            candidates,
            costs,
        }
    }
}

impl Warm {
    /// `spill` mode with replicas in more than one region: the all-region evaluation (RTTs
    /// charged) against the home region's; [`spill::judge`] decides. Returns the evaluation
    /// to use, the chosen replica and the regional note.
    fn weigh_regions(
        &mut self,
        req: &RouteRequest<'_>,
        el: &Eligible<'_>,
        index: &PrefixIndex,
        g: &Regions,
    ) -> (Eval, ReplicaId, Option<RegionNote>) {
        let all = self.evaluate(req, el, index, Some(g));
        let local_el = Eligible {
            replicas: el
                .replicas
                .iter()
                .copied()
                .filter(|r| g.is_local(r))
                .collect(),
            matches: el.matches.clone(),
        };
        let local =
            (!local_el.replicas.is_empty()).then(|| self.evaluate(req, &local_el, index, None));
        let pick = |ev: &Eval, reps: &[&ReplicaSnapshot], i: usize| spill::Pick {
            ttft_ms: ev.costs[i].ttft(),
            rtt_ms: ev.costs[i].rtt_ms,
            matched: ev.candidates[i].matched_blocks,
            region: reps[i].region.clone(),
        };
        let remote_chosen = !g.is_local(el.replicas[all.chosen]);
        let remote_idx = if remote_chosen {
            Some(all.chosen)
        } else {
            (0..el.replicas.len())
                .filter(|&i| !g.is_local(el.replicas[i]))
                .min_by(|&a, &b| {
                    let (ca, cb) = (&all.costs[a], &all.costs[b]);
                    (ca.ttft() + ca.rtt_ms).total_cmp(&(cb.ttft() + cb.rtt_ms))
                })
        };
        let local_pick = local
            .as_ref()
            .map(|l| pick(l, &local_el.replicas, l.chosen));
        let remote_pick = remote_idx.map(|i| pick(&all, &el.replicas, i));
        let note = spill::judge(g, local_pick.as_ref(), remote_pick.as_ref(), remote_chosen);
        match local {
            Some(l) if note.spilled_to.is_none() => {
                let id = local_el.replicas[l.chosen].id;
                (l, id, Some(note))
            }
            _ => {
                let id = el.replicas[all.chosen].id;
                (all, id, Some(note))
            }
        }
    }
}

impl Warm {
    /// Nobody holds the prefix: the lowest cost. Near-ties (within `cold_tie_tolerance_ms`)
    /// go to a replica idle past the settle time, then one with room in its cache for the
    /// prompt, then the best rendezvous rank of the prefix's home key (gateways agree).
    fn cold_choice(
        &self,
        req: &RouteRequest<'_>,
        el: &Eligible<'_>,
        candidates: &[CandidateScore],
        costs: &[Cost],
    ) -> usize {
        let min = min_cost(candidates);
        let key = mix64(prefix_key(req.hashes, self.cfg.home_prefix_blocks));
        let blocks = u64::from(req.prompt_tokens).div_ceil(u64::from(req.block_size.0.max(1)));
        let rank = |i: usize| {
            let r = candidates[i].replica;
            (
                costs[i].settled_ms,
                !self.cache_full(el.replicas[i], blocks),
                rendezvous_score(key, r),
            )
        };
        (0..candidates.len())
            .filter(|&i| candidates[i].cost_ms <= min + self.cfg.cold_tie_tolerance_ms)
            .max_by(|&a, &b| {
                let (ka, kb) = (rank(a), rank(b));
                ka.0.total_cmp(&kb.0)
                    .then(ka.1.cmp(&kb.1))
                    .then(ka.2.cmp(&kb.2))
            })
            .unwrap_or(0)
    }

    /// Someone holds the prefix: the lowest cost; within `tie_tolerance_ms` of it holders
    /// win, then the lower cost, then the lower id.
    fn warm_choice(&self, candidates: &[CandidateScore]) -> usize {
        let min = min_cost(candidates);
        (0..candidates.len())
            .filter(|&i| candidates[i].cost_ms <= min + self.cfg.tie_tolerance_ms)
            .min_by(|&a, &b| {
                let (ca, cb) = (&candidates[a], &candidates[b]);
                (cb.matched_blocks > 0)
                    .cmp(&(ca.matched_blocks > 0))
                    .then(ca.cost_ms.total_cmp(&cb.cost_ms))
                    .then(a.cmp(&b))
            })
            .unwrap_or(0)
    }

    /// The replica to warm when `best` (a holder) is overloaded, if copying the prefix is
    /// worth it and the target's cache has room for it.
    fn spread_target(
        &self,
        req: &RouteRequest<'_>,
        el: &Eligible<'_>,
        candidates: &[CandidateScore],
        costs: &[Cost],
        best: usize,
    ) -> Option<usize> {
        let n = candidates.len();
        let held = candidates[best].matched_blocks;
        let bs = u64::from(req.block_size.0.max(1));
        let prefix_tokens = (u64::from(held) * bs).min(u64::from(req.prompt_tokens));
        let prefix_ms = prefix_tokens as f64 / costs[best].tokens_per_ms;
        let gap = self
            .cfg
            .spread_queue_gap_ms
            .max(self.cfg.spread_prefill_multiple * prefix_ms);
        let relieved = |i: usize| i != best && costs[i].queue_ms + gap < costs[best].queue_ms;
        if !(0..n).any(relieved) {
            return None;
        }
        // A second holder that is clearly less queued, cheapest first.
        let second_holder = (0..n)
            .filter(|&i| candidates[i].matched_blocks > 0 && relieved(i))
            .min_by(|&a, &b| candidates[a].cost_ms.total_cmp(&candidates[b].cost_ms));
        let target = second_holder.or_else(|| {
            // Otherwise the prefix's next home among non-holders with room in their cache:
            // the same one on every gateway.
            let key = mix64(prefix_key(req.hashes, self.cfg.home_prefix_blocks));
            let room = |i: usize| !self.cache_full(el.replicas[i], u64::from(held));
            (0..n)
                .filter(|&i| candidates[i].matched_blocks == 0 && relieved(i) && room(i))
                .max_by_key(|&i| rendezvous_score(key, candidates[i].replica))
        })?;
        (costs[target].ttft() <= self.cfg.spread_max_slowdown * costs[best].ttft())
            .then_some(target)
    }
}

/// The lowest cost among `candidates` (infinity when empty).
fn min_cost(candidates: &[CandidateScore]) -> f64 {
    candidates
        .iter()
        .map(|c| c.cost_ms)
        .fold(f64::INFINITY, f64::min)
}
