//! Registration: discover a replica's info and tokenizer (a Warmpath replica's own control
//! plane, or an engine pool's config through [`super::engine`]), add it to the replica set
//! and start following it; remove it again; retry a configured upstream until it answers.

use super::client;
use super::tasks;
use crate::config::{EngineKind, Target, TokenizerConfig};
use crate::encoder::PromptEncoder;
use crate::replicas::{Registry, Replica, ReplicaAddr};
use crate::state::AppState;
use crate::tokenize::CachedTokenizer;
use std::sync::Arc;
use std::time::Duration;
use warmpath_core::ReplicaId;
use warmpath_protocol::replica_api::{ReplicaInfo, PATH_INFO, PATH_TOKENIZER};
use warmpath_text::TokenizerSpec;

pub(crate) use super::register_error::RegisterError;

/// Discovers a replica's info and tokenizer and adds it to `registry` (the caller starts
/// its background tasks).
pub(crate) async fn discover(
    registry: &Registry,
    url: &str,
    tok_cfg: &TokenizerConfig,
) -> Result<Arc<Replica>, RegisterError> {
    let addr = ReplicaAddr::parse(url).map_err(RegisterError::Url)?;
    if registry.contains(&addr) {
        return Err(RegisterError::Duplicate(addr.url()));
    }
    let timeout = Duration::from_secs(10);
    let info: ReplicaInfo = client::get_json(&addr.http(), PATH_INFO, timeout)
        .await
        .map_err(|source| RegisterError::Discovery {
            url: addr.url(),
            path: PATH_INFO,
            source,
        })?;
    if info.hash_scheme != warmpath_core::SCHEME_VERSION {
        return Err(RegisterError::Scheme(
            addr.url(),
            info.hash_scheme,
            warmpath_core::SCHEME_VERSION,
        ));
    }
    let tokenizer = match registry.tokenizer(&info.checkpoint) {
        Some(t) => t,
        None => {
            let spec: TokenizerSpec = client::get_json(&addr.http(), PATH_TOKENIZER, timeout)
                .await
                .map_err(|source| RegisterError::Discovery {
                    url: addr.url(),
                    path: PATH_TOKENIZER,
                    source,
                })?;
            let t = CachedTokenizer::new(&spec, tok_cfg.cache_entries, tok_cfg.min_cached_bytes)
                .map_err(|e| RegisterError::Tokenizer(addr.url(), e.to_string()))?;
            registry.share_tokenizer(&info.checkpoint, PromptEncoder::Tokens(t))
        }
    };
    Ok(registry.insert(addr, info, tokenizer)?)
}

/// Registers a Warmpath replica and starts following it (KV events, load, health probes).
pub(crate) async fn add_replica(
    state: &Arc<AppState>,
    url: &str,
) -> Result<Arc<Replica>, RegisterError> {
    add_target(state, &Target::warmpath(url)).await
}

/// Registers an upstream of any engine and starts following it.
pub(crate) async fn add_target(
    state: &Arc<AppState>,
    target: &Target,
) -> Result<Arc<Replica>, RegisterError> {
    let tok = state.config().tokenizer.clone();
    let r = match target.engine() {
        EngineKind::Warmpath => discover(&state.registry, &target.url, &tok).await?,
        _ => super::upstream::discover_upstream(&state.registry, target, &tok).await?,
    };
    for m in &r.upstream.models {
        state.metrics.add_served_model(m);
    }
    tasks::spawn_all(state, r.clone());
    Ok(r)
}

/// Removes a replica from routing and the index; its tasks stop.
pub(crate) fn remove_replica(state: &AppState, id: ReplicaId) -> bool {
    let Some(r) = state.registry.remove(id, &state.router) else {
        return false;
    };
    // The prefix index forgot the replica's entries; when it was its checkpoint's last
    // replica, the checkpoint's routing history for pre-warm goes too.
    let ck = &r.info.checkpoint;
    if !state
        .registry
        .all()
        .iter()
        .any(|o| o.info.checkpoint == *ck)
    {
        state.rollouts.hot.forget(ck);
        tracing::info!(checkpoint = %ck, "last replica of the checkpoint left: its hot prefixes dropped");
    }
    true
}

/// Registers `target`, retrying in the background until it succeeds or leaves the config.
pub(crate) fn register_with_retry(state: Arc<AppState>, target: Target) {
    let control = state.control.clone();
    control.spawn(async move {
        let mut delay = Duration::from_millis(200);
        let url = target.url.clone();
        loop {
            match add_target(&state, &target).await {
                Ok(_) => return,
                Err(RegisterError::Duplicate(_)) => return,
                Err(e) => tracing::warn!(%url, error = %e, "replica registration failed; retrying"),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
            if !state.config().targets().iter().any(|t| t.url == url) {
                return;
            }
        }
    });
}
