//! From a parsed request to a routing plan, in the order the request phase runs them:
//! [`prepare`] (tokenize as the replica does, hash with the tenant's salt), then, once the
//! tenant's limits admitted the reservation, [`route`] (run the policy), [`admit`] (hold an
//! in-flight slot: admission control) and [`record`] (count and log the decision).

use crate::error::GatewayError;
use crate::replicas::{Replica, Slot};
use crate::request::{Endpoint, ParsedRequest, Prompt};
use crate::routing::DecisionRecord;
use crate::state::AppState;
use crate::tenants::Tenant;
use router_policy::{
    block_hashes, BlockHash, BlockSize, CheckpointId, ClusterView, Decision, RouteRequest, TokenId,
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
    pub model: Arc<str>,
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
    /// The policy's decision (shared with the decision log).
    pub decision: Arc<Decision>,
    /// Time spent tokenizing and hashing.
    pub prepare: Duration,
    /// Time spent in the policy.
    pub select: Duration,
    /// When the policy decided (the clock read that ended `select`, reused after it).
    pub decided: Instant,
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

/// A request tokenized and hashed, not yet routed: enough to reserve tokens against the
/// tenant's limits before anything is decided or recorded.
#[derive(Debug)]
pub struct Prepared {
    checkpoint: CheckpointId,
    replicas: Vec<Arc<Replica>>,
    /// Prompt tokens as the replica will count them.
    pub prompt_tokens: u32,
    hashes: Vec<BlockHash>,
    block_size: BlockSize,
    prepare: Duration,
}

/// Tokenizes and hashes the prompt of `req` for `tenant` (allowlist checked), starting at
/// `now`. Nothing is routed or recorded yet.
pub fn prepare(
    state: &AppState,
    tenant: &Tenant,
    req: &ParsedRequest,
    now: Instant,
) -> Result<Prepared, GatewayError> {
    if !tenant.allows(&req.model) {
        return Err(GatewayError::ModelNotAllowed(req.model.to_string()));
    }
    let (checkpoint, replicas) = state
        .registry
        .candidates(&req.model, now)
        .ok_or_else(|| GatewayError::UnknownModel(req.model.to_string()))?;
    let first = replicas
        .first()
        .ok_or_else(|| GatewayError::NoReplica(req.model.to_string()))?;
    let t0 = now;
    let tokens = tokenize(first, &req.prompt)?;
    let block_size = first.info.block_size;
    let seed = tenant.root_seed(&checkpoint);
    let hashes = block_hashes(seed, &tokens, block_size);
    Ok(Prepared {
        checkpoint,
        replicas,
        prompt_tokens: u32::try_from(tokens.len()).unwrap_or(u32::MAX),
        hashes,
        block_size,
        prepare: t0.elapsed(),
    })
}

/// Runs the policy over a prepared request: the decision and the replicas in try order.
/// Records nothing: [`record`] does, once the request is admitted.
pub fn route(
    state: &AppState,
    prepared: Prepared,
    endpoint: Endpoint,
    req: &ParsedRequest,
    model: Arc<str>,
) -> Result<Plan, GatewayError> {
    let Prepared {
        checkpoint,
        replicas,
        prompt_tokens,
        hashes,
        block_size,
        prepare,
    } = prepared;
    let t1 = Instant::now();
    let view = ClusterView::new(replicas.iter().map(|r| r.snapshot(t1)).collect());
    let route = RouteRequest {
        checkpoint: &checkpoint,
        hashes: &hashes,
        prompt_tokens,
        block_size,
        now: state.millis_at(t1),
    };
    let decision = state
        .router
        .select(&route, &view)
        .map_err(|_| GatewayError::NoReplica(req.model.to_string()))?;
    let decided = Instant::now();
    let select = decided.saturating_duration_since(t1);
    let mut candidates: Vec<Arc<Replica>> = Vec::with_capacity(1 + decision.fallbacks.len());
    for id in std::iter::once(decision.replica).chain(decision.fallbacks.iter().copied()) {
        if let Some(r) = replicas.iter().find(|r| r.id == id) {
            if !candidates.iter().any(|c| c.id == id) {
                candidates.push(r.clone());
            }
        }
    }
    if candidates.is_empty() {
        return Err(GatewayError::NoReplica(req.model.to_string()));
    }
    Ok(Plan {
        endpoint,
        model,
        stream: req.stream,
        prompt_tokens,
        hashes,
        block_size,
        candidates,
        decision: Arc::new(decision),
        prepare,
        select,
        decided,
    })
}

/// Records an admitted request's decision: the routing-branch counter, the stage latencies
/// and the admin decision log. Requests rejected by limits or shed never get here.
pub fn record(state: &AppState, plan: &Plan, tenant: &Tenant, request_id: &http::HeaderValue) {
    let m = &state.metrics;
    m.route_tokenize_hash.observe(plan.prepare.as_secs_f64());
    m.route_select.observe(plan.select.as_secs_f64());
    m.routing_branch(
        plan.decision.explanation.policy,
        plan.decision.explanation.branch,
    )
    .inc();
    state.router.log_decision(DecisionRecord {
        request_id: request_id.clone(),
        unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        tenant: tenant.id.clone(),
        model: plan.model.clone(),
        prompt_tokens: plan.prompt_tokens,
        blocks: plan.hashes.len(),
        prepare_us: plan.prepare.as_micros() as u64,
        select_us: plan.select.as_micros() as u64,
        decision: plan.decision.clone(),
    });
}

/// Holds a slot on the first candidate with room, moving it to the front; when every
/// candidate is full, waits in the bounded global queue; 503 when the queue is full or the
/// wait times out. Nothing reaches a replica until a slot is held.
pub async fn admit(state: &AppState, plan: &mut Plan) -> Result<Slot, GatewayError> {
    let cfg = state.config();
    let max = cfg.admission.max_in_flight_per_replica;
    // The first try uses the decision's clock read; only a wait reads the clock again.
    let deadline = plan.decided + Duration::from_millis(cfg.admission.queue_timeout_ms);
    let mut queued = false;
    let mut now = plan.decided;
    let result = loop {
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
        now = Instant::now();
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
