//! Pre-warm: before a new checkpoint's replicas take their share of a rollout, replay the
//! old checkpoint's hottest prefixes to each of them as prefill-only requests (one token
//! generated), so the conversations that move find their prefixes cached.
//!
//! One task per rollout generation, however many callers ask for it (the admin call, a
//! reload, the fleet poller): [`start`] claims the generation before it spawns. A change
//! that stops the pre-warm (a replacement, an end, an abort) takes a new generation and the
//! old task stops at its next replay; a replay of the old generation that ends after that
//! is neither counted nor published. A rollout at 0% has nothing to pre-warm.
//! 1. wait until the new checkpoint has a routable replica serving the model;
//! 2. take the `top_n` hottest prefixes of the old checkpoint (`rollout::hot`), hottest
//!    first, and plan each prefix on every replica its tenant's residency allows
//!    ([`crate::residency::ReplayPins`]: the pin recorded with the prefix and the tenant's
//!    pin now; an unpinned tenant's prefixes go to every replica, a removed tenant's to
//!    none);
//! 3. replay them, `concurrency` at a time per replica, each under `timeout_ms`, as
//!    `POST /v1/completions {"prompt": [token ids], "max_tokens": 1}` with the tenant's cache
//!    salt (and `x-warmpath-kv-tier-off` where the replica's tier is outside the pin); a
//!    failure counts as done (the ramp must not stall on one bad replay) and is counted in
//!    `warmpath_rollout_prewarm_total{outcome="failed"}`.
//!
//! The share ramps with the fraction done ([`super::ModelRollout::share`]). Replicas of the
//! new checkpoint that join after the plan was made are not replayed to (their KV events
//! show them cold, and `warm` routes around that).

use super::hot::Replay;
use super::ModelRollout;
use crate::control::client;
use crate::headers::{CACHE_SALT, KV_TIER_OFF};
use crate::replicas::Replica;
use crate::residency::ReplayPins;
use crate::state::AppState;
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the task looks for the new checkpoint's replicas.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// Starts `m`'s pre-warm on the control runtime, if it wants one and its generation has
/// none yet.
pub(crate) fn start(state: &Arc<AppState>, m: Arc<ModelRollout>) {
    let Some(generation) = m.claim_prewarm() else {
        return;
    };
    let state = state.clone();
    state
        .control
        .clone()
        .spawn(async move { run(state, m, generation).await });
}

/// Publishes the progress when the rollout is shared and this gateway runs its pre-warm.
async fn publish(state: &AppState, m: &ModelRollout) {
    match super::record::publish_progress(state.fleet.as_ref(), m).await {
        Ok(true) => {}
        Ok(false) => tracing::debug!(model = %m.model, "rollout progress not taken by the store"),
        Err(e) => tracing::debug!(model = %m.model, error = %e, "rollout progress not shared"),
    }
}

fn stopped(m: &ModelRollout) {
    tracing::info!(model = %m.model, "rollout pre-warm stopped: the rollout changed");
}

async fn run(state: Arc<AppState>, m: Arc<ModelRollout>, generation: u64) {
    let (from, to) = m.checkpoints();
    let cfg = m.prewarm();
    let targets = loop {
        if m.generation() != generation {
            return stopped(&m);
        }
        let now = Instant::now();
        let targets: Vec<Arc<Replica>> = state
            .registry
            .all()
            .into_iter()
            .filter(|r| r.info.checkpoint == to && r.serves(&m.model) && r.routable(now))
            .collect();
        if !targets.is_empty() {
            break targets;
        }
        tokio::time::sleep(WAIT_POLL).await;
    };
    // Hottest first: the prefixes the most conversations share are warm soonest.
    let prefixes = with_pins(
        &state,
        state.rollouts.hot.top(&from, cfg.top_n, cfg.min_tokens),
    );
    // Residency: each replica gets the prefixes whose tenants may have data in its region.
    let targets: Vec<(Arc<Replica>, Vec<usize>)> = targets
        .into_iter()
        .map(|r| {
            let allowed = (0..prefixes.len())
                .filter(|&i| prefixes[i].1.allow(&r))
                .collect();
            (r, allowed)
        })
        .collect();
    let planned = targets.iter().map(|(_, a)| a.len() as u64).sum();
    let planned_here = m.update(generation, |p| {
        *p = super::Progress {
            started: true,
            planned,
            ..super::Progress::default()
        };
    });
    if !planned_here {
        return stopped(&m);
    }
    publish(&state, &m).await;
    tracing::info!(model = %m.model, %from, %to, prefixes = prefixes.len(),
        replicas = targets.len(), "rollout pre-warm started");
    let t0 = Instant::now();
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let prefixes = Arc::new(prefixes);
    let tasks: Vec<_> = targets
        .into_iter()
        .map(|(r, allowed)| {
            let (m, state, prefixes) = (m.clone(), state.clone(), prefixes.clone());
            let concurrency = cfg.concurrency;
            tokio::spawn(async move {
                futures::stream::iter(allowed)
                    .map(|i| {
                        let (m, state, prefixes, r) =
                            (m.clone(), state.clone(), prefixes.clone(), r.clone());
                        async move {
                            if m.generation() != generation {
                                return;
                            }
                            let (p, pins) = &prefixes[i];
                            let ok = replay(&r, p, pins, timeout).await;
                            let counted = m.update(generation, |pr| {
                                pr.done += 1;
                                pr.failed += u64::from(!ok);
                            });
                            if counted {
                                let outcome = if ok { "ok" } else { "failed" };
                                state.metrics.rollout_prewarm(&m.model, outcome).inc();
                                publish(&state, &m).await;
                            }
                        }
                    })
                    .buffer_unordered(concurrency)
                    .collect::<Vec<()>>()
                    .await
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    if !m.update(generation, |p| p.finished = true) {
        return stopped(&m);
    }
    publish(&state, &m).await;
    let s = m.status();
    tracing::info!(model = %m.model, %to, done = s.progress.done, failed = s.progress.failed,
        ms = t0.elapsed().as_millis() as u64, "rollout pre-warm finished");
}

/// `prefixes` with their tenants' pins; a prefix whose tenant is no longer configured is
/// dropped (its namespace serves no one, and its pin is unknown).
fn with_pins(state: &AppState, prefixes: Vec<Replay>) -> Vec<(Replay, ReplayPins)> {
    let tenants = state.tenants();
    prefixes
        .into_iter()
        .filter_map(|p| {
            let pins = ReplayPins {
                recorded: p.tag.residency.clone(),
                current: tenants.get(&p.tag.tenant)?.residency.clone(),
            };
            Some((p, pins))
        })
        .collect()
}

/// Replays one prefix to `r`; true when the replica answered 2xx in time.
async fn replay(r: &Replica, p: &Replay, pins: &ReplayPins, timeout: Duration) -> bool {
    let ids: Vec<u32> = p.tokens.iter().map(|t| t.0).collect();
    let body = serde_json::json!({
        "model": r.info.model,
        "prompt": ids,
        "max_tokens": 1,
        "temperature": 0,
    });
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut headers = vec![(CACHE_SALT, p.tag.salt.clone())];
    if !pins.tier(r) {
        headers.push((KV_TIER_OFF, http::HeaderValue::from_static("1")));
    }
    match client::post_json(&r.addr.http(), "/v1/completions", &body, &headers, timeout).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(replica = %r.id, error = %e, "rollout pre-warm replay failed");
            false
        }
    }
}

#[cfg(test)]
#[path = "prewarm_tests.rs"]
mod tests;
