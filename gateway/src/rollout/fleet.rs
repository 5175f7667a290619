//! Rollouts shared by a fleet of gateways (`state.backend: redis`).
//!
//! A rollout set through any gateway's admin API is written to Redis as one [`Record`]
//! (`crate::fleet::rollouts`), and every gateway follows the store by polling its counter
//! every `state.keys_poll_ms`:
//! - the gateway that set it **owns** it: it runs the pre-warm (from its own history) and
//!   publishes the progress after every replay, so every gateway ramps the same share and
//!   sends a conversation to the same checkpoint;
//! - a pause, resume or abort through any gateway is written to the record and reaches the
//!   others within a poll (an abort stops the owner's pre-warm; a resume after an abort
//!   restarts it);
//! - a record deleted from the store ends the rollout everywhere.
//!
//! Limits: the owner is one process; if it restarts, its pre-warm does not resume (the
//! progress stays where it was; set the rollout again). Rollouts in the config file stay
//! each gateway's own; a shared record for the same model replaces it.

use super::record::{publish, Record};
use super::{prewarm, ModelRollout};
use crate::config::RolloutConfig;
use crate::state::AppState;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Puts `cfg` in force on this gateway, as the owner of a new shared record, and writes
/// the record; the caller starts its pre-warm.
pub(crate) async fn create(
    state: &Arc<AppState>,
    cfg: &RolloutConfig,
) -> Result<Arc<ModelRollout>, String> {
    let fleet = state.fleet.as_ref().ok_or("no shared state")?;
    let m = state.rollouts.set(cfg);
    m.set_shared(rand::random::<u64>() | 1, fleet.tag(), true);
    if let Err(e) = publish(state.fleet.as_ref(), &m).await {
        // Not in force anywhere rather than here alone.
        state.rollouts.remove(&cfg.model);
        return Err(e);
    }
    Ok(m)
}

/// Ends `model`'s shared rollout everywhere.
pub(crate) async fn delete(state: &AppState, model: &str) -> Result<(), String> {
    match state.fleet.as_ref() {
        Some(fleet) => fleet.delete_rollout(model).await,
        None => Ok(()),
    }
}

/// Follows the store when state is shared: one poll every `state.keys_poll_ms`.
pub(crate) fn follow(state: &Arc<AppState>) {
    let Some(fleet) = state.fleet.clone() else {
        return;
    };
    let state = state.clone();
    let every = Duration::from_millis(fleet.config().keys_poll_ms);
    state.control.clone().spawn(async move {
        let mut seen = None;
        loop {
            tokio::time::sleep(every).await;
            let Some((epoch, all)) = fleet.read_rollouts(seen).await else {
                continue;
            };
            seen = Some(epoch);
            let mut present = HashSet::new();
            for (model, json) in all {
                match serde_json::from_str::<Record>(&json) {
                    Ok(rec) => {
                        present.insert(model);
                        apply(&state, fleet.tag(), rec);
                    }
                    Err(e) => {
                        tracing::warn!(%model, error = %e, "unreadable shared rollout record")
                    }
                }
            }
            for m in state.rollouts.all() {
                if m.shared().is_some() && !present.contains(&m.model) {
                    state.rollouts.remove(&m.model);
                    tracing::info!(model = %m.model, "shared rollout ended");
                }
            }
        }
    });
}

/// Applies one record to this gateway.
fn apply(state: &Arc<AppState>, me: &str, rec: Record) {
    let owner = rec.owner == me;
    let progress = (!owner).then_some(rec.progress);
    let current = state
        .rollouts
        .get(&rec.cfg.model)
        .filter(|m| m.shared().map(|s| s.0) == Some(rec.rev));
    match current {
        Some(m) => {
            if m.apply_remote(rec.state, rec.paused_share, progress) && owner {
                prewarm::start(state, m);
            }
        }
        None => {
            let m = state.rollouts.set(&rec.cfg);
            m.set_shared(rec.rev, &rec.owner, owner);
            m.apply_remote(rec.state, rec.paused_share, progress);
            tracing::info!(model = %m.model, from = %rec.cfg.from, to = %rec.cfg.to,
                owner = %rec.owner, "shared rollout followed");
            if owner {
                prewarm::start(state, m);
            }
        }
    }
}
