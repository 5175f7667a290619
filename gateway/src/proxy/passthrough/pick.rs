//! Which replicas may take a pass-through request ([`serving`]: those of the model whose
//! pool serves the API), and the choice among them by load alone ([`by_load`]): an
//! embedding or a tokenization reuses no KV, so nothing is hashed or looked up in the
//! prefix index.

use crate::config::{serves, Config, PassthroughApi};
use crate::error::GatewayError;
use crate::replicas::Replica;
use router_policy::{
    resident, Branch, CandidateScore, Decision, Explanation, Health, ReplicaSnapshot, Terms,
};
use std::sync::Arc;
use warmpath_core::RegionId;

/// The policy name pass-through decisions carry (metrics and the decision log).
pub(crate) const POLICY: &str = "passthrough";

/// Whether `r` serves `api`: its pool's `apis`, or its engine's defaults (a replica from the
/// top-level `replicas:` list or registered at run time has no pool).
pub(crate) fn serves_api(cfg: &Config, r: &Replica, api: PassthroughApi) -> bool {
    let configured = r
        .upstream
        .pool
        .as_deref()
        .and_then(|name| cfg.pools.iter().find(|p| p.name == name))
        .and_then(|p| p.apis.as_deref());
    serves::served(r.upstream.engine, configured).contains(&api)
}

/// The replicas of `model` among `all` that serve `api`: 404 when no replica serves the
/// model at all, 400 naming the API when some do but none serves it.
pub(crate) fn serving(
    cfg: &Config,
    all: &[Arc<Replica>],
    model: &str,
    api: PassthroughApi,
) -> Result<Vec<Arc<Replica>>, GatewayError> {
    let of_model: Vec<&Arc<Replica>> = all
        .iter()
        .filter(|r| !r.is_removed() && r.serves(model))
        .collect();
    if of_model.is_empty() {
        return Err(GatewayError::UnknownModel(model.to_string()));
    }
    let capable: Vec<Arc<Replica>> = of_model
        .into_iter()
        .filter(|r| serves_api(cfg, r, api))
        .cloned()
        .collect();
    if capable.is_empty() {
        return Err(GatewayError::ApiNotServed {
            model: model.to_string(),
            api: api.as_str(),
            why: "none of its replicas' pools lists it in `apis`".into(),
        });
    }
    Ok(capable)
}

