//! Prefill/decode disaggregation: the two choices a role-split pool
//! makes for one request.
//!
//! A `prefill` replica computes prompts' KV and hands the pages to a `decode` replica,
//! which decodes as if it had prefilled. A `both` replica does everything (the default,
//! and the only role before disaggregation). [`select`] decides, for one request:
//!
//! 1. **The decode replica**: the running policy over the replicas that can decode
//!    (`decode` and `both`), so the one already holding the conversation, or the least
//!    loaded, takes it. The decode choice is the request's [`Decision`]: the gateway sends
//!    the request there and retries on its fallbacks.
//! 2. **Whether to split**: only when the prompt tokens the decode replica would still
//!    have to compute reach [`DisaggConfig::min_prompt_tokens`]. Short prompts, and turns
//!    whose history the decode replica holds, skip the transfer.
//! 3. **The prefill replica**: the running policy over the `prefill` replicas (cache and
//!    load), noted in [`Explanation::prefill`].
//!
//! A pool with no `prefill` replica routes exactly as before.

use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::error::RouteError;
use crate::index::PrefixIndex;
use crate::policy::{Policy, RouteRequest};
use serde::{Deserialize, Serialize};
use warmpath_core::ReplicaRole;

pub use crate::decision::PrefillNote;

/// When a role-split pool splits a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DisaggConfig {
    /// Split only when the decode replica would compute at least this many prompt tokens
    /// itself; shorter work is cheaper to prefill in place than to transfer.
    pub min_prompt_tokens: u32,
}

impl Default for DisaggConfig {
    fn default() -> Self {
        Self {
            min_prompt_tokens: 512,
        }
    }
}

