//! Keeping a fleet's rollouts one state through Redis faults (`state.backend: redis`).
//!
//! - **A change made while Redis was unreachable** (a pause, resume or abort through a
//!   gateway cut off from Redis: it applies there and is answered 503) is written to the
//!   store at the next poll that reaches Redis, as a compare-and-set on the generation the
//!   gateway had. If the rollout changed through another gateway meanwhile the write is
//!   refused and the store's state wins: the gateway takes it at that poll.
//! - **A store that lost its data** (Redis restarted empty: no store id, or another id than
//!   the gateway read last): every gateway forgets the old store's generations (the new
//!   store counts from 1 again) and writes back the shared rollouts it holds that the new
//!   store lacks, each as the setting it was (same id and owner). The first such write wins
//!   (`restore` refuses a model the store already has); the others take it at their next
//!   poll. A rollout ended while a gateway was cut off, and lost with the store before that
//!   gateway read the end, comes back from that gateway: end it again.

use super::record::{self, WriteError};
use crate::fleet::rollouts::Snapshot;
use crate::fleet::Fleet;
use crate::state::AppState;
use std::sync::Arc;

/// Writes every change applied here while Redis was unreachable. True when the store
/// refused one for a newer state (the caller reads the store again).
pub(super) async fn push_unsynced(state: &AppState, fleet: &Arc<Fleet>) -> bool {
    let mut refused = false;
    for m in state.rollouts.all() {
        if !m.unsynced() {
            continue;
        }
        match record::push(fleet, &m).await {
            Ok(gen) => {
                m.synced();
                tracing::info!(model = %m.model, generation = gen,
                    "a rollout change made while Redis was unreachable is shared");
            }
            Err(e @ (WriteError::Stale { .. } | WriteError::Gone)) => {
                m.synced();
                m.set_generation(0);
                refused = true;
                tracing::warn!(model = %m.model, error = %e,
                    "a rollout change made while Redis was unreachable was overtaken; the fleet's state wins");
            }
            Err(WriteError::Unavailable(_)) => {}
        }
    }
    refused
}

/// The store `snap` came from is new to this gateway: forget the old store's generations
/// and write back what it lacks. `lost`: this gateway followed another store before (Redis
/// lost its data), not just a first start on a new store.
pub(super) async fn store_recreated(
    state: &AppState,
    fleet: &Arc<Fleet>,
    snap: &Snapshot,
    lost: bool,
) {
    let mut restored = 0;
    for m in state.rollouts.all() {
        if m.shared().is_none() {
            continue;
        }
        m.set_generation(0);
        if snap.records.contains_key(&m.model) || snap.gens.contains_key(&m.model) {
            continue;
        }
        match record::restore(fleet, &m).await {
            Ok(_) => restored += 1,
            Err(e) => tracing::debug!(model = %m.model, error = %e, "rollout not restored"),
        }
    }
    if let Err(e) = fleet.ensure_rollout_store().await {
        tracing::debug!(error = %e, "rollout store id not written");
    }
    if lost || restored > 0 {
        tracing::warn!(
            restored,
            "the rollout store lost its data (Redis restarted empty); wrote back the rollouts in force here"
        );
    }
}
