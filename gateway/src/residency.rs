//! Data residency beyond routing: a region-pinned tenant's prompts and KV never leave its
//! regions, through the router (`router_policy::region`), the rollout pre-warm
//! (`crate::rollout::prewarm` replays a pinned tenant's hot prefixes only to replicas in
//! its regions) or the shared KV tier (this module: a replica whose tier's Redis is
//! outside the tenant's regions is told not to use it for the request).
//!
//! One rule decides every case, [`router_policy::residency_allows`]: an empty pin allows
//! anywhere; under a pin, a region not listed, or no region at all, is refused.

use crate::config::EngineKind;
use crate::headers::KV_TIER_OFF;
use crate::replicas::Replica;
use http::{HeaderMap, HeaderValue};
use std::sync::Arc;
use warmpath_core::RegionId;

/// Whether a tenant pinned to `residency` may have its KV in `replica`'s shared tier. A
/// Warmpath replica without a tier reports no tier region and so counts as outside any
/// pin (the switch is then sent and ignored); other engines have no Warmpath tier to
/// switch off (their own offloading is theirs to place: docs/operations.md).
pub(crate) fn tier_allowed(residency: &[RegionId], replica: &Replica) -> bool {
    replica.upstream.engine != EngineKind::Warmpath
        || router_policy::residency_allows(residency, replica.kv_store_region.as_ref())
}

/// Stamps [`KV_TIER_OFF`] on a request to a Warmpath `replica` (and the prefill replica
/// it fetches from, which gets the switch passed on) when either's tier is outside
/// `residency`; removes any other copy (a client's) otherwise.
pub(crate) fn stamp_tier(
    h: &mut HeaderMap,
    residency: &[RegionId],
    replica: &Replica,
    prefill: Option<&Replica>,
) {
    let off =
        !tier_allowed(residency, replica) || prefill.is_some_and(|p| !tier_allowed(residency, p));
    if off {
        h.insert(KV_TIER_OFF, HeaderValue::from_static("1"));
    } else {
        h.remove(KV_TIER_OFF);
    }
}

/// A hot prefix's pins: the one its tenant had when the prefix was recorded, and the one
/// it has now. A replay must satisfy both: a prefix recorded under a pin stays within it
/// after an unpin, and a pin added by a reload applies to older prefixes too.
#[derive(Clone, Debug)]
pub(crate) struct ReplayPins {
    /// The tenant's pin when the prefix was recorded.
    pub recorded: Arc<[RegionId]>,
    /// The tenant's pin now.
    pub current: Arc<[RegionId]>,
}

impl ReplayPins {
    /// Whether the prefix may be replayed on `replica` (in the regions of both pins).
    pub(crate) fn allow(&self, replica: &Replica) -> bool {
        let region = replica.region.as_ref();
        router_policy::residency_allows(&self.recorded, region)
            && router_policy::residency_allows(&self.current, region)
    }

    /// Whether the replay may use `replica`'s shared KV tier.
    pub(crate) fn tier(&self, replica: &Replica) -> bool {
        tier_allowed(&self.recorded, replica) && tier_allowed(&self.current, replica)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::{ReplicaAddr, UpstreamMeta};
    use crate::tokenize::CachedTokenizer;
    use warmpath_core::{BlockSize, CheckpointId, ReplicaId};
    use warmpath_protocol::replica_api::ReplicaInfo;
    use warmpath_text::bytelevel::chatml_bpe_spec;

    fn replica(region: &str, tier: Option<&str>) -> Replica {
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new("m@1"),
            block_size: BlockSize(16),
            hash_scheme: warmpath_core::SCHEME_VERSION,
            capacity_blocks: 64,
            max_context: 1024,
            region: Some(region.into()),
            device: "cpu".into(),
            role: Default::default(),
            kv_store_region: tier.map(String::from),
        };
        let tok = CachedTokenizer::new(&chatml_bpe_spec(), 64, 1).unwrap();
        Replica::new(
            ReplicaId(0),
            ReplicaAddr::parse("http://127.0.0.1:1").unwrap(),
            info,
            Arc::new(tok.into()),
            UpstreamMeta::warmpath("m"),
        )
        .unwrap()
    }

    #[test]
    fn a_pinned_tenant_gets_the_tier_off_outside_its_regions_and_a_client_copy_goes() {
        let eu = [RegionId::new("eu")];
        let (home, away, none) = (
            replica("eu", Some("eu")),
            replica("eu", Some("us")),
            replica("eu", None),
        );
        let off = |residency: &[RegionId], r: &Replica, p: Option<&Replica>| {
            let mut h = HeaderMap::new();
            h.insert(KV_TIER_OFF, HeaderValue::from_static("1")); // a client's copy
            stamp_tier(&mut h, residency, r, p);
            h.get(KV_TIER_OFF).map(|v| v.as_bytes().to_vec())
        };
        let on = None;
        let set = Some(b"1".to_vec());
        assert_eq!(off(&eu, &home, None), on, "tier in the tenant's region");
        assert_eq!(off(&eu, &away, None), set, "tier in another region");
        assert_eq!(
            off(&eu, &none, None),
            set,
            "a tier of no region fails closed"
        );
        assert_eq!(
            off(&eu, &home, Some(&away)),
            set,
            "the prefill replica's tier too"
        );
        assert_eq!(off(&[], &away, Some(&none)), on, "unpinned: anywhere");
    }
}
