//! Stream migration: a stream whose replica fails after the first byte (a reset, an
//! error event, a stream cut short, or no bytes for `timeouts.idle_ms`) continues on the
//! next replica of the try order, and the client sees one stream.
//!
//! The replica tags each event with the tokens behind it ([`Transcript`]); on a failure
//! ([`on_failure`]) the same body goes to the next replica with those tokens and the
//! length of the text the client holds (`warmpath_continuation`), and Pingora's retry
//! loop sends it there. The new replica's header is not the client's (Pingora sends one
//! header per response), its events get the first stream's `id` and `created`, its usage
//! already counts the prompt once and the completion across the seam. At most
//! `retry.max_migrations` per request, each a budgeted retry.
//!
//! Other engines tag nothing: a chat stream of theirs that failed after text went out
//! continues by token ids on `/v1/completions` where the engine takes them
//! ([`completions`]), its stream read back as the chat's ([`translate`]).

mod completions;
mod sent;
pub(crate) mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_by_ids;
mod transcript;
mod translate;

use super::ctx::RequestCtx;
use crate::config::EngineKind;
use crate::state::AppState;
use bytes::Bytes;
use pingora_error::{Error, ErrorSource, ErrorType};
pub(crate) use state::Migration;
#[cfg(test)]
use transcript::Transcript;
use warmpath_protocol::continuation::{Continuation, FIELD};

/// Arms a routed stream for migration (`retry.max_migrations` above 0): keeps the body
/// it is forwarded with (`body`, the client's, unless the completion bound replaced it).
pub(crate) fn arm(state: &AppState, ctx: &mut RequestCtx, body: Bytes) {
    if !ctx.is_stream() || state.config().retry.max_migrations == 0 {
        return;
    }
    // Only a server that takes a token-id prompt can continue an untagged stream.
    let by_ids = ctx
        .attempts
        .pending
        .as_ref()
        .is_some_and(|s| completions::takes_token_prompts(state, s.replica()));
    let mut m = Migration::new(body);
    m.transcript.skip_text = !by_ids;
    ctx.migration = Some(Box::new(m));
}

/// The body of a continuation: `body` with [`FIELD`] as its first member.
pub(crate) fn continuation_body(body: &[u8], c: &Continuation) -> Option<Bytes> {
    let open = body.iter().position(|&b| b == b'{')?;
    let field = serde_json::to_vec(c).ok()?;
    let mut out = Vec::with_capacity(body.len() + field.len() + 32);
    out.extend_from_slice(&body[..=open]);
    out.push(b'"');
    out.extend_from_slice(FIELD.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(&field);
    let rest = body[open + 1..].trim_ascii_start();
    if !rest.starts_with(b"}") {
        out.push(b',');
    }
    out.extend_from_slice(&body[open + 1..]);
    Some(Bytes::from(out))
}

/// The error a stream's failure seen in its body becomes (an error event, an end
/// without `[DONE]`): the replica's fault, so the stream may migrate.
pub(crate) fn body_failure(why: &'static str) -> Box<Error> {
    Error::explain(ErrorType::Custom("upstream_stream_failed"), why).into_up()
}

/// A stream under way failed with `e`: `Ok` with the error set to retry when it
/// continues on another replica (its replica already held to its health), `Err(e)`
/// when it cannot (the usual failure path takes it).
pub(crate) fn on_failure(
    state: &AppState,
    ctx: &mut RequestCtx,
    mut e: Box<Error>,
) -> Result<Box<Error>, Box<Error>> {
    let Some(m) = ctx.migration.as_deref_mut() else {
        return Err(e);
    };
    if e.esource() != &ErrorSource::Upstream && !matches!(e.etype(), ErrorType::HTTPStatus(_)) {
        return Err(e);
    }
    if super::drain::DRAIN.is_cut() {
        // The gateway itself is ending its streams (shutdown): nowhere to continue.
        return Err(e);
    }
    if let Some(slot) = ctx.attempts.slot.take() {
        state.report(slot.replica(), false);
    }
    let cfg = state.config();
    let chat = ctx
        .plan
        .as_ref()
        .is_some_and(|p| p.endpoint == crate::body::request::Endpoint::Chat);
    let t = &m.transcript;
    // Text went out of an untagged chat stream: its continuation goes by token ids.
    let by_ids = !t.tagged && chat && (!t.text.is_empty() || t.not_text);
    let refused = if m.count >= cfg.retry.max_migrations {
        Some("limit")
    } else if t.ended {
        Some("finished")
    } else if !t.tagged && !chat && t.data_events > 0 {
        // Text went out and nothing says which tokens it was.
        Some("untagged")
    } else if ctx.attempts.order.done() {
        Some("no_replica")
    } else {
        None
    };
    let prompt = ctx.plan.as_ref().map_or(0, |p| u64::from(p.prompt_tokens));
    let mut refused = refused.or_else(|| (!m.transcript.splice()).then_some("unreadable"));
    let mut c = Continuation {
        tokens: m.transcript.tokens.clone(),
        text_bytes: m.transcript.text_bytes,
        rng_draws: None,
    };
    let mut carried = c.tokens.len();
    let body = match (refused, by_ids, ctx.attempts.replica.as_deref()) {
        (Some(_), _, _) => None,
        (None, true, Some(r)) => match completions::prepare(state, r, m, prompt) {
            Ok((body, resume, n)) => {
                m.resume = Some(resume);
                carried = n;
                c.text_bytes = m.transcript.text.len() as u64;
                Some(body)
            }
            Err(why) => {
                refused = Some(why);
                None
            }
        },
        (None, true, None) => None,
        (None, false, _) => {
            m.resume = None;
            continuation_body(m.body(), &c)
        }
    };
    let Some(body) = body else {
        let why = refused.unwrap_or("unreadable");
        m.refused = Some(why);
        tracing::warn!(request_id = ctx.id.text(), reason = why, error = %e, "stream not migrated");
        return Err(e);
    };
    m.begin(prompt + carried as u64);
    tracing::info!(
        request_id = ctx.id.text(),
        from = ctx.attempts.replica.as_ref().map_or("", |r| r.label.as_str()),
        tokens = carried,
        text_bytes = c.text_bytes,
        by_ids,
        migration = m.count,
        error = %e,
        "stream migrating"
    );
    state.router.note_seam(
        &ctx.id.header,
        crate::routing::Seam {
            from: ctx
                .attempts
                .replica
                .as_ref()
                .map_or_else(String::new, |r| r.label.clone()),
            error: e.etype().as_str(),
            tokens: carried,
            text_bytes: c.text_bytes,
        },
    );
    ctx.read.upstream_body = Some(body);
    e.set_retry(true);
    Ok(e)
}

/// Whether `engine` can continue a stream that carries tokens (only Warmpath replicas
/// read the continuation field; other engines continue by token ids: [`completions`]).
pub(crate) fn continues_exactly(engine: EngineKind) -> bool {
    engine == EngineKind::Warmpath
}
