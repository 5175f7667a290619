//! The request phase: routing table, framing and size checks, authentication, the bounded
//! body read, parsing, tenant limits, the routing plan and admission. Everything here is
//! decided before any byte goes to a replica.

use crate::error::GatewayError;
use crate::gather::Gathered;
use crate::limits;
use crate::plan;
use crate::proxy::RequestCtx;
use crate::request::{self, Endpoint};
use crate::respond;
use crate::response::ResponseTracker;
use crate::state::AppState;
use crate::tenants::Tenant;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, TRANSFER_ENCODING, UPGRADE};
use pingora_proxy::Session;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the request phase concluded.
pub enum Intake {
    /// Forward to the planned replica.
    Forward,
    /// Already answered locally with this status.
    Answered(u16),
}

/// Runs the request phase; on `Intake::Forward` the ctx holds the plan and a slot.
pub async fn run(
    state: &AppState,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> pingora_error::Result<Intake> {
    match admit(state, session, ctx).await {
        Ok(Some(status)) => Ok(Intake::Answered(status)),
        Ok(None) => Ok(Intake::Forward),
        Err(e) => {
            if let GatewayError::RateLimited { kind, .. } = &e {
                let tenant = ctx.tenant.as_ref().map_or("", |t| &*t.id);
                state
                    .metrics
                    .limit_rejections
                    .with_label_values(&[tenant, kind.as_str()])
                    .inc();
            }
            // A body we did not read cannot be trusted to be drained: close after answering.
            let close =
                e.closes_connection() || (ctx.body_len.is_none() && !session.is_body_empty());
            respond::error(
                session,
                &e,
                &ctx.rate_headers,
                &ctx.request_id.header,
                close,
            )
            .await?;
            ctx.error_code = Some(e.code());
            Ok(Intake::Answered(e.status()))
        }
    }
}

/// Checks size and framing; returns the `Authorization` value, found in the same pass.
fn check_framing(
    session: &Session,
    max_body: usize,
    max_header: usize,
) -> Result<Option<&[u8]>, GatewayError> {
    let req = session.req_header();
    let uri_bytes = req
        .uri
        .path_and_query()
        .map_or(req.uri.path().len(), |pq| pq.as_str().len())
        + req.uri.scheme_str().map_or(0, |s| s.len() + 3)
        + req.uri.authority().map_or(0, |a| a.as_str().len());
    // One pass over the headers: their size, and the framing ones (standard names compare
    // as enum tags, so this costs less than hashing each name for a map lookup).
    let mut header_bytes = uri_bytes;
    let (mut cl, mut cl_count, mut te, mut te_count, mut upgrade) = (None, 0, None, 0, false);
    let (mut authorization, mut authorization_count) = (None, 0);
    for (k, v) in &req.headers {
        header_bytes += k.as_str().len() + v.len() + 4;
        if k == CONTENT_LENGTH {
            cl_count += 1;
            cl = cl.or(Some(v));
        } else if k == TRANSFER_ENCODING {
            te_count += 1;
            te = te.or(Some(v));
        } else if k == UPGRADE {
            upgrade = true;
        } else if k == AUTHORIZATION {
            authorization_count += 1;
            authorization = authorization.or(Some(v.as_bytes()));
        }
    }
    if header_bytes > max_header {
        return Err(GatewayError::HeadersTooLarge { limit: max_header });
    }
    // Pingora drops Content-Length when Transfer-Encoding is present, so look at the raw
    // header block for the smuggling shape.
    let raw_cl = te_count > 0 && raw_has_content_length(&session.as_downstream().to_h1_raw());
    if (cl_count > 0 || raw_cl) && te_count > 0 {
        return Err(GatewayError::AmbiguousFraming(
            "both Content-Length and Transfer-Encoding",
        ));
    }
    if cl_count > 1 {
        return Err(GatewayError::AmbiguousFraming("duplicate Content-Length"));
    }
    if te_count > 1 || te.is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked")) {
        return Err(GatewayError::AmbiguousFraming(
            "unsupported Transfer-Encoding",
        ));
    }
    if let Some(v) = cl {
        let s = v.as_bytes();
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return Err(GatewayError::AmbiguousFraming("invalid Content-Length"));
        }
        // All digits, so valid UTF-8; too many digits to parse is too large.
        let n = std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.parse::<usize>().ok());
        if n.is_none_or(|n| n > max_body) {
            return Err(GatewayError::BodyTooLarge { limit: max_body });
        }
    }
    if upgrade {
        return Err(GatewayError::BadRequest(
            "protocol upgrades are not supported".into(),
        ));
    }
    // Two keys are two tenants to choose between (a hop in front may pick the other one).
    if authorization_count > 1 {
        return Err(GatewayError::BadRequest(
            "more than one Authorization header".into(),
        ));
    }
    // A key in the URL ends up in access logs, here and at every hop after; it is refused
    // rather than forwarded.
    if req.uri.query().is_some_and(has_key_parameter) {
        return Err(GatewayError::BadRequest(
            "API keys belong in the Authorization header, never in the URL".into(),
        ));
    }
    Ok(authorization)
}

