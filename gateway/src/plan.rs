//! From a parsed request to a routing plan: tokenize as the replica does, hash with the
//! tenant's salt, run the policy, and hold an in-flight slot (admission control).

use crate::error::GatewayError;
use crate::replicas::{Replica, Slot};
use crate::request::{Endpoint, ParsedRequest, Prompt};
use crate::routing::DecisionRecord;
use crate::state::AppState;
use crate::tenants::Tenant;
use router_policy::{
    block_hashes, BlockHash, BlockSize, ClusterView, Decision, HashNamespace, RouteRequest, TokenId,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything decided about a request before it is forwarded.
#[derive(Debug)]
pub struct Plan {
    /// Endpoint.
    pub endpoint: Endpoint,
    /// Model name.
    pub model: String,
    /// SSE requested.
    pub stream: bool,
    /// Prompt tokens as the replica will count them.
    pub prompt_tokens: u32,
    /// Block hashes of the prompt under the tenant's namespace.
    pub hashes: Vec<BlockHash>,
    /// Tokens per block.
    pub block_size: BlockSize,
    /// Replicas in try order: the choice, then the policy's fallbacks.
    pub candidates: Vec<Arc<Replica>>,
    /// The policy's decision.
    pub decision: Decision,
}

impl Plan {
    /// Cached prompt tokens predicted for `replica`.
    pub fn predicted_cached_tokens(&self, replica: &Replica) -> u32 {
        let blocks = if replica.id == self.decision.replica {
            self.decision.predicted_cached_blocks
        } else {
            self.decision
                .explanation
                .candidate(replica.id)
                .map_or(0, |c| c.matched_blocks)
        };
        (blocks * self.block_size.0).min(self.prompt_tokens)
    }
}

/// Tokenizes `prompt` with the checkpoint's tokenizer.
pub fn tokenize(replica: &Replica, prompt: &Prompt) -> Result<Vec<TokenId>, GatewayError> {
    let r = match prompt {
        Prompt::Chat(msgs) => replica.tokenizer.encode_chat(msgs),
        Prompt::Text(t) => replica.tokenizer.encode(t, true),
        Prompt::Tokens(t) => return Ok(t.clone()),
    };
    r.map_err(|e| GatewayError::BadRequest(format!("cannot tokenize the prompt: {e}")))
}

/// Builds the plan: tokens, hashes, decision. The caller has authenticated `tenant`.
pub fn build(
    state: &AppState,
    tenant: &Tenant,
    endpoint: Endpoint,
    req: &ParsedRequest,
    request_id: &str,
) -> Result<Plan, GatewayError> {
    if !tenant.allows(&req.model) {
        return Err(GatewayError::ModelNotAllowed(req.model.clone()));
    }
    let now = Instant::now();
    let (checkpoint, replicas) = state
        .registry
        .candidates(&req.model, now)
        .ok_or_else(|| GatewayError::UnknownModel(req.model.clone()))?;
    let first = replicas
        .first()
        .ok_or_else(|| GatewayError::NoReplica(req.model.clone()))?;
    let t0 = Instant::now();
    let tokens = tokenize(first, &req.prompt)?;
    let block_size = first.info.block_size;
    let seed = HashNamespace::new(checkpoint.clone())
        .with_salt(Some(tenant.salt.clone()))
        .root_seed();
    let hashes = block_hashes(seed, &tokens, block_size);
    let t1 = Instant::now();
    let view = ClusterView::new(replicas.iter().map(|r| r.snapshot(now)).collect());
    let prompt_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
    let route = RouteRequest {
        checkpoint: &checkpoint,
        hashes: &hashes,
        prompt_tokens,
        block_size,
        now: state.now_millis(),
    };
    let decision = state
        .router
        .select(&route, &view)
        .map_err(|_| GatewayError::NoReplica(req.model.clone()))?;
    let t2 = Instant::now();
    let m = &state.metrics;
    m.route_latency
        .with_label_values(&["tokenize_hash"])
        .observe((t1 - t0).as_secs_f64());
    m.route_latency
        .with_label_values(&["select"])
        .observe((t2 - t1).as_secs_f64());
    m.routing_branches
        .with_label_values(&[
            decision.explanation.policy,
            decision.explanation.branch.as_str(),
        ])
        .inc();
    let mut candidates = Vec::with_capacity(1 + decision.fallbacks.len());
    for id in std::iter::once(decision.replica).chain(decision.fallbacks.iter().copied()) {
        if let Some(r) = replicas.iter().find(|r| r.id == id) {
            if !candidates.iter().any(|c: &Arc<Replica>| c.id == id) {
                candidates.push(r.clone());
            }
        }
    }
    if candidates.is_empty() {
        return Err(GatewayError::NoReplica(req.model.clone()));
    }
    state.router.log_decision(DecisionRecord {
        request_id: request_id.to_string(),
        unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        tenant: tenant.id.clone(),
        model: req.model.clone(),
        prompt_tokens,
        blocks: hashes.len(),
        prepare_us: (t1 - t0).as_micros() as u64,
        select_us: (t2 - t1).as_micros() as u64,
        decision: decision.clone(),
    });
    Ok(Plan {
        endpoint,
        model: req.model.clone(),
        stream: req.stream,
        prompt_tokens,
        hashes,
        block_size,
        candidates,
        decision,
    })
}

/// Holds a slot on the first candidate with room, moving it to the front; when every
/// candidate is full, waits in the bounded global queue; 503 when the queue is full or the
/// wait times out. Nothing reaches a replica until a slot is held.
pub async fn admit(state: &AppState, plan: &mut Plan) -> Result<Slot, GatewayError> {
    let cfg = state.config();
    let max = cfg.admission.max_in_flight_per_replica;
    let deadline = Instant::now() + Duration::from_millis(cfg.admission.queue_timeout_ms);
    let mut queued = false;
    let result = loop {
        let now = Instant::now();
        if let Some((i, slot)) = plan
            .candidates
            .iter()
            .enumerate()
            .filter(|(_, r)| r.health.lock().routable(now))
            .find_map(|(i, r)| state.registry.try_acquire(r, max).map(|s| (i, s)))
        {
            if i > 0 {
                let r = plan.candidates.remove(i);
                plan.candidates.insert(0, r);
            }
            break Ok(slot);
        }
        if !queued {
            let q = state.queued.fetch_add(1, Ordering::AcqRel);
            queued = true;
            state.metrics.queued.inc();
            if q >= cfg.admission.max_queue {
                break Err(GatewayError::Overloaded {
                    retry_after: Duration::from_secs(1),
                });
            }
        }
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            break Err(GatewayError::Overloaded {
                retry_after: Duration::from_secs(1),
            });
        }
        state
            .registry
            .wait_for_free_slot(left.min(Duration::from_millis(50)))
            .await;
    };
    if queued {
        state.queued.fetch_sub(1, Ordering::AcqRel);
        state.metrics.queued.dec();
    }
    if result.is_err() {
        state.metrics.shed.inc();
    }
    result
}
