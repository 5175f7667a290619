//! Route: run the policy over a prepared request ([`route`]), hold an in-flight slot on
//! the first replica in the decision's order that has room ([`hold_slot`]: admission
//! control, with a bounded wait), and only then count and log the decision ([`record`]).
//! Every attempt, the first and each retry, takes its replica from the same
//! [`TryOrder::next_replica`].

use super::flow_wait::{self, Ask};
use super::prepare::Prepared;
use crate::body::request::{Endpoint, ParsedRequest};
use crate::error::GatewayError;
use crate::flow::gate::Hold;
use crate::flow::FlowRequest;
pub(crate) use crate::replicas::order::TryOrder;
use crate::replicas::{Replica, Slot};
use crate::routing::DecisionRecord;
use crate::state::AppState;
use crate::tenants::Tenant;
use router_policy::flow::{prefill_cost, Class};
use router_policy::{sticky_key_seeded, ClusterView, Decision, RouteRequest};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use warmpath_core::{BlockHash, BlockSize, CheckpointId, TokenId};

/// Everything decided about a request before it is forwarded.
#[derive(Debug)]
pub(crate) struct Plan {
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
    /// The policy's decision (shared with the decision log).
    pub decision: Arc<Decision>,
    /// Time spent tokenizing and hashing.
    pub prepare: Duration,
    /// Time spent in the policy.
    pub select: Duration,
    /// When the policy decided (the clock read that ended `select`, reused after it).
    pub decided: Instant,
    /// The checkpoint serving it.
    pub checkpoint: CheckpointId,
    /// The prompt's tokens (real tokens only), for the hot-prefix history.
    pub tokens: Option<Vec<TokenId>>,
    /// The prefill replica, when a role-split pool splits the request: the decode
    /// replica fetches the prompt's KV from it (`x-warmpath-prefill-from`).
    pub prefill: Option<Arc<Replica>>,
}

