//! Per-replica background tasks: follow the KV event stream (a Warmpath replica's: resume,
//! resnapshot on a gap or a new epoch), poll its load ([`super::load`]) and probe its
//! health ([`super::probe`]).

use super::client;
use crate::body::lines::LineSplitter;
use crate::config::EngineKind;
use crate::replicas::Replica;
use crate::state::AppState;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use warmpath_core::{KvStreamMessage, Observation};
use warmpath_protocol::replica_api::PATH_KV_EVENTS;

/// Starts the follower, poller and prober of `r` on the control-plane runtime: for a
/// Warmpath replica its own event stream and load endpoint; for another engine its ZeroMQ
/// KV events when configured and its Prometheus metrics when scraped (otherwise the
/// gateway's own in-flight counts stand in for its load).
pub(crate) fn spawn_all(state: &Arc<AppState>, r: Arc<Replica>) {
    if r.upstream.engine == EngineKind::Warmpath {
        state.control.spawn(follow_events(state.clone(), r.clone()));
        state
            .control
            .spawn(super::load::poll_load(state.clone(), r.clone()));
    } else {
        if r.upstream.kv_events.is_some() {
            state
                .control
                .spawn(super::zmq::follow_zmq(state.clone(), r.clone()));
        }
        if r.upstream.scrape_metrics {
            state
                .control
                .spawn(super::load::poll_metrics(state.clone(), r.clone()));
        }
    }
    state.control.spawn(super::probe::probe(state.clone(), r));
}

fn gone(r: &Replica) -> bool {
    r.removed.load(Ordering::Acquire)
}

/// How one connection of the event stream ended.
enum StreamEnd {
    /// Closed or failed: reconnect and resume.
    Resume,
    /// Lost our place (gap or new epoch): reconnect for a fresh snapshot.
    Resnapshot,
    /// The replica was removed.
    Stop,
}

async fn follow_events(state: Arc<AppState>, r: Arc<Replica>) {
    let mut fresh = false;
    let mut backoff = Duration::from_millis(50);
    while !gone(&r) {
        let path = match (fresh, state.router.cursor(r.id)) {
            (false, Some((epoch, seq))) => {
                format!("{PATH_KV_EVENTS}?epoch={}&from_seq={}", epoch.0, seq.0)
            }
            _ => PATH_KV_EVENTS.to_string(),
        };
        fresh = false;
        let opened = tokio::time::timeout(
            Duration::from_secs(2),
            client::open(&r.addr.http(), http::Method::GET, &path, None),
        )
        .await;
        match opened {
            Ok(Ok((200, body))) => {
                let opened_at = std::time::Instant::now();
                let end = read_stream(&state, &r, body).await;
                // A stream that lived a while resumes quickly; one that keeps ending at once
                // (a server that answers with a snapshot and closes) backs off like a failure
                // instead of reconnecting twenty times a second.
                if opened_at.elapsed() >= Duration::from_secs(1) {
                    backoff = Duration::from_millis(50);
                }
                match end {
                    StreamEnd::Stop => return,
                    StreamEnd::Resnapshot => fresh = true,
                    StreamEnd::Resume => {}
                }
            }
            Ok(Ok((status, _))) => {
                tracing::warn!(replica = %r.id, status, "kv event stream refused")
            }
            Ok(Err(e)) => {
                tracing::debug!(replica = %r.id, error = %e, "kv event stream connect failed")
            }
            Err(_) => tracing::debug!(replica = %r.id, "kv event stream connect timed out"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn read_stream(state: &AppState, r: &Replica, mut body: client::BodyStream) -> StreamEnd {
    let mut lines = LineSplitter::default();
    loop {
        if gone(r) {
            return StreamEnd::Stop;
        }
        let chunk = match tokio::time::timeout(Duration::from_millis(500), body.next_chunk()).await
        {
            Err(_) => continue,
            Ok(Ok(Some(c))) => c,
            Ok(Ok(None)) => return StreamEnd::Resume,
            Ok(Err(e)) => {
                tracing::debug!(replica = %r.id, error = %e, "kv event stream broke");
                return StreamEnd::Resume;
            }
        };
        for line in lines.push(&chunk) {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let msg: KvStreamMessage = match serde_json::from_slice(&line) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(replica = %r.id, error = %e, "bad kv event line");
                    continue;
                }
            };
            let obs = state.router.apply_message(r.id, &msg);
            let label = match obs {
                Observation::Apply => "apply",
                Observation::Duplicate => "duplicate",
                Observation::Gap { .. } => "gap",
                Observation::NewEpoch => "new_epoch",
            };
            state.metrics.kv_events.with_label_values(&[label]).inc();
            if matches!(obs, Observation::Gap { .. } | Observation::NewEpoch) {
                tracing::info!(replica = %r.id, observation = label, "kv event stream resync");
                return StreamEnd::Resnapshot;
            }
        }
    }
}
