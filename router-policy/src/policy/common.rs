//! Helpers shared by the policies: eligibility, candidate scoring, rendezvous hashing,
//! bounded load and the fallback order.

use super::request::RouteRequest;
use crate::cluster::{ClusterView, ReplicaSnapshot, INLINE_REPLICAS};
use crate::decision::{Branch, CandidateScore, Decision, Explanation, Terms};
use crate::error::RouteError;
use crate::index::{PrefixIndex, PrefixMatches};
use crate::region::resident;
use smallvec::SmallVec;
use warmpath_core::ids::{BlockHash, ReplicaId};

/// Most retry targets a decision lists.
pub const MAX_FALLBACKS: usize = 4;

/// The eligible replicas (healthy, same checkpoint) sorted by id, and their prefix matches.
pub(crate) struct Eligible<'v> {
    pub(crate) replicas: crate::cluster::Replicas<'v>,
    pub(crate) matches: PrefixMatches,
}

impl<'v> Eligible<'v> {
    /// The replicas a policy that does not compare RTTs may score: residency applied, and
    /// narrowed to one region unless the gateway's region mode is `global`.
    pub(crate) fn gather(
        req: &RouteRequest<'_>,
        view: &'v ClusterView,
        index: &PrefixIndex,
    ) -> Result<Self, RouteError> {
        Self::gather_regional(req, view, index, false)
    }

    /// [`Eligible::gather`] for a policy that charges RTTs itself (`compares_rtt`): in
    /// `spill` mode it sees every region the tenant's residency allows.
    pub(crate) fn gather_regional(
        req: &RouteRequest<'_>,
        view: &'v ClusterView,
        index: &PrefixIndex,
        compares_rtt: bool,
    ) -> Result<Self, RouteError> {
        let mut replicas = view.eligible(req.checkpoint);
        if !req.residency.is_empty() {
            replicas.retain(|r| resident(req.residency, r));
        }
        if let Some(regions) = req.regions {
            regions.narrow(&mut replicas, compares_rtt);
        }
        if replicas.is_empty() {
            return Err(RouteError::NoEligibleReplica {
                checkpoint: req.checkpoint.clone(),
                known: view.replicas.len(),
            });
        }
        let matches = index.match_prefix(req.hashes, req.now);
        Ok(Self { replicas, matches })
    }

    /// A candidate score for replica `r` with the given cost and terms; matched blocks are
    /// capped at the request's chain length.
    pub(crate) fn score(
        &self,
        req: &RouteRequest<'_>,
        r: &ReplicaSnapshot,
        cost: f64,
        terms: Terms,
    ) -> CandidateScore {
        let m = self.matches.get(r.id);
        CandidateScore {
            replica: r.id,
            matched_blocks: m.blocks().min(req.hashes.len() as u32),
            precise: m.is_precise(),
            cost_ms: cost,
            terms,
        }
    }
}

/// Builds the decision for `chosen` (an index into `candidates`).
pub(crate) fn decide(
    policy: &'static str,
    branch: Branch,
    chosen: usize,
    candidates: Vec<CandidateScore>,
) -> Decision {
    let replica = candidates[chosen].replica;
    let predicted_cached_blocks = candidates[chosen].matched_blocks;
    let fallbacks = fallback_order(replica, &candidates);
    Decision {
        replica,
        fallbacks,
        predicted_cached_blocks,
        charged_ms: 0.0,
        explanation: Explanation {
            policy,
            branch,
            candidates,
            region: None,
            prefill: None,
        },
    }
}

/// Retry order: cache holders by deepest match first, then everyone else; ties by cost,
/// then id. At most [`MAX_FALLBACKS`], never the chosen replica.
pub(crate) fn fallback_order(chosen: ReplicaId, candidates: &[CandidateScore]) -> Vec<ReplicaId> {
    let mut rest: SmallVec<[&CandidateScore; INLINE_REPLICAS]> =
        candidates.iter().filter(|c| c.replica != chosen).collect();
    rest.sort_by(|a, b| {
        b.matched_blocks
            .cmp(&a.matched_blocks)
            .then(a.cost_ms.total_cmp(&b.cost_ms))
            .then(a.replica.cmp(&b.replica))
    });
    rest.into_iter()
        .take(MAX_FALLBACKS)
        .map(|c| c.replica)
        .collect()
}

pub(crate) use warmpath_core::rng::mix64;

/// Rendezvous (highest random weight) score of `replica` for `key`. Depends only on its
/// inputs, so gateways that share no state rank replicas identically.
#[inline]
pub fn rendezvous_score(key: u64, replica: ReplicaId) -> u64 {
    mix64(key ^ mix64(u64::from(replica.0).wrapping_add(0x9E37_79B9_7F4A_7C15)))
}

