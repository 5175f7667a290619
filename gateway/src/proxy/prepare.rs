//! Prepare: tokenize the prompt exactly as the replica will (its published tokenizer,
//! cached per segment, or a pool's configured one, or text units), pick the checkpoint (a
//! rollout's sticky choice for the conversation, else the registry's), then hash full
//! blocks under the tenant's namespace (checkpoint and cache salt in the seed: the shared
//! hashing contract; unsalted for an engine whose KV events carry no salt; a LoRA
//! adapter's namespace for a request naming one: `crate::engines::namespace`). Nothing is
//! routed or recorded.

use crate::body::request::{ParsedRequest, Prompt};
use crate::error::GatewayError;
use crate::replicas::Replica;
use crate::state::AppState;
use crate::tenants::Tenant;
use crate::tokenize::ChatText;
use router_policy::{conversation_key, sticky_key_seeded};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warmpath_core::{block_hashes, BlockHash, BlockSize, CheckpointId, TokenId};

/// A request tokenized and hashed, not yet routed: enough to reserve tokens against the
/// tenant's limits before anything is decided or recorded.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The checkpoint the request will be served from.
    pub checkpoint: CheckpointId,
    /// The replicas serving it now.
    pub replicas: Vec<Arc<Replica>>,
    /// Prompt tokens as the replica will count them.
    pub prompt_tokens: u32,
    /// Block hashes of the prompt under the tenant's namespace.
    pub hashes: Vec<BlockHash>,
    /// Tokens per block.
    pub block_size: BlockSize,
    /// Time spent tokenizing and hashing.
    pub prepare: Duration,
    /// The prompt's tokens, when the encoder makes real tokens (what a rollout's pre-warm
    /// can replay); recorded as a hot prefix once the request is routed.
    pub tokens: Option<Vec<TokenId>>,
}

/// Tokenizes and hashes the prompt of `req` for `tenant` (allowlist checked), starting at
/// `now`. Nothing is routed or recorded yet.
pub(crate) fn prepare(
    state: &AppState,
    tenant: &Tenant,
    req: &ParsedRequest<'_>,
    now: Instant,
) -> Result<Prepared, GatewayError> {
    if !tenant.allows(&req.model) {
        return Err(GatewayError::ModelNotAllowed(req.model.to_string()));
    }
    let (mut checkpoint, mut replicas) = state
        .registry
        .candidates(&req.model, now)
        .ok_or_else(|| GatewayError::UnknownModel(req.model.to_string()))?;
    let t0 = now;
    let first = replicas
        .first()
        .ok_or_else(|| GatewayError::NoReplica(req.model.to_string()))?;
    let mut tokens = super::tokens::tokenize_in_place(first, req)?;
    let counts_tokens = first.tokenizer.counts_tokens();
    let mut block_size = first.info.block_size;
    if let Some(rollout) = state.rollouts.get(&req.model) {
        // The conversation's rollout key: a chat by its messages through the first
        // question, any other prompt by its first blocks. Only a rollout reads it, so a
        // model without one does not hash the conversation (a long system prompt is most
        // of a short request's text).
        let key = match &req.prompt {
            Prompt::Chat(msgs) => conversation_key(
                msgs.iter().map(|m| (m.role(), m.content())),
                Some(&tenant.salt),
            ),
            _ => sticky_key_seeded(tenant.sticky_seed, &tokens, block_size),
        };
        // The conversation's checkpoint, when it has a routable replica; else the
        // registry's choice (a rollout never turns a servable request away).
        let (want, _) = rollout.choose(key);
        if want != checkpoint {
            let on = state.registry.on_checkpoint(&req.model, &want);
            if let Some(r) = on.iter().find(|r| r.routable(now)) {
                if !Arc::ptr_eq(&r.tokenizer, &first.tokenizer) {
                    tokens = super::tokens::tokenize_in_place(r, req)?;
                }
                block_size = r.info.block_size;
                checkpoint = want;
                replicas = on;
            }
        }
    }
    let first = &replicas[0];
    // An engine that publishes KV events stores blocks salted only when the gateway sends
    // the salt (`cache_salt`), and an adapter's blocks under its name: requests hash in the
    // namespace its events are re-hashed into (docs/engines.md).
    let seed = first.upstream.namespace.seed(
        &checkpoint,
        &req.model,
        first.upstream.kv_events.is_some(),
        (&tenant.salt, || tenant.root_seed(&checkpoint)),
    );
    let hashes = block_hashes(seed, &tokens, block_size);
    Ok(Prepared {
        checkpoint,
        replicas,
        prompt_tokens: u32::try_from(tokens.len()).unwrap_or(u32::MAX),
        hashes,
        block_size,
        prepare: t0.elapsed(),
        tokens: counts_tokens.then_some(tokens),
    })
}
