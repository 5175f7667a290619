//! A shared rollout's record in the fleet's store (`crate::fleet::rollouts`), and every
//! write of this gateway's copy of it. Each write is a compare-and-set in Redis:
//! - [`create`]s a new setting (a new `rev`; the store's generation goes up, whatever was
//!   there is replaced);
//! - [`change`] (pause, resume, abort) and [`delete`] apply only if the store's generation
//!   is still the one this gateway last saw: otherwise [`WriteError::Stale`] and nothing
//!   changes in the store;
//! - [`publish_progress`] (the owner's pre-warm) writes only the progress, only while the
//!   setting is still in the store, and only forward: it never touches the state and never
//!   brings back a replaced or ended rollout.

use super::model::{Change, ModelRollout, PENDING};
use crate::config::RolloutConfig;
use crate::fleet::rollouts::Written;
use crate::fleet::Fleet;
use router_policy::RolloutState;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One model's rollout as the fleet's store holds it (its progress and generation are kept
/// beside it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    /// What was set.
    pub cfg: RolloutConfig,
    /// Active, paused or aborted.
    pub state: RolloutState,
    /// The share held while paused.
    pub paused_share: f64,
    /// Tag of the gateway running the pre-warm.
    pub owner: String,
    /// This setting's id (a new `PUT` makes a new one).
    pub rev: u64,
    /// When the ramp started (`prewarm.ramp_s` counts from it on every gateway), Unix ms.
    pub ramp_start_ms: u64,
}

/// Why a shared rollout was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// Redis did not answer.
    #[error("{0}")]
    Unavailable(String),
    /// The store moved on (another gateway changed or ended it since this one read it).
    #[error("the rollout changed through another gateway (generation {seen}, now {now}); read it again and retry")]
    Stale {
        /// The generation this gateway had.
        seen: u64,
        /// The store's.
        now: u64,
    },
    /// The store has no such rollout any more (ended through another gateway).
    #[error("the rollout was ended through another gateway")]
    Gone,
}

fn record_of(m: &ModelRollout, owner: &str, rev: u64) -> Record {
    let (state, paused_share) = m.parts();
    Record {
        cfg: m.cfg.clone(),
        state,
        paused_share,
        owner: owner.to_string(),
        rev,
        ramp_start_ms: m.ramp_start_ms(),
    }
}

fn outcome(m: &ModelRollout, seen: u64, w: Written) -> Result<u64, WriteError> {
    match w {
        Written::Done(gen) => {
            m.set_generation(gen);
            Ok(gen)
        }
        Written::Stale(now) => Err(WriteError::Stale { seen, now }),
        Written::Missing(_) => Err(WriteError::Gone),
    }
}

/// Writes `m` as a new setting owned by this gateway (replacing whatever the store has).
pub(crate) async fn create(fleet: &Arc<Fleet>, m: &ModelRollout) -> Result<u64, WriteError> {
    let rev = rand::random::<u64>() | 1;
    m.set_shared(super::model::Shared {
        rev,
        gen: PENDING,
        owner: fleet.tag().to_string(),
        mine: true,
    });
    let json = serde_json::to_string(&record_of(m, fleet.tag(), rev))
        .map_err(|e| WriteError::Unavailable(e.to_string()))?;
    let w = fleet
        .write_rollout(&m.model, "put", 0, rev, &json)
        .await
        .map_err(WriteError::Unavailable)?;
    outcome(m, 0, w)
}

/// Writes `m`'s record as it will be after `c` (a pause, resume or abort), if it is shared
/// and the store is still at the generation this gateway knows; the caller applies `c`
/// here once it is written.
pub(crate) async fn change(
    fleet: Option<&Arc<Fleet>>,
    m: &ModelRollout,
    c: Change,
) -> Result<(), WriteError> {
    let (Some(fleet), Some(s)) = (fleet, m.shared()) else {
        return Ok(());
    };
    let (state, paused_share, ramp_start_ms) = m.preview(c);
    let record = Record {
        state,
        paused_share,
        ramp_start_ms,
        ..record_of(m, &s.owner, s.rev)
    };
    let json =
        serde_json::to_string(&record).map_err(|e| WriteError::Unavailable(e.to_string()))?;
    let w = fleet
        .write_rollout(&m.model, "change", s.gen, s.rev, &json)
        .await
        .map_err(WriteError::Unavailable)?;
    outcome(m, s.gen, w).map(|_| ())
}

