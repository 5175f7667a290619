//! The request phase, in the order it runs: read (route table, framing, the API key's
//! header), authenticate, the bounded body read, then [`decide`]: parse, prepare (tokenize
//! and hash), reserve against the tenant's limits, route, hold a slot, record. Everything
//! is decided before any byte goes to a replica; a request answered here (an error, a
//! model list, a health check) never reaches one.

use super::admit;
use super::bound::bounded_body;
use super::ctx::RequestCtx;
use super::prepare::prepare;
use super::read::{self, Target};
use super::respond;
use super::route::{hold_slot, record, route};
use crate::api::messages;
use crate::body::request::{self, Endpoint};
use crate::body::response::ResponseTracker;
use crate::error::GatewayError;
use crate::state::AppState;
use crate::tenants::Tenant;
use crate::tokenize::gate::off_loop;
use pingora_proxy::Session;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the request phase concluded.
pub(crate) enum Verdict {
    /// Forward to the planned replica.
    Forward,
    /// Already answered locally with this status.
    Answered(u16),
}

/// Runs the request phase; on [`Verdict::Forward`] the ctx holds the plan and a slot. An
/// error is answered here (OpenAI error JSON) and recorded in the ctx's [`super::ctx::Seen`].
pub(crate) async fn run(
    state: &AppState,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> pingora_error::Result<Verdict> {
    match intake(state, session, ctx).await {
        Ok(Some(status)) => Ok(Verdict::Answered(status)),
        Ok(None) => Ok(Verdict::Forward),
        Err(e) => {
            if let GatewayError::RateLimited { kind, .. } = &e {
                let tenant = ctx.admission.tenant.as_ref().map_or("", |t| &*t.id);
                state
                    .metrics
                    .limit_rejections
                    .with_label_values(&[tenant, kind.as_str()])
                    .inc();
            }
            // A body we did not read cannot be trusted to be drained: close after answering.
            let close =
                e.closes_connection() || (ctx.read.body_len.is_none() && !session.is_body_empty());
            respond::error(
                session,
                &e,
                respond::error_body(ctx, &e),
                &ctx.admission.rate_headers,
                &ctx.id.header,
                close,
            )
            .await?;
            ctx.seen.error_code = Some(e.code());
            Ok(Verdict::Answered(e.status()))
        }
    }
}

/// `Ok(Some(status))`: answered locally; `Ok(None)`: forward.
async fn intake(
    state: &AppState,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Option<u16>, GatewayError> {
    let cfg = state.config();
    let (endpoint, responses) = match read::target(session)? {
        Target::Generate(endpoint) => {
            ctx.read.api = endpoint.as_str();
            (Some(endpoint), false)
        }
        Target::Messages => {
            ctx.read.api = "messages";
            ctx.messages = Some(Box::default());
            (Some(Endpoint::Chat), false)
        }
        Target::Responses => {
            ctx.read.api = "responses";
            (Some(Endpoint::Chat), true)
        }
        Target::Models => (None, false),
        Target::Health => {
            ctx.read.control = true;
            let _ = respond::json(session, 200, b"{\"status\":\"ok\"}".to_vec(), &[], false).await;
            return Ok(Some(200));
        }
        Target::Ready => {
            ctx.read.control = true;
            let (status, body) = read::readiness(state);
            let _ = respond::json(session, status, body.to_vec(), &[], false).await;
            return Ok(Some(status));
        }
    };
    let authorization = read::check_framing(
        session,
        cfg.limits.max_body_bytes,
        cfg.limits.max_header_bytes,
    )?;
    let authorization = match &ctx.messages {
        Some(_) => messages::auth::authorization(&session.req_header().headers, authorization)?,
        None => authorization.map(std::borrow::Cow::Borrowed),
    };
    let tenant = admit::authenticate(state, &mut ctx.admission, authorization.as_deref())?;
    ctx.admission.flow =
        crate::flow::FlowRequest::classify(&tenant, &session.req_header().headers)?;
    let Some(endpoint) = endpoint else {
        let models: Vec<String> = state
            .registry
            .models()
            .into_iter()
            .filter(|m| tenant.allows(m))
            .collect();
        let _ = respond::json(session, 200, respond::models_body(&models), &[], false).await;
        return Ok(Some(200));
    };
    let budget = ctx
        .read
        .body_budget
        .insert(read::take_body_budget(state, session)?);
    let body = read::read_body(
        session,
        cfg.limits.max_body_bytes,
        Duration::from_millis(cfg.timeouts.client_read_ms),
        (budget, cfg.limits.max_inflight_body_bytes),
    )
    .await?;
    // The body limit (at most 1 GiB, `config::MAX_BODY_BYTES_CEILING`) fits a u32.
    ctx.read.body_len = Some(u32::try_from(body.len()).unwrap_or(u32::MAX));
    // A Messages or Responses request goes on as its chat equivalent (`crate::api`).
    let body = match (ctx.messages.as_deref_mut(), responses) {
        (Some(m), _) => {
            let (chat, call) = messages::to_chat(&body)?;
            m.call = call;
            bytes::Bytes::from(chat)
        }
        (None, true) => super::responses::open(state, ctx, &body).await?,
        (None, false) => body,
    };
    decide(state, ctx, &tenant, endpoint, &body).await?;
    if let (Some(m), Some(plan)) = (ctx.messages.as_deref_mut(), &ctx.plan) {
        m.prompt_tokens = plan.prompt_tokens;
    }
    // Kept for every attempt (`super::send::body`), unless `decide` bounded it.
    let sent = ctx.read.upstream_body.get_or_insert(body).clone();
    if !responses {
        super::migrate::arm(state, ctx, sent);
    }
    Ok(None)
}

/// Everything after the body is read, in this order: parse, tokenize and hash, tenant
/// limits (reserve prompt + completion tokens), route, admission (an in-flight slot), and
/// only then record the routing decision, so a request rejected by its limits (429) or shed
/// (503) is never counted or logged as routed. On `Ok` the ctx holds the plan and a slot.
pub(crate) async fn decide(
    state: &AppState,
    ctx: &mut RequestCtx,
    tenant: &Arc<Tenant>,
    endpoint: Endpoint,
    body: &[u8],
) -> Result<(), GatewayError> {
    if let Endpoint::Passthrough(api) = endpoint {
        return super::passthrough::decide(state, ctx, tenant, api, body).await;
    }
    let cfg = state.config();
    // A long body is parsed and tokenized off the event loop, behind the gate that bounds
    // how many are at once (`crate::tokenize::gate`).
    let long = state.long_prompts.enter(body.len()).await;
    let parsed = off_loop(long.is_some(), || request::parse(endpoint, body))?;
    let model: Arc<str> = Arc::from(&*parsed.model);
    ctx.read.model = model.clone();
    let now = Instant::now();
    let prepared = off_loop(long.is_some(), || prepare(state, tenant, &parsed, now))?;
    drop(long);
    let default_max_tokens = cfg.limits.default_max_tokens;
    let max_tokens = u64::from(parsed.max_tokens.unwrap_or(default_max_tokens));
    let tokens = u64::from(prepared.prompt_tokens) + max_tokens * u64::from(parsed.n);
    admit::reserve(state, &mut ctx.admission, tenant, tokens, now).await?;
    if parsed.max_tokens.is_none() {
        // The replica must stop where the reservation does.
        ctx.read.upstream_body = bounded_body(body, endpoint, default_max_tokens);
    }
    if prepared
        .replicas
        .first()
        .is_some_and(|r| r.upstream.namespace.salt)
    {
        // vLLM's `cache_salt`: the tenant's blocks stay the tenant's (`super::salt`).
        let kept = ctx.read.upstream_body.as_deref().unwrap_or(body);
        if let Some(salted) = super::salt::salted_body(kept, &tenant.salt) {
            ctx.read.upstream_body = Some(salted);
        }
    }
    let (mut plan, mut order) = route(state, tenant, prepared, endpoint, &parsed, model)?;
    super::responses::pin(state, ctx, &mut plan, &mut order);
    let who = (&ctx.id.header, ctx.read.api);
    let (slot, hold) =
        hold_slot(state, &mut order, &plan, tenant, (&ctx.admission.flow, who)).await?;
    ctx.admission.hold = Some(hold);
    let upstream = slot.replica();
    if let Some(adapter) = upstream.upstream.namespace.adapter(&plan.model) {
        // Its engine loads the adapter for this request: the next one for it goes there.
        upstream.adapters.sent(adapter, Instant::now());
    }
    if plan.prefill.is_none() {
        // In the routing history as soon as its replica is known (`send` records it again
        // per attempt): a request with the same prefix decided before this one reaches the
        // replica is predicted what the engine will give it (BENCHMARKS.md section 27).
        let now = state.millis_at(Instant::now());
        state
            .router
            .record_routed(slot.replica().id, &plan.hashes, now);
        ctx.attempts.recorded = Some(slot.replica().id);
    }
    ctx.admission.flow.queued_ms = plan.decided.elapsed().as_millis() as u64;
    record(
        state,
        &plan,
        tenant,
        &ctx.id.header,
        ctx.read.api,
        &ctx.admission.flow,
    );
    // The prompt's tokens served the hot-prefix history; the request does not keep them.
    plan.tokens = None;
    state.retry_budget.record_request(plan.decided);
    ctx.attempts.order = order;
    ctx.attempts.pending = Some(slot);
    ctx.seen.tracker = Some(ResponseTracker::new(plan.stream));
    ctx.plan = Some(plan);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, TenantConfig, TenantLimits};
    use crate::replicas::ReplicaAddr;
    use crate::tenants::hash_key;
    use crate::tokenize::CachedTokenizer;
    use warmpath_core::{BlockSize, CheckpointId};
    use warmpath_protocol::replica_api::ReplicaInfo;
    use warmpath_text::bytelevel::chatml_bpe_spec as byte_level_spec;

    fn state(
        rt: &tokio::runtime::Runtime,
        limits: TenantLimits,
        max_in_flight: u32,
    ) -> Arc<AppState> {
        let mut c = Config::default();
        c.auth.salt_secret = "0123456789abcdef-secret".into();
        c.tenants = vec![TenantConfig {
            id: "t".into(),
            api_key_sha256: vec![hash_key("k")],
            models: vec!["*".into()],
            limits,
            regions: Vec::new(),
            flow: Default::default(),
        }];
        c.admission.max_in_flight_per_replica = max_in_flight;
        c.admission.queue_timeout_ms = 20;
        let state = AppState::new(c, rt.handle().clone());
        let tok = CachedTokenizer::new(&byte_level_spec(), 64, 1).unwrap();
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new("m@1"),
            block_size: BlockSize(16),
            hash_scheme: warmpath_core::SCHEME_VERSION,
            capacity_blocks: 1 << 16,
            max_context: 1 << 16,
            region: None,
            device: "cpu".into(),
            role: Default::default(),
            kv_store_region: None,
        };
        let addr = ReplicaAddr::parse("http://127.0.0.1:9").unwrap();
        state
            .registry
            .insert(addr, info, Arc::new(tok.into()))
            .unwrap();
        state
    }

    fn decisions_counted(state: &AppState) -> u64 {
        let policy = state.router.policy_name();
        router_policy::Branch::ALL
            .iter()
            .map(|b| state.metrics.routing_branch(policy, *b).get())
            .sum()
    }

    const BODY: &[u8] = br#"{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"a prompt long enough for two blocks of the byte tokenizer"}]}"#;

    /// Runs `n` requests, keeping every admitted context (and so its slot) alive.
    fn run(
        state: &Arc<AppState>,
        rt: &tokio::runtime::Runtime,
        n: usize,
    ) -> (Vec<RequestCtx>, Vec<GatewayError>) {
        let tenant = state.tenants().authenticate(Some(b"Bearer k")).unwrap();
        let (mut ok, mut rejected) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let mut ctx = RequestCtx::new();
            match rt.block_on(decide(state, &mut ctx, &tenant, Endpoint::Chat, BODY)) {
                Ok(()) => ok.push(ctx),
                Err(e) => rejected.push(e),
            }
        }
        (ok, rejected)
    }

    #[test]
    fn requests_rejected_by_limits_are_never_recorded_as_routed() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let limits = TenantLimits {
            requests_per_minute: 1,
            request_burst: 2,
            ..Default::default()
        };
        let state = state(&rt, limits, 64);
        let (ok, rejected) = run(&state, &rt, 5);
        assert_eq!(ok.len(), 2);
        assert_eq!(rejected.len(), 3);
        assert!(rejected
            .iter()
            .all(|e| matches!(e, GatewayError::RateLimited { .. })));
        assert!(ok
            .iter()
            .all(|c| c.plan.is_some() && c.attempts.pending.is_some()));
        let log = state.router.recent(100);
        assert_eq!(
            log.len(),
            2,
            "only admitted requests are in the decision log"
        );
        let ids: Vec<&str> = ok.iter().map(|c| c.id.text()).collect();
        assert!(log
            .iter()
            .all(|r| ids.contains(&r.request_id.to_str().unwrap())));
        assert_eq!(decisions_counted(&state), 2);
    }

    #[test]
    fn requests_over_the_token_limit_or_shed_are_never_recorded_as_routed() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Each request reserves its prompt plus 4 tokens: the limit fits two, not three.
        let probe = state(&rt, TenantLimits::default(), 64);
        let (ok, _) = run(&probe, &rt, 1);
        let reserve = u64::from(ok[0].plan.as_ref().unwrap().prompt_tokens) + 4;
        let limits = TenantLimits {
            tokens_per_minute: reserve * 5 / 2,
            ..Default::default()
        };
        let state = state(&rt, limits, 64);
        let (ok, rejected) = run(&state, &rt, 3);
        assert_eq!((ok.len(), rejected.len()), (2, 1));
        assert!(matches!(rejected[0], GatewayError::RateLimited { .. }));
        assert_eq!(state.router.recent(100).len(), 2);
        assert_eq!(decisions_counted(&state), 2);

        // One slot per replica: the second request is shed (503) after routing: not
        // counted as routed, and in the decision log only as shed, with why.
        let state = self::state(&rt, TenantLimits::default(), 1);
        let (ok, rejected) = run(&state, &rt, 2);
        assert_eq!((ok.len(), rejected.len()), (1, 1));
        assert!(matches!(rejected[0], GatewayError::Overloaded { .. }));
        let log = state.router.recent(100);
        let shed: Vec<_> = log.iter().map(|r| r.shed).collect();
        assert_eq!(shed, [None, Some("overloaded")]);
        assert_eq!(decisions_counted(&state), 1);
    }

    #[test]
    fn ready_only_while_a_replica_is_routable() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let state = state(&rt, TenantLimits::default(), 4);
        assert_eq!(
            read::readiness(&state).0,
            200,
            "a fresh healthy replica is routable"
        );
        for r in state.registry.all() {
            r.draining.store(true, std::sync::atomic::Ordering::Release);
        }
        let (status, body) = read::readiness(&state);
        assert_eq!(status, 503, "every replica draining: not ready");
        assert!(std::str::from_utf8(body)
            .unwrap()
            .contains("no_routable_replica"));
        let empty = AppState::new(Config::default(), rt.handle().clone());
        assert_eq!(
            read::readiness(&empty).0,
            503,
            "no replica registered: not ready"
        );
    }

    #[test]
    fn the_replica_gets_the_bound_that_was_reserved() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let limits = TenantLimits {
            tokens_per_minute: 1_000_000,
            ..Default::default()
        };
        let state = state(&rt, limits, 64);
        let tenant = state.tenants().authenticate(Some(b"Bearer k")).unwrap();
        let mut ctx = RequestCtx::new();
        rt.block_on(decide(&state, &mut ctx, &tenant, Endpoint::Chat, BODY))
            .unwrap();
        assert!(
            ctx.read.upstream_body.is_none(),
            "a bound given is forwarded as is"
        );
        let default = state.config().limits.default_max_tokens;
        for (endpoint, body) in [
            (
                Endpoint::Chat,
                &br#"{"model":"m","messages":[{"role":"user","content":"no bound"}]}"#[..],
            ),
            (
                Endpoint::Completions,
                br#"{"model":"m","prompt":"no bound","max_tokens":null}"#,
            ),
        ] {
            let mut ctx = RequestCtx::new();
            rt.block_on(decide(&state, &mut ctx, &tenant, endpoint, body))
                .unwrap();
            let forwarded = ctx.read.upstream_body.expect("a bound is added");
            let parsed = request::parse(endpoint, &forwarded).unwrap();
            assert_eq!(parsed.max_tokens, Some(default));
            assert_eq!(
                ctx.admission.permit.as_ref().unwrap().reserved(),
                u64::from(ctx.plan.as_ref().unwrap().prompt_tokens) + u64::from(default)
            );
        }
    }

    #[test]
    fn a_client_gone_before_the_response_header_is_charged_its_prompt() {
        use pingora_error::{Error, ErrorType};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let state = state(&rt, TenantLimits::default(), 64);
        let (mut ok, _) = run(&state, &rt, 1);
        let mut ctx = ok.pop().unwrap();
        let prompt = u64::from(ctx.plan.as_ref().unwrap().prompt_tokens);
        assert!(prompt > 0);
        let gone = Error::new(ErrorType::ConnectionClosed).into_down();
        let now = Instant::now();
        assert_eq!(
            super::super::finish::outcome(&ctx, Some(&gone), now).charged_tokens,
            0,
            "never sent upstream: nothing ran"
        );
        ctx.attempts.count = 1;
        assert_eq!(
            super::super::finish::outcome(&ctx, Some(&gone), now).charged_tokens,
            prompt,
            "sent upstream, the client left before the header: the prefill is charged"
        );
    }
}