/// The two choices for `req` (see the module doc). Without a `prefill` replica in
/// `view`, this is `policy.select` over the whole view.
pub fn select(
    policy: &mut dyn Policy,
    cfg: &DisaggConfig,
    req: &RouteRequest<'_>,
    view: &ClusterView,
    index: &PrefixIndex,
) -> Result<Decision, RouteError> {
    let eligible = |role: fn(ReplicaRole) -> bool| {
        view.replicas
            .iter()
            .filter(|r| role(r.role) && r.is_eligible_for(req.checkpoint))
            .count()
    };
    let split_pool = eligible(|r| r == ReplicaRole::Prefill) > 0;
    if !split_pool || eligible(ReplicaRole::decodes) == 0 {
        // No role split, or nobody left to decode: every replica serves co-located.
        return policy.select(req, view, index);
    }
    let decoders = ClusterView::new(
        view.replicas
            .iter()
            .filter(|r| r.role.decodes())
            .cloned()
            .collect(),
    );
    let mut decision = policy.select(req, &decoders, index)?;
    let cached = decision.predicted_cached_blocks * req.block_size.0;
    let uncached = req.prompt_tokens.saturating_sub(cached);
    if uncached < cfg.min_prompt_tokens {
        return Ok(decision);
    }
    let prefillers = ClusterView::new(
        view.replicas
            .iter()
            .filter(|r| r.role == ReplicaRole::Prefill)
            .cloned()
            .collect(),
    );
    let Ok(p) = policy.select(req, &prefillers, index) else {
        // Every prefill replica is ineligible (unhealthy, other region): prefill in place.
        return Ok(decision);
    };
    decision.explanation.prefill = Some(PrefillNote {
        replica: p.replica,
        predicted_cached_blocks: p.predicted_cached_blocks,
        uncached_tokens: uncached,
        branch: p.explanation.branch,
        candidates: p.explanation.candidates,
    });
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{Health, ReplicaSnapshot};
    use crate::policy::PolicyConfig;
    use warmpath_core::hash::{block_hashes, HashNamespace};
    use warmpath_core::ids::{BlockSize, CheckpointId, Millis, ReplicaId, TokenId};

    fn rep(id: u32, role: ReplicaRole, running: u32) -> ReplicaSnapshot {
        ReplicaSnapshot {
            role,
            running,
            ..ReplicaSnapshot::idle(ReplicaId(id), CheckpointId::new("m@1"))
        }
    }

    fn route(
        view: &ClusterView,
        index: &PrefixIndex,
        tokens: usize,
        cfg: &DisaggConfig,
    ) -> Decision {
        let ck = CheckpointId::new("m@1");
        let prompt = vec![TokenId(3); tokens];
        let hashes = block_hashes(
            HashNamespace::new(ck.clone()).root_seed(),
            &prompt,
            BlockSize(16),
        );
        let req = RouteRequest {
            checkpoint: &ck,
            hashes: &hashes,
            prompt_tokens: tokens as u32,
            block_size: BlockSize(16),
            now: Millis(0),
            regions: None,
            residency: &[],
        };
        let mut policy = PolicyConfig::from_name("cache_aware").unwrap().build();
        select(policy.as_mut(), cfg, &req, view, index).unwrap()
    }

    #[test]
    fn long_prompts_split_short_ones_stay_on_the_decode_replica() {
        let view = ClusterView::new(vec![
            rep(0, ReplicaRole::Prefill, 0),
            rep(1, ReplicaRole::Decode, 3),
            rep(2, ReplicaRole::Decode, 0),
        ]);
        let index = PrefixIndex::default();
        let cfg = DisaggConfig::default();
        let long = route(&view, &index, 2048, &cfg);
        assert!(
            long.replica != ReplicaId(0),
            "a prefill replica never decodes"
        );
        let note = long
            .explanation
            .prefill
            .expect("a 2,048-token prompt is split");
        assert_eq!(note.replica, ReplicaId(0));
        assert_eq!(note.uncached_tokens, 2048);
        assert!(!long.fallbacks.contains(&ReplicaId(0)));
        let short = route(&view, &index, 100, &cfg);
        assert!(short.explanation.prefill.is_none());
        assert_ne!(short.replica, ReplicaId(0));
    }

    #[test]
    fn without_prefill_replicas_nothing_changes() {
        let view = ClusterView::new(vec![
            rep(0, ReplicaRole::Both, 0),
            rep(1, ReplicaRole::Both, 0),
        ]);
        let d = route(
            &view,
            &PrefixIndex::default(),
            4096,
            &DisaggConfig::default(),
        );
        assert!(d.explanation.prefill.is_none());
        // An unhealthy prefill replica: the split falls back to prefilling in place.
        let mut p = rep(2, ReplicaRole::Prefill, 0);
        p.health = Health::Unhealthy;
        let view = ClusterView::new(vec![rep(0, ReplicaRole::Decode, 0), p.clone()]);
        assert!(route(
            &view,
            &PrefixIndex::default(),
            4096,
            &DisaggConfig::default()
        )
        .explanation
        .prefill
        .is_none());
        // Only prefill replicas left: they serve co-located rather than fail.
        p.health = Health::Healthy;
        let view = ClusterView::new(vec![p]);
        let d = route(
            &view,
            &PrefixIndex::default(),
            4096,
            &DisaggConfig::default(),
        );
        assert_eq!(d.replica, ReplicaId(2));
        assert!(d.explanation.prefill.is_none());
    }

    #[test]
    fn a_decode_replica_holding_the_history_skips_the_transfer() {
        let view = ClusterView::new(vec![
            rep(0, ReplicaRole::Prefill, 0),
            rep(1, ReplicaRole::Decode, 0),
        ]);
        let ck = CheckpointId::new("m@1");
        let prompt = vec![TokenId(3); 2048];
        let hashes = block_hashes(HashNamespace::new(ck).root_seed(), &prompt, BlockSize(16));
        let mut index = PrefixIndex::default();
        // The decode replica holds all but the last 256 tokens (it decoded the last turn).
        index.record_routed(ReplicaId(1), &hashes[..hashes.len() - 16], Millis(0));
        let d = route(&view, &index, 2048, &DisaggConfig::default());
        assert_eq!(d.replica, ReplicaId(1));
        assert!(d.explanation.prefill.is_none(), "256 uncached tokens < 512");
        let d = route(
            &view,
            &index,
            2048,
            &DisaggConfig {
                min_prompt_tokens: 128,
            },
        );
        assert_eq!(d.explanation.prefill.map(|p| p.uncached_tokens), Some(256));
    }
}
