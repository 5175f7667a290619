//! Registering an upstream that is not a Warmpath replica (vLLM, SGLang, llama.cpp, any
//! OpenAI server): its models from the pool or its `GET /v1/models`, its tokenizer from the
//! pool's source, and the facts a Warmpath replica would publish (checkpoint, block size,
//! capacity) from the pool's config.

use super::client;
use super::register_error::RegisterError;
use crate::config::{EngineKind, Target, TokenizerConfig};
use crate::replicas::{Registry, Replica, ReplicaAddr, UpstreamMeta};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use warmpath_core::{BlockSize, CheckpointId};
use warmpath_protocol::replica_api::ReplicaInfo;

/// `GET /v1/models`, read leniently: engines add their own fields to each entry.
#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

const MODELS_PATH: &str = "/v1/models";

/// Registers `target`, an upstream of an engine pool, in `registry`. The upstream must
/// answer `GET /v1/models`: that is how a server that is not up yet is told apart (the
/// caller retries).
pub(crate) async fn discover_upstream(
    registry: &Registry,
    target: &Target,
    tok_cfg: &TokenizerConfig,
) -> Result<Arc<Replica>, RegisterError> {
    let pool = target
        .pool
        .as_ref()
        .ok_or_else(|| RegisterError::Url(format!("{}: not in an engine pool", target.url)))?;
    let addr = ReplicaAddr::parse(&target.url).map_err(RegisterError::Url)?;
    if registry.contains(&addr) {
        return Err(RegisterError::Duplicate(addr.url()));
    }
    let listed: ModelList = client::get_json(&addr.http(), MODELS_PATH, Duration::from_secs(10))
        .await
        .map_err(|source| RegisterError::Discovery {
            url: addr.url(),
            path: MODELS_PATH,
            source,
        })?;
    let listed: Vec<String> = listed.data.into_iter().map(|m| m.id).collect();
    let models = match &pool.models {
        Some(m) => {
            if !m.iter().any(|name| listed.contains(name)) {
                // llama-server lists the file name, vLLM `--served-model-name`: the names
                // clients use may be aliases the engine does not know. Requests are passed
                // through with the client's name either way.
                tracing::info!(url = %addr.url(), configured = ?m, listed = ?listed,
                    "none of the pool's models is in the upstream's /v1/models");
            }
            m.clone()
        }
        None if listed.is_empty() => {
            return Err(RegisterError::Models(addr.url()));
        }
        None => listed,
    };
    let checkpoint = CheckpointId::new(pool.checkpoint_for(&models[0]));
    let encoder = match registry.tokenizer(&checkpoint) {
        Some(t) => t,
        None => {
            let e = crate::engines::tokenizer::encoder(
                &pool.tokenizer,
                pool.chat_template.as_deref(),
                tok_cfg,
            )
            .map_err(|e| RegisterError::Tokenizer(addr.url(), e.to_string()))?;
            registry.share_tokenizer(&checkpoint, e)
        }
    };
    let info = ReplicaInfo {
        model: models[0].clone(),
        checkpoint,
        block_size: BlockSize(pool.block_size),
        hash_scheme: warmpath_core::SCHEME_VERSION,
        capacity_blocks: pool.capacity_blocks,
        max_context: pool.max_context,
        region: pool.region.clone(),
        device: pool.engine.as_str().to_string(),
        role: Default::default(),
        kv_store_region: None,
    };
    let meta = UpstreamMeta {
        engine: pool.engine,
        models,
        pool: Some(pool.name.clone()),
        kv_events: target.kv_events.clone(),
        scrape_metrics: pool.metrics && pool.engine != EngineKind::Openai,
        namespace: crate::engines::namespace::EngineNamespace::of(pool),
    };
    Ok(registry.insert_upstream(addr, info, encoder, meta)?)
}
