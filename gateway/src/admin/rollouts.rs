//! `/admin/rollouts`: checkpoint rollouts, changed at run time.
//! - `GET /admin/rollouts`: every rollout in force, with its share, ramp and pre-warm
//!   progress;
//! - `PUT /admin/rollouts/{model}` `{"from", "to", "percent", "state"?, "prewarm"?}`: puts a
//!   rollout in force (replacing the model's current one) and starts its pre-warm;
//! - `POST /admin/rollouts/{model}/pause|resume|abort`: holds the share (the pre-warm goes
//!   on), resumes the ramp from where it is, or sends every conversation back to `from`
//!   (resuming after an abort starts an unfinished pre-warm over);
//! - `DELETE /admin/rollouts/{model}`: ends it (the checkpoint with the most replicas
//!   serves the model again).
//!
//! A rollout set here lasts until the next change here or to the same model's entry in
//! the config file (a reload that leaves the entry as it was keeps it). With
//! `state.backend: redis` it is shared: every gateway of the fleet follows it
//! (`crate::rollout::fleet`), and a change through any of them reaches all; Redis
//! unreachable, a new setting or an end is refused with 503; a pause, resume or abort
//! applies here, is answered 503, and is written to the store when Redis answers again
//! (unless the rollout changed through another gateway meanwhile: then the store's state
//! wins). A
//! pause, resume, abort or end is a compare-and-set on the rollout's generation (its
//! `generation` in `GET`): when the rollout changed through another gateway since this one
//! last read the store, it is refused with 409 and the store keeps the newer state (this
//! gateway takes it within a poll).

use super::error::AdminError;
use crate::config::{PrewarmConfig, RolloutConfig};
use crate::rollout::record::{self, WriteError};
use crate::rollout::{fleet, prewarm};
use crate::state::AppState;
use router_policy::RolloutState;
use serde::Deserialize;
use std::sync::Arc;

/// The body of `PUT /admin/rollouts/{model}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    from: String,
    to: String,
    percent: f64,
    #[serde(default)]
    state: RolloutState,
    #[serde(default)]
    prewarm: PrewarmConfig,
}

/// What a rollout route asks.
pub(crate) use crate::rollout::model::Change as Op;

/// `GET /admin/rollouts`: the rollouts, and how many hot prefixes the gateway keeps per
/// checkpoint (what a pre-warm can replay).
pub(crate) fn list(state: &AppState) -> serde_json::Value {
    serde_json::json!({
        "rollouts": state.rollouts.list(),
        "hot_prefixes": state.rollouts.hot.counts(),
    })
}

/// `PUT /admin/rollouts/{model}`.
pub(crate) async fn put(
    state: &Arc<AppState>,
    model: &str,
    body: &[u8],
) -> Result<serde_json::Value, AdminError> {
    let b: Body =
        serde_json::from_slice(body).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let cfg = RolloutConfig {
        model: model.to_string(),
        from: b.from,
        to: b.to,
        percent: b.percent,
        state: b.state,
        prewarm: b.prewarm,
    };
    cfg.validate("rollout")
        .map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let m = if state.fleet.is_some() {
        fleet::create(state, &cfg)
            .await
            .map_err(|e| shared_error("rollout not shared", e))?
    } else {
        state.rollouts.set(&cfg)
    };
    tracing::info!(model, from = %cfg.from, to = %cfg.to, percent = cfg.percent, "rollout set");
    prewarm::start(state, m.clone());
    Ok(serde_json::to_value(m.status()).unwrap_or_default())
}

/// `POST /admin/rollouts/{model}/{op}`.
pub(crate) async fn change(
    state: &Arc<AppState>,
    model: &str,
    op: Op,
) -> Result<serde_json::Value, AdminError> {
    let m = state
        .rollouts
        .get(model)
        .ok_or_else(|| AdminError::NotFound(format!("no rollout for model {model}")))?;
    // Written to the store first (a compare-and-set), then applied here: a change refused
    // as stale changes nothing anywhere. With Redis unreachable it still applies here.
    let shared = record::change(state.fleet.as_ref(), &m, op).await;
    if let Err(e @ (WriteError::Stale { .. } | WriteError::Gone)) = shared {
        return Err(shared_error("rollout not changed", e));
    }
    if m.apply(op) {
        prewarm::start(state, m.clone());
    }
    if shared.is_err() {
        // Written to the store when Redis answers again, unless the rollout changed
        // through another gateway meanwhile (`crate::rollout::resync`).
        m.mark_unsynced();
    }
    shared.map_err(|e| shared_error("changed here, not shared yet", e))?;
    let s = m.status();
    tracing::info!(model, state = ?s.state, share = s.share_percent, "rollout changed");
    Ok(serde_json::to_value(s).unwrap_or_default())
}

/// A shared write's failure: 409 when the store moved on, 503 when Redis did not answer.
fn shared_error(what: &str, e: WriteError) -> AdminError {
    match e {
        WriteError::Unavailable(_) => AdminError::Unavailable(format!("{what}: {e}")),
        WriteError::Stale { .. } | WriteError::Gone => AdminError::Conflict(format!("{what}: {e}")),
    }
}

/// `DELETE /admin/rollouts/{model}`.
pub(crate) async fn delete(state: &AppState, model: &str) -> Result<serde_json::Value, AdminError> {
    if let (Some(fleet), Some(m)) = (state.fleet.as_ref(), state.rollouts.get(model)) {
        match record::delete(fleet, &m).await {
            // Ended through another gateway already: end it here too.
            Ok(()) | Err(WriteError::Gone) => {}
            Err(e) => return Err(shared_error("rollout not ended", e)),
        }
    }
    if state.rollouts.remove(model) {
        Ok(serde_json::json!({ "ended": model }))
    } else {
        Err(AdminError::NotFound(format!(
            "no rollout for model {model}"
        )))
    }
}