impl Plan {
    /// Cached prompt tokens predicted for `replica`.
    pub(crate) fn predicted_cached_tokens(&self, replica: &Replica) -> u32 {
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

/// Runs the policy over a prepared request: the plan and the replicas in try order.
/// Records nothing: [`record`] does, once the request holds a slot.
pub(crate) fn route(
    state: &AppState,
    tenant: &Tenant,
    prepared: Prepared,
    endpoint: Endpoint,
    req: &ParsedRequest,
    model: Arc<str>,
) -> Result<(Plan, TryOrder), GatewayError> {
    let Prepared {
        checkpoint,
        replicas,
        prompt_tokens,
        hashes,
        block_size,
        prepare,
        tokens,
        ..
    } = prepared;
    let cfg = state.config();
    let t1 = Instant::now();
    let view = ClusterView::new(
        replicas
            .iter()
            .map(|r| r.snapshot(t1, &req.model))
            .collect(),
    );
    let route = RouteRequest {
        checkpoint: &checkpoint,
        hashes: &hashes,
        prompt_tokens,
        block_size,
        now: state.millis_at(t1),
        regions: cfg.regions.as_ref(),
        residency: &tenant.residency,
    };
    let decision = state
        .router
        .select_split(&cfg.disaggregation, &route, &view)
        .map_err(|_| GatewayError::NoReplica(req.model.to_string()))?;
    let prefill = decision
        .explanation
        .prefill
        .as_ref()
        .and_then(|p| replicas.iter().find(|r| r.id == p.replica).cloned());
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
    let plan = Plan {
        endpoint,
        model,
        stream: req.stream,
        prompt_tokens,
        hashes,
        block_size,
        decision: Arc::new(decision),
        prepare,
        select,
        decided,
        checkpoint,
        tokens,
        prefill,
    };
    Ok((plan, TryOrder::new(candidates)))
}

/// Records a routed request's decision: the routing-branch counter, the stage latencies,
/// a spill out of the gateway's region, the prompt in the hot-prefix history and the
/// admin decision log (under `api`, the client's API: a Messages or Responses request is
/// planned as the chat it became). Requests rejected by limits or shed never get here.
pub(crate) fn record(
    state: &AppState,
    plan: &Plan,
    tenant: &Tenant,
    request_id: &http::HeaderValue,
    api: &'static str,
    flow: &FlowRequest,
) {
    let m = &state.metrics;
    if let Some(note) = &plan.decision.explanation.region {
        if let (Some(to), Some(reason)) = (&note.spilled_to, note.reason) {
            m.rollout
                .spills
                .with_label_values(&[to.as_str(), reason.as_str()])
                .inc();
        }
    }
    if let Some(tokens) = &plan.tokens {
        // Keyed by the first blocks, not the conversation: every conversation behind one
        // system prompt counts towards it, and the entry is cut back to what they share.
        let key = sticky_key_seeded(tenant.sticky_seed, tokens, plan.block_size);
        let tag = crate::rollout::hot::HotTag {
            tenant: tenant.id.clone(),
            salt: tenant.salt_header.clone(),
            residency: tenant.residency.clone(),
        };
        state
            .rollouts
            .hot
            .record(&plan.checkpoint, key, tokens, &tag);
    }
    m.route_tokenize_hash.observe(plan.prepare.as_secs_f64());
    m.route_select.observe(plan.select.as_secs_f64());
    m.routing_branch(
        plan.decision.explanation.policy,
        plan.decision.explanation.branch,
    )
    .inc();
    log_entry(state, plan, tenant, (request_id, api), flow, None);
}

/// The decision log's entry for `plan`; `shed`: the error code of a request refused
/// after its decision (it reached no replica).
fn log_entry(
    state: &AppState,
    plan: &Plan,
    tenant: &Tenant,
    (request_id, api): (&http::HeaderValue, &'static str),
    flow: &FlowRequest,
    shed: Option<&'static str>,
) {
    state.router.log_decision(DecisionRecord {
        request_id: request_id.clone(),
        unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        tenant: tenant.id.clone(),
        model: plan.model.clone(),
        endpoint: if api.is_empty() {
            plan.endpoint.as_str()
        } else {
            api
        },
        prompt_tokens: plan.prompt_tokens,
        blocks: plan.hashes.len(),
        prepare_us: plan.prepare.as_micros() as u64,
        select_us: plan.select.as_micros() as u64,
        decision: plan.decision.clone(),
        class: flow.class.as_str(),
        queued_ms: flow.queued_ms,
        shed,
        migrations: Vec::new(),
    });
}

/// Holds a slot for the first attempt ([`TryOrder::next_replica`]), and the request's
/// [`Hold`] on its place in flight (keep it until the request ends: it is what tells flow
/// control who outranks whom). When nothing waits and a replica has room, that is all
/// (one atomic read and the hold's count). Else
/// the request waits in its tenant's flow queue ([`crate::flow::FlowGate::wait`]): 429
/// when the tenant's queue is full, 503 when the gateway's is, when the wait times out,
/// or when the TTFT objective cannot be met. An interactive request whose objective the
/// `warm` prediction already misses is shed at once. Nothing reaches a replica until a
/// slot is held. A request that gets no slot (refused, or its client gone while it
/// waited) takes back the work the policy counted for it
/// ([`crate::routing::Router::withdraw`]); one refused is in the decision log with why
/// (`shed`, under `who`: its request id and API), and not in the routing metrics.
pub(crate) async fn hold_slot(
    state: &AppState,
    order: &mut TryOrder,
    plan: &Plan,
    tenant: &Tenant,
    (flow, who): (&FlowRequest, (&http::HeaderValue, &'static str)),
) -> Result<(Slot, Hold), GatewayError> {
    let mut unsent = Unsent {
        state,
        plan,
        armed: true,
    };
    let held = wait_for_slot(state, order, plan, tenant, flow).await;
    unsent.armed = held.is_err();
    if let Err(e) = &held {
        let waited = FlowRequest {
            queued_ms: plan.decided.elapsed().as_millis() as u64,
            ..*flow
        };
        log_entry(state, plan, tenant, who, &waited, Some(e.code()));
    }
    held
}

/// Withdraws its plan's decision when dropped armed: before the request held a slot.
struct Unsent<'a> {
    state: &'a AppState,
    plan: &'a Plan,
    armed: bool,
}

impl Drop for Unsent<'_> {
    fn drop(&mut self) {
        if self.armed {
            let now = self.state.millis_at(Instant::now());
            self.state.router.withdraw(&self.plan.decision, now);
        }
    }
}

async fn wait_for_slot(
    state: &AppState,
    order: &mut TryOrder,
    plan: &Plan,
    tenant: &Tenant,
    flow: &FlowRequest,
) -> Result<(Slot, Hold), GatewayError> {
    let cfg = state.config();
    let predicted_ttft_ms = predicted_ttft_ms(plan);
    let ask = Ask {
        tenant,
        model: &plan.model,
        flow,
        cost: prefill_cost(
            plan.prompt_tokens,
            plan.decision.predicted_cached_blocks * plan.block_size.0,
            cfg.admission.flow.cached_token_cost,
        ),
        predicted_ttft_ms,
        decided: plan.decided,
    };
    if flow.class == Class::Interactive && flow.objective_ms.is_some_and(|o| predicted_ttft_ms > o)
    {
        return Err(flow_wait::unmeetable(state, &ask));
    }
    if state.queued.load(Ordering::Acquire) == 0 {
        let max = cfg.admission.max_in_flight_per_replica;
        if let Some(slot) = order.next_replica(&state.registry, max, plan.decided) {
            let hold = state
                .flow
                .hold(&plan.model, &tenant.id, tenant.flow.weight, flow.class);
            return Ok((slot, hold));
        }
    }
    flow_wait::wait(state, order, ask).await
}

/// The `warm` policy's predicted time to first token on the chosen replica, whole
/// milliseconds (0 under another policy: no prediction, so no shedding at arrival).
fn predicted_ttft_ms(plan: &Plan) -> u64 {
    let d = &plan.decision;
    if d.explanation.policy != "warm" {
        return 0;
    }
    d.explanation
        .candidate(d.replica)
        .map_or(0, |c| c.cost_ms.max(0.0).ceil() as u64)
}
