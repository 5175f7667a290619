//! Read: what the request asks for (the route table), whether its framing and size are
//! acceptable (one pass over the headers, which also finds the API key), and the bounded
//! body read. Nothing here knows the tenant yet.

use crate::body::budget::BodyPermit;
use crate::body::gather::Gathered;
use crate::body::request::Endpoint;
use crate::config::PassthroughApi as Api;
use crate::error::GatewayError;
use crate::state::AppState;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, TRANSFER_ENCODING, UPGRADE};
use pingora_proxy::Session;
use std::future::Future;
use std::time::{Duration, Instant};

/// What a request asks for, from its method and path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A generation endpoint, forwarded to a replica.
    Generate(Endpoint),
    /// `POST /v1/messages`: Anthropic's Messages API, translated to a chat
    /// (`crate::api::messages`).
    Messages,
    /// `POST /v1/responses`: translated to a chat completion and back
    /// (`crate::api::responses`).
    Responses,
    /// `GET /v1/models`, answered by the gateway for the tenant.
    Models,
    /// `GET /health`: the gateway process is up.
    Health,
    /// `GET /ready`: a replica is routable.
    Ready,
}

/// The route table; anything else is a 404.
pub(crate) fn target(session: &Session) -> Result<Target, GatewayError> {
    let req = session.req_header();
    Ok(match (req.method.as_str(), req.uri.path()) {
        ("POST", "/v1/chat/completions") => Target::Generate(Endpoint::Chat),
        ("POST", "/v1/completions") => Target::Generate(Endpoint::Completions),
        ("POST", crate::api::messages::PATH) => Target::Messages,
        ("POST", "/v1/embeddings") => Target::Generate(Endpoint::Passthrough(Api::Embeddings)),
        ("POST", "/tokenize" | "/v1/tokenize") => {
            Target::Generate(Endpoint::Passthrough(Api::Tokenize))
        }
        ("POST", "/detokenize" | "/v1/detokenize") => {
            Target::Generate(Endpoint::Passthrough(Api::Detokenize))
        }
        ("POST", "/v1/responses") => Target::Responses,
        ("GET", "/v1/models") => Target::Models,
        ("GET", "/health") => Target::Health,
        ("GET", "/ready") => Target::Ready,
        (method, path) => {
            return Err(GatewayError::NotFound {
                method: method.to_string(),
                path: path.to_string(),
            })
        }
    })
}

/// Checks size and framing; returns the `Authorization` value, found in the same pass.
pub(crate) fn check_framing(
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

/// This request's share of the gateway's in-flight body budget
/// (`limits.max_inflight_body_bytes`), taken before its body is read: its `Content-Length`
/// (413 at once past `limits.max_body_bytes`), or nothing yet for a body without one
/// ([`read_body`] grows it as the body arrives). 503 when the budget has no room.
pub(crate) fn take_body_budget(
    state: &AppState,
    session: &Session,
) -> Result<BodyPermit, GatewayError> {
    let limits = &state.config().limits;
    let len = session
        .req_header()
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if len > limits.max_body_bytes {
        return Err(GatewayError::BodyTooLarge {
            limit: limits.max_body_bytes,
        });
    }
    state
        .bodies
        .try_take(len, limits.max_inflight_body_bytes)
        .ok_or(GatewayError::Overloaded {
            retry_after: Duration::from_secs(1),
        })
}

/// The whole request body, at most `max` bytes, within `timeout`, holding its bytes in
/// `budget` (the request's permit and the gateway's limit). A body that arrives in one
/// chunk (the usual case) is returned as that chunk, not copied.
pub(crate) async fn read_body(
    session: &mut Session,
    max: usize,
    timeout: Duration,
    budget: (&mut BodyPermit, usize),
) -> Result<bytes::Bytes, GatewayError> {
    let (permit, limit) = budget;
    // No copy into Pingora's retry buffer (64 KiB at most): the caller keeps the body and
    // hands it to every attempt (`super::send::body`, `vendor/README.md`).
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
                if !permit.grow_to(body.len() + chunk.len(), limit) {
                    return Err(GatewayError::Overloaded {
                        retry_after: Duration::from_secs(1),
                    });
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
/// can serve rather than one that merely listens. With shared state and authentication,
/// also 503 until the key store has been read once (every key is refused until then).
pub(crate) fn readiness(state: &AppState) -> (u16, &'static [u8]) {
    let unread = state
        .fleet
        .as_ref()
        .is_some_and(|f| f.key_view().stamp().is_none());
    if unread && state.config().auth.enabled {
        return (503, b"{\"status\":\"key_store_unavailable\"}");
    }
    let now = std::time::Instant::now();
    let ready = state.registry.all().iter().any(|r| r.routable(now));
    if ready {
        (200, b"{\"status\":\"ready\"}")
    } else {
        (503, b"{\"status\":\"no_routable_replica\"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