/// Ends `m` in the store, if the store is still at the generation this gateway knows.
pub(crate) async fn delete(fleet: &Arc<Fleet>, m: &ModelRollout) -> Result<(), WriteError> {
    let Some(s) = m.shared() else {
        return Ok(());
    };
    let w = fleet
        .write_rollout(&m.model, "delete", s.gen, s.rev, "")
        .await
        .map_err(WriteError::Unavailable)?;
    outcome(m, s.gen, w).map(|_| ())
}

/// Writes `m` back into a store that lost it (a Redis restarted empty), as the setting
/// it is (same `rev` and owner), unless the store already has a record or a generation for
/// the model (another gateway restored it first, or it was changed since): then
/// [`WriteError::Stale`], and this gateway takes the store's state at its next poll.
pub(crate) async fn restore(fleet: &Arc<Fleet>, m: &ModelRollout) -> Result<u64, WriteError> {
    write_as_is(fleet, m, "restore").await
}

/// Writes the state `m` has here (a change applied while Redis was unreachable) if the
/// store is still at the generation this gateway knows.
pub(crate) async fn push(fleet: &Arc<Fleet>, m: &ModelRollout) -> Result<u64, WriteError> {
    write_as_is(fleet, m, "change").await
}

/// Writes `m`'s record as this gateway has it now, in `mode` `restore` (at generation 0)
/// or `change` (at the generation this gateway knows).
async fn write_as_is(fleet: &Arc<Fleet>, m: &ModelRollout, mode: &str) -> Result<u64, WriteError> {
    let Some(s) = m.shared() else {
        return Ok(0);
    };
    let gen = if mode == "restore" { 0 } else { s.gen };
    let json = serde_json::to_string(&record_of(m, &s.owner, s.rev))
        .map_err(|e| WriteError::Unavailable(e.to_string()))?;
    let w = fleet
        .write_rollout(&m.model, mode, gen, s.rev, &json)
        .await
        .map_err(WriteError::Unavailable)?;
    outcome(m, gen, w)
}

/// Writes the pre-warm progress of `m`, when it is shared and this gateway runs its
/// pre-warm. True when written; false when the store refused it (replaced, ended, or a
/// newer progress already there).
pub(crate) async fn publish_progress(
    fleet: Option<&Arc<Fleet>>,
    m: &ModelRollout,
) -> Result<bool, WriteError> {
    let (Some(fleet), Some(s)) = (fleet, m.shared()) else {
        return Ok(false);
    };
    if !s.mine {
        return Ok(false);
    }
    let (seq, progress) = m.progress();
    let json =
        serde_json::to_string(&progress).map_err(|e| WriteError::Unavailable(e.to_string()))?;
    fleet
        .write_progress(&m.model, s.rev, seq, &json)
        .await
        .map_err(WriteError::Unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_refuses_unknown_fields() {
        let rec = Record {
            cfg: RolloutConfig {
                model: "m".into(),
                from: "m@1".into(),
                to: "m@2".into(),
                percent: 25.0,
                state: RolloutState::Active,
                prewarm: crate::config::PrewarmConfig::default(),
            },
            state: RolloutState::Paused,
            paused_share: 0.125,
            owner: "00000000deadbeef".into(),
            rev: 7,
            ramp_start_ms: 1_765_000_000_000,
        };
        let json = serde_json::to_string(&rec).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), rec);
        assert!(json.contains(r#""state":"paused""#), "{json}");
        let extra = json.replacen('{', r#"{"surprise":1,"#, 1);
        assert!(serde_json::from_str::<Record>(&extra).is_err());
    }
}
