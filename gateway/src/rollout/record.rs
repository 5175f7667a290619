//! A shared rollout's record in the fleet's store (`crate::fleet::rollouts`), and writing
//! this gateway's copy of it: after an admin change here, and by the owner's pre-warm after
//! every replay ([`publish`]).

use super::{ModelRollout, Progress};
use crate::config::RolloutConfig;
use crate::fleet::Fleet;
use router_policy::RolloutState;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One model's rollout as the fleet's store holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    /// What was set.
    pub cfg: RolloutConfig,
    /// Active, paused or aborted.
    pub state: RolloutState,
    /// The share held while paused.
    pub paused_share: f64,
    /// The owner's pre-warm progress.
    pub progress: Progress,
    /// Tag of the gateway running the pre-warm.
    pub owner: String,
    /// This setting's id (a new `PUT` makes a new one).
    pub rev: u64,
}

/// Writes `m`'s current record (state, progress) when it is shared.
pub(crate) async fn publish(fleet: Option<&Arc<Fleet>>, m: &ModelRollout) -> Result<(), String> {
    let (Some(fleet), Some((rev, _))) = (fleet, m.shared()) else {
        return Ok(());
    };
    let (st, paused_share, progress) = m.parts();
    let record = Record {
        cfg: m.cfg.clone(),
        state: st,
        paused_share,
        progress,
        owner: m.owner_tag(),
        rev,
    };
    let json = serde_json::to_string(&record).map_err(|e| e.to_string())?;
    fleet.put_rollout(&m.model, &json).await
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
            progress: Progress {
                started: true,
                planned: 8,
                done: 3,
                failed: 1,
                finished: false,
            },
            owner: "00000000deadbeef".into(),
            rev: 7,
        };
        let json = serde_json::to_string(&rec).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), rec);
        assert!(json.contains(r#""state":"paused""#), "{json}");
        let extra = json.replacen('{', r#"{"surprise":1,"#, 1);
        assert!(serde_json::from_str::<Record>(&extra).is_err());
    }
}