/// Whether a query string has a parameter named like a credential (`api_key`, `api-key`,
/// `key`, `access_token`, ..., any case).
fn has_key_parameter(query: &str) -> bool {
    const NAMES: [&str; 7] = [
        "api_key",
        "apikey",
        "key",
        "access_token",
        "token",
        "authorization",
        "openai_api_key",
    ];
    // `-` reads as `_`, letters in any case.
    let same = |a: u8, b: u8| a.eq_ignore_ascii_case(&b) || (a, b) == (b'_', b'-');
    query.split('&').any(|pair| {
        let name = pair.split_once('=').map_or(pair, |(n, _)| n).as_bytes();
        NAMES
            .iter()
            .any(|n| n.len() == name.len() && n.bytes().zip(name.iter()).all(|(a, &b)| same(a, b)))
    })
}

/// Whether a raw HTTP/1 header block has a `Content-Length` line.
fn raw_has_content_length(raw: &[u8]) -> bool {
    raw.split(|&b| b == b'\n')
        .any(|line| line.len() >= 15 && line[..15].eq_ignore_ascii_case(b"content-length:"))
}

/// The whole request body, at most `max` bytes, within `timeout`. A body that arrives in
/// one chunk (the usual case) is returned as that chunk, not copied.
async fn read_body(
    session: &mut Session,
    max: usize,
    timeout: Duration,
) -> Result<bytes::Bytes, GatewayError> {
    session.enable_retry_buffering();
    // Read the clock only once a read has to wait (a small body usually arrives with the
    // header): the deadline counts from then.
    let mut deadline = None;
    let mut body = Gathered::default();
    loop {
        let read = match read_now(session) {
            Some(read) => read,
            None => {
                let now = Instant::now();
                let left = deadline
                    .get_or_insert(now + timeout)
                    .saturating_duration_since(now);
                tokio::time::timeout(left, session.read_request_body())
                    .await
                    .map_err(|_| GatewayError::ClientTimeout)?
            }
        };
        match read {
            Err(e) => {
                return Err(GatewayError::InvalidBody(format!(
                    "cannot read the body: {e}"
                )))
            }
            Ok(None) => return Ok(body.into_bytes()),
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(GatewayError::BodyTooLarge { limit: max });
                }
                // From a second chunk on, one buffer sized from Content-Length (already
                // checked against `max`) when there is one.
                body.push(chunk, || {
                    session
                        .req_header()
                        .headers
                        .get(CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<usize>().ok())
                        .map_or(0, |n| n.min(max))
                });
                // A Content-Length body is complete once that many bytes are in: no
                // further read (it would only answer "no more body").
                if session.is_body_done() {
                    return Ok(body.into_bytes());
                }
            }
        }
    }
}

/// One body read if it completes without waiting (a small body usually arrives with the
/// header, already buffered); `None` when it would wait, so the caller arms the deadline
/// timer only then. Dropping the pending read is safe: it consumed nothing (Pingora's own
/// proxy loop cancels body reads the same way inside `select!`).
fn read_now(session: &mut Session) -> Option<pingora_error::Result<Option<bytes::Bytes>>> {
    let mut read = std::pin::pin!(session.read_request_body());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match read.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(r) => Some(r),
        std::task::Poll::Pending => None,
    }
}

/// `GET /ready`: 200 once at least one registered replica is routable (healthy, not
/// draining, its model known), else 503, so supervisors and scripts wait for a gateway that
/// can serve rather than one that merely listens.
fn readiness(state: &AppState) -> (u16, &'static [u8]) {
    let now = std::time::Instant::now();
    let ready = state.registry.all().iter().any(|r| r.routable(now));
    if ready {
        (200, b"{\"status\":\"ready\"}")
    } else {
        (503, b"{\"status\":\"no_routable_replica\"}")
    }
}