/// Key of a prefix: the chained hash of block `min(k, len) - 1` (it covers every block
/// before it); 0 for an empty chain.
pub(crate) fn prefix_key(hashes: &[BlockHash], k: u32) -> u64 {
    let n = hashes.len().min(k.max(1) as usize);
    if n == 0 {
        0
    } else {
        hashes[n - 1].0
    }
}

/// Indices of `replicas` in rendezvous order for `key` (best first).
pub(crate) fn rendezvous_order(key: u64, replicas: &[&ReplicaSnapshot]) -> Vec<usize> {
    let mut order: Vec<(u64, usize)> = replicas
        .iter()
        .enumerate()
        .map(|(i, r)| (rendezvous_score(key, r.id), i))
        .collect();
    order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    order.into_iter().map(|(_, i)| i).collect()
}

/// Bounded-load capacity: the most outstanding requests one replica may have after taking
/// one more request, `ceil((1 + eps) * (total + 1) / n)`.
pub(crate) fn load_cap(total_load: u64, n: usize, eps: f64) -> u64 {
    let avg = (total_load + 1) as f64 / n.max(1) as f64;
    ((1.0 + eps) * avg).ceil() as u64
}

/// First replica in rendezvous order for `key`, among those `allowed`, whose load stays
/// within the bounded-load cap; the least loaded allowed one if none does. `None` when
/// nothing is allowed. Returns (index, was it the first allowed choice).
pub(crate) fn bounded_home(
    key: u64,
    replicas: &[&ReplicaSnapshot],
    eps: f64,
    allowed: impl Fn(usize) -> bool,
) -> Option<(usize, bool)> {
    let total: u64 = replicas.iter().map(|r| u64::from(r.load())).sum();
    let cap = load_cap(total, replicas.len(), eps);
    let mut first = true;
    for i in rendezvous_order(key, replicas) {
        if !allowed(i) {
            continue;
        }
        if u64::from(replicas[i].load()) < cap {
            return Some((i, first));
        }
        first = false;
    }
    (0..replicas.len())
        .filter(|&i| allowed(i))
        .min_by_key(|&i| (replicas[i].load(), replicas[i].id))
        .map(|i| (i, false))
}

/// Index of the least loaded replica, ties to the lowest id.
pub(crate) fn least_loaded(replicas: &[&ReplicaSnapshot]) -> usize {
    (0..replicas.len())
        .min_by_key(|&i| (replicas[i].load(), replicas[i].id))
        .unwrap_or(0)
}

/// Load terms shared by the load-only policies.
pub(crate) fn load_terms(r: &ReplicaSnapshot) -> Terms {
    Terms::new()
        .with("load", f64::from(r.load()))
        .with("kv_usage", r.kv_usage())
}

#[cfg(test)]
mod tests {
    use super::*;
    use warmpath_core::ids::CheckpointId;
    use warmpath_core::rng::{Draw, SeedableRng, SplitMix64};

    #[test]
    fn load_cap_admits_someone() {
        for n in 1..20usize {
            for total in 0..200u64 {
                let cap = load_cap(total, n, 0.1);
                // The least loaded replica has at most floor(total / n) < cap.
                assert!(total / (n as u64) < cap, "n={n} total={total} cap={cap}");
            }
        }
    }

    #[test]
    fn rendezvous_is_stable_and_spreads() {
        let ck = CheckpointId::new("m");
        let reps: Vec<ReplicaSnapshot> = (0..8)
            .map(|i| ReplicaSnapshot::idle(ReplicaId(i), ck.clone()))
            .collect();
        let refs: Vec<&ReplicaSnapshot> = reps.iter().collect();
        let mut firsts = [0u32; 8];
        for key in 0..8000u64 {
            let o = rendezvous_order(mix64(key), &refs);
            assert_eq!(o, rendezvous_order(mix64(key), &refs));
            firsts[o[0]] += 1;
        }
        // Each replica is home for about 1/8 of keys.
        assert!(
            firsts.iter().all(|&c| (800..1200).contains(&c)),
            "{firsts:?}"
        );
        // Removing a replica moves only its own keys.
        let fewer: Vec<&ReplicaSnapshot> = refs[..7].to_vec();
        for key in 0..2000u64 {
            let a = rendezvous_order(mix64(key), &refs)[0];
            if a < 7 {
                assert_eq!(rendezvous_order(mix64(key), &fewer)[0], a);
            }
        }
    }

    #[test]
    fn rng_below_is_in_range_and_covers() {
        let mut rng = SplitMix64::seed_from_u64(3);
        let mut seen = [false; 5];
        for _ in 0..200 {
            let v = rng.below(5) as usize;
            assert!(v < 5);
            seen[v] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
