//! Rollouts shared by a fleet of gateways (`state.backend: redis`).
//!
//! A rollout set through any gateway's admin API is written to Redis as one [`Record`]
//! (`crate::fleet::rollouts`) with a generation, and every gateway follows the store by
//! polling its counter every `state.keys_poll_ms`:
//! - the gateway that set it **owns** it: it runs the pre-warm (from its own history) and
//!   publishes the progress after every replay, so every gateway ramps the same share and
//!   sends a conversation to the same checkpoint;
//! - a pause, resume or abort through any gateway is written to the record and reaches the
//!   others within a poll (an abort stops the owner's pre-warm; a resume after an abort
//!   restarts it);
//! - a record deleted from the store ends the rollout everywhere.
//!
//! Every write is a compare-and-set on the model's generation ([`super::record`]), and a
//! gateway takes a record only when its generation is newer than the one it has: a poll
//! that read the store before this gateway's own write never undoes it, and an ended
//! rollout never comes back.
//!
//! Redis faults: a change made while Redis was unreachable, and a store that lost its
//! data, are handled in [`super::resync`].
//!
//! Limits: the owner is one process; if it restarts, its pre-warm does not resume (the
//! progress stays where it was; set the rollout again). Rollouts in the config file stay
//! each gateway's own; a shared record for the same model replaces it.

use super::model::Shared;
use super::record::{self, Record, WriteError};
use super::{prewarm, resync, ModelRollout, Progress};
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
) -> Result<Arc<ModelRollout>, WriteError> {
    let fleet = state
        .fleet
        .as_ref()
        .ok_or_else(|| WriteError::Unavailable("no shared state".into()))?;
    // Written first, put in force here once the store took it: a write that fails leaves
    // the rollout in force (if any) as it was, here and everywhere.
    let m = Arc::new(ModelRollout::new(cfg));
    record::create(fleet, &m).await?;
    Ok(state.rollouts.install(m))
}

/// What a poll does with one model.
#[derive(Debug, PartialEq)]
pub(crate) enum Action {
    /// Nothing: the store is not newer than what this gateway has.
    Keep,
    /// Take the record's state (same setting, newer generation).
    Update,
    /// Put the record in force (a new setting).
    Adopt,
    /// End the shared rollout here (ended in the store after the generation held here).
    End,
}

/// Decides what a poll does with a model, from what this gateway holds (`local`: the
/// shared rollout's setting and generation, `None` when none or its own), the store's
/// generation and the record's setting id (`None` when the store has none).
pub(crate) fn decide(local: Option<&Shared>, store_gen: u64, rev: Option<u64>) -> Action {
    match (local, rev) {
        (Some(l), _) if l.gen >= store_gen => Action::Keep,
        (Some(l), Some(rev)) if l.rev == rev => Action::Update,
        (_, Some(_)) => Action::Adopt,
        (Some(_), None) => Action::End,
        (None, None) => Action::Keep,
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
        // The id of the store this gateway follows (`None` before the first read).
        let mut store = None;
        loop {
            tokio::time::sleep(every).await;
            if resync::push_unsynced(&state, &fleet).await {
                seen = None;
            }
            let Some((stamp, snap)) = fleet.read_rollouts(seen).await else {
                continue;
            };
            if snap.store.is_none() || store.is_some_and(|s| Some(s) != snap.store) {
                resync::store_recreated(&state, &fleet, &snap, store.is_some()).await;
                (seen, store) = (None, None);
                continue;
            }
            (seen, store) = (Some(stamp), snap.store);
            let mut models: HashSet<&String> = snap.gens.keys().collect();
            models.extend(snap.records.keys());
            for model in models {
                let rec = match snap
                    .records
                    .get(model)
                    .map(|j| serde_json::from_str::<Record>(j))
                {
                    Some(Ok(rec)) => Some(rec),
                    Some(Err(e)) => {
                        tracing::warn!(%model, error = %e, "unreadable shared rollout record");
                        continue;
                    }
                    None => None,
                };
                let gen = snap.gens.get(model).copied().unwrap_or(0);
                let progress = snap
                    .progress
                    .get(model)
                    .and_then(|p| serde_json::from_str::<Progress>(p.split_once(' ')?.1).ok());
                apply(&state, fleet.tag(), model, gen, rec, progress);
            }
        }
    });
}

/// Applies the store's view of one model to this gateway.
fn apply(
    state: &Arc<AppState>,
    me: &str,
    model: &str,
    gen: u64,
    rec: Option<Record>,
    progress: Option<Progress>,
) {
    let current = state.rollouts.get(model);
    let local = current.as_ref().and_then(|m| m.shared());
    let action = decide(local.as_ref(), gen, rec.as_ref().map(|r| r.rev));
    // The owner's progress reaches the others whatever the generation (it does not bump it).
    if let (Some(m), Some(l), Some(r), Some(p)) = (&current, &local, &rec, progress) {
        if !l.mine && l.rev == r.rev {
            m.apply_progress(p);
        }
    }
    match (action, current, rec) {
        (Action::Update, Some(m), Some(rec)) => {
            m.set_generation(gen);
            let resumed = m.apply_remote(rec.state, rec.paused_share, rec.ramp_start_ms);
            if resumed && rec.owner == me {
                prewarm::start(state, m);
            }
        }
        (Action::Adopt, _, Some(rec)) => {
            let owner = rec.owner == me;
            let m = Arc::new(ModelRollout::new(&rec.cfg));
            m.set_shared(Shared {
                rev: rec.rev,
                gen,
                owner: rec.owner.clone(),
                mine: owner,
            });
            m.apply_remote(rec.state, rec.paused_share, rec.ramp_start_ms);
            if let Some(p) = progress.filter(|_| !owner) {
                m.apply_progress(p);
            }
            let m = state.rollouts.install(m);
            tracing::info!(model = %m.model, from = %rec.cfg.from, to = %rec.cfg.to,
                owner = %rec.owner, generation = gen, "shared rollout followed");
            if owner {
                prewarm::start(state, m);
            }
        }
        (Action::End, Some(m), _) if state.rollouts.remove_if(&m) => {
            tracing::info!(%model, generation = gen, "shared rollout ended");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(rev: u64, gen: u64) -> Shared {
        Shared {
            rev,
            gen,
            owner: "a".into(),
            mine: true,
        }
    }

    #[test]
    fn a_poll_never_undoes_a_newer_write_of_this_gateway() {
        // The poll read the store before this gateway's own PUT was written (pending) or
        // after it, but before a later change: keep what is here.
        let pending = shared(7, super::super::model::PENDING);
        assert_eq!(decide(Some(&pending), 3, None), Action::Keep);
        assert_eq!(decide(Some(&pending), 3, Some(5)), Action::Keep);
        assert_eq!(decide(Some(&shared(7, 4)), 3, Some(5)), Action::Keep);
        assert_eq!(decide(Some(&shared(7, 4)), 4, Some(7)), Action::Keep);
        // Newer in the store: follow it.
        assert_eq!(decide(Some(&shared(7, 4)), 5, Some(7)), Action::Update);
        assert_eq!(decide(Some(&shared(7, 4)), 5, Some(9)), Action::Adopt);
        assert_eq!(decide(Some(&shared(7, 4)), 5, None), Action::End);
        // Nothing shared here: a record is adopted, a tombstone is nothing to do.
        assert_eq!(decide(None, 5, Some(9)), Action::Adopt);
        assert_eq!(decide(None, 5, None), Action::Keep);
    }
}