/// `Ok(Some(status))`: answered locally; `Ok(None)`: forward.
async fn admit(
    state: &AppState,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Option<u16>, GatewayError> {
    let cfg = state.config();
    let req = session.req_header();
    let endpoint = match (req.method.as_str(), req.uri.path()) {
        ("POST", "/v1/chat/completions") => Some(Endpoint::Chat),
        ("POST", "/v1/completions") => Some(Endpoint::Completions),
        ("GET", "/v1/models") => None,
        ("GET", "/health") => {
            ctx.control = true;
            let _ = respond::json(session, 200, b"{\"status\":\"ok\"}".to_vec(), &[], false).await;
            return Ok(Some(200));
        }
        ("GET", "/ready") => {
            ctx.control = true;
            let (status, body) = readiness(state);
            let _ = respond::json(session, status, body.to_vec(), &[], false).await;
            return Ok(Some(status));
        }
        (method, path) => {
            return Err(GatewayError::NotFound {
                method: method.to_string(),
                path: path.to_string(),
            })
        }
    };
    let authorization = check_framing(
        session,
        cfg.limits.max_body_bytes,
        cfg.limits.max_header_bytes,
    )?;
    let tenant = state.tenants().authenticate(authorization)?;
    ctx.tenant = Some(tenant.clone());
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
    let body = read_body(
        session,
        cfg.limits.max_body_bytes,
        Duration::from_millis(cfg.timeouts.client_read_ms),
    )
    .await?;
    // The body limit (at most 64 KiB, `config::MAX_BODY_BYTES_CEILING`) fits a u32.
    ctx.body_len = Some(u32::try_from(body.len()).unwrap_or(u32::MAX));
    decide(state, ctx, &tenant, endpoint, &body).await?;
    Ok(None)
}

/// Everything after the body is read, in this order: parse, tokenize and hash, tenant
/// limits (reserve prompt + completion tokens), route, admission (an in-flight slot), and
/// only then record the routing decision, so a request rejected by its limits (429) or shed
/// (503) is never counted or logged as routed. On `Ok` the ctx holds the plan and a slot.
pub async fn decide(
    state: &AppState,
    ctx: &mut RequestCtx,
    tenant: &Arc<Tenant>,
    endpoint: Endpoint,
    body: &[u8],
) -> Result<(), GatewayError> {
    let cfg = state.config();
    let parsed = request::parse(endpoint, body)?;
    let model: Arc<str> = Arc::from(&*parsed.model);
    ctx.model = model.clone();
    let now = Instant::now();
    let prepared = plan::prepare(state, tenant, &parsed, now)?;
    let max_tokens = u64::from(parsed.max_tokens.unwrap_or(cfg.limits.default_max_tokens));
    let reserve = u64::from(prepared.prompt_tokens) + max_tokens * u64::from(parsed.n);
    let (permit, rate_headers) = match limits::admit(tenant, reserve, now) {
        Ok(ok) => ok,
        Err((e, h)) => {
            ctx.rate_headers = h.headers;
            return Err(e);
        }
    };
    ctx.rate_headers = rate_headers.headers;
    ctx.permit = Some(permit);
    let mut plan = plan::route(state, prepared, endpoint, &parsed, model)?;
    let slot = plan::admit(state, &mut plan).await?;
    plan::record(state, &plan, tenant, &ctx.request_id.header);
    let plan_decided = plan.decided;
    ctx.pending_slot = Some(slot);
    ctx.tracker = Some(ResponseTracker::new(plan.stream));
    ctx.plan = Some(plan);
    state.retry_budget.record_request(plan_decided);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, TenantConfig, TenantLimits};
    use crate::replicas::ReplicaAddr;
    use crate::tenants::hash_key;
    use crate::tokenize::CachedTokenizer;
    use router_policy::{BlockSize, CheckpointId};
    use warmpath_protocol::replica_api::ReplicaInfo;
    use warmpath_text::bytelevel::chatml_bpe_spec as byte_level_spec;

    #[test]
    fn credential_parameters_are_found_in_any_spelling() {
        for q in [
            "api_key=sk-1",
            "a=1&API-KEY=x",
            "key",
            "x=1&access_token=t&y=2",
            "Token=",
        ] {
            assert!(has_key_parameter(q), "{q}");
        }
        for q in [
            "api-version=2024-02-01",
            "keys=1",
            "monkey=1",
            "x=api_key",
            "",
        ] {
            assert!(!has_key_parameter(q), "{q}");
        }
    }

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
        }];
        c.admission.max_in_flight_per_replica = max_in_flight;
        c.admission.queue_timeout_ms = 20;
        let state = AppState::new(c, rt.handle().clone());
        let tok = CachedTokenizer::new(&byte_level_spec(), 64, 1).unwrap();
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new("m@1"),
            block_size: BlockSize(16),
            hash_scheme: router_policy::SCHEME_VERSION,
            capacity_blocks: 1 << 16,
            max_context: 1 << 16,
            region: None,
            device: "cpu".into(),
        };
        let addr = ReplicaAddr::parse("http://127.0.0.1:9").unwrap();
        state.registry.insert(addr, info, Arc::new(tok)).unwrap();
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
            .all(|c| c.plan.is_some() && c.pending_slot.is_some()));
        let log = state.router.recent(100);
        assert_eq!(
            log.len(),
            2,
            "only admitted requests are in the decision log"
        );
        let ids: Vec<&str> = ok.iter().map(|c| c.request_id.text()).collect();
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

        // One slot per replica: the second request is shed (503) after routing, unrecorded.
        let state = self::state(&rt, TenantLimits::default(), 1);
        let (ok, rejected) = run(&state, &rt, 2);
        assert_eq!((ok.len(), rejected.len()), (1, 1));
        assert!(matches!(rejected[0], GatewayError::Overloaded { .. }));
        assert_eq!(state.router.recent(100).len(), 1);
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
            readiness(&state).0,
            200,
            "a fresh healthy replica is routable"
        );
        for r in state.registry.all() {
            r.draining.store(true, std::sync::atomic::Ordering::Release);
        }
        let (status, body) = readiness(&state);
        assert_eq!(status, 503, "every replica draining: not ready");
        assert!(std::str::from_utf8(body)
            .unwrap()
            .contains("no_routable_replica"));
        let empty = AppState::new(Config::default(), rt.handle().clone());
        assert_eq!(readiness(&empty).0, 503, "no replica registered: not ready");
    }
}