/// The least-loaded healthy replica of `view` the tenant's `residency` allows, the others
/// as fallbacks by load; ties (idle replicas, most often) rotate from `tie`, so equal
/// replicas share the traffic. `None` when no replica is healthy.
pub(crate) fn by_load(
    view: &[ReplicaSnapshot],
    residency: &[RegionId],
    tie: u64,
) -> Option<Decision> {
    let healthy: Vec<&ReplicaSnapshot> = view
        .iter()
        .filter(|s| s.health == Health::Healthy && resident(residency, s))
        .collect();
    let n = healthy.len();
    if n == 0 {
        return None;
    }
    let start = (tie % n as u64) as usize;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (healthy[i].load(), (i + n - start) % n));
    let candidates = healthy
        .iter()
        .map(|s| CandidateScore {
            replica: s.id,
            matched_blocks: 0,
            precise: false,
            cost_ms: f64::from(s.load()),
            terms: Terms::new().with("load", f64::from(s.load())),
        })
        .collect();
    Some(Decision {
        replica: healthy[order[0]].id,
        fallbacks: order[1..].iter().map(|&i| healthy[i].id).collect(),
        predicted_cached_blocks: 0,
        charged_ms: 0.0,
        explanation: Explanation {
            policy: POLICY,
            branch: Branch::LeastLoaded,
            candidates,
            region: None,
            prefill: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EngineKind, PoolConfig};
    use crate::replicas::{ReplicaAddr, UpstreamMeta};
    use warmpath_core::{BlockSize, CheckpointId, ReplicaId};
    use warmpath_protocol::replica_api::ReplicaInfo;

    fn snap(id: u32, in_flight: u32) -> ReplicaSnapshot {
        ReplicaSnapshot {
            in_flight,
            ..ReplicaSnapshot::idle(ReplicaId(id), CheckpointId::new("m"))
        }
    }

    #[test]
    fn the_least_loaded_healthy_replica_wins_and_the_rest_follow_by_load() {
        let view = [snap(0, 3), snap(1, 1), snap(2, 2)];
        let d = by_load(&view, &[], 0).unwrap();
        assert_eq!(d.replica, ReplicaId(1));
        assert_eq!(d.fallbacks, [ReplicaId(2), ReplicaId(0)]);
        assert_eq!(d.explanation.policy, POLICY);
        assert_eq!(d.explanation.branch, Branch::LeastLoaded);
        assert_eq!(d.predicted_cached_blocks, 0);
        // Reported running + waiting counts too (the engine's own queue).
        let mut busy = snap(1, 0);
        busy.running = 4;
        let d = by_load(&[snap(0, 1), busy], &[], 0).unwrap();
        assert_eq!(d.replica, ReplicaId(0));
    }

    #[test]
    fn unhealthy_draining_and_foreign_replicas_are_skipped() {
        let mut down = snap(0, 0);
        down.health = Health::Unhealthy;
        let mut draining = snap(1, 0);
        draining.health = Health::Draining;
        let d = by_load(&[down.clone(), draining.clone(), snap(2, 9)], &[], 0).unwrap();
        assert_eq!((d.replica, d.fallbacks.len()), (ReplicaId(2), 0));
        assert!(by_load(&[down, draining], &[], 0).is_none());
        let eu = RegionId::new("eu");
        let mut here = snap(3, 5);
        here.region = Some(eu.clone());
        let d = by_load(&[snap(4, 0), here], &[eu], 0).unwrap();
        assert_eq!((d.replica, d.fallbacks.len()), (ReplicaId(3), 0));
    }

    #[test]
    fn ties_rotate_with_the_tie_breaker() {
        let view = [snap(0, 1), snap(1, 1), snap(2, 1)];
        let picks: Vec<ReplicaId> = (0..3)
            .map(|t| by_load(&view, &[], t).unwrap().replica)
            .collect();
        assert_eq!(picks, [ReplicaId(0), ReplicaId(1), ReplicaId(2)]);
    }

    fn replica(id: u32, engine: EngineKind, pool: Option<&str>) -> Arc<Replica> {
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new("m@1"),
            block_size: BlockSize(16),
            hash_scheme: warmpath_core::SCHEME_VERSION,
            capacity_blocks: 1024,
            max_context: 1024,
            region: None,
            device: "cpu".into(),
            role: Default::default(),
            kv_store_region: None,
        };
        let meta = UpstreamMeta {
            engine,
            pool: pool.map(str::to_string),
            ..UpstreamMeta::warmpath("m")
        };
        let addr = ReplicaAddr::parse(&format!("http://127.0.0.1:{}", 9000 + id)).unwrap();
        let enc = Arc::new(crate::encoder::PromptEncoder::TextUnits);
        Arc::new(Replica::new(ReplicaId(id), addr, info, enc, meta).unwrap())
    }

    #[test]
    fn serving_follows_pool_apis_then_engine_defaults() {
        let mut cfg = Config::default();
        let pool: PoolConfig = serde_yaml::from_str(
            "{name: emb, engine: llamacpp, upstreams: [http://127.0.0.1:9001], apis: [embeddings]}",
        )
        .unwrap();
        cfg.pools = vec![pool];
        let all = vec![
            replica(0, EngineKind::Warmpath, None),
            replica(1, EngineKind::Llamacpp, Some("emb")),
            replica(2, EngineKind::Llamacpp, None),
        ];
        let ids = |v: Vec<Arc<Replica>>| v.iter().map(|r| r.id.0).collect::<Vec<_>>();
        let e = PassthroughApi::Embeddings;
        assert_eq!(ids(serving(&cfg, &all, "m", e).unwrap()), [1]);
        let t = PassthroughApi::Tokenize;
        assert_eq!(ids(serving(&cfg, &all, "m", t).unwrap()), [0]);
        assert!(matches!(
            serving(&cfg, &all, "other", e),
            Err(GatewayError::UnknownModel(_))
        ));
        let only_warmpath = &all[..1];
        match serving(&cfg, only_warmpath, "m", e) {
            Err(err @ GatewayError::ApiNotServed { .. }) => {
                assert_eq!(err.status(), 400);
                assert!(
                    err.to_string().contains("does not serve embeddings"),
                    "{err}"
                );
            }
            other => panic!("{:?}", other.map(ids)),
        }
    }
}
