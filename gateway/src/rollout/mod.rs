//! Checkpoint rollouts at the gateway: which checkpoint each request of a model in rollout
//! goes to, the pre-warm that earns the new checkpoint its share, and the history it
//! replays.
//!
//! The rule itself (sticky, monotone shares; pause; abort) is `router_policy::rollout`.
//! Here it meets the running gateway:
//! - [`Rollouts`]: the rollouts in force, one per model, from `rollouts:` in the config or
//!   the admin API (`/admin/rollouts`); [`model::ModelRollout`] is one of them, and
//!   [`model::ModelRollout::choose`] runs on the request path.
//! - [`hot`]: the hot prefixes of every checkpoint, recorded from the gateway's own traffic.
//! - [`prewarm`]: replays the old checkpoint's hottest prefixes (prefill only) to every
//!   replica of the new one; the share ramps with the fraction replayed.
//! - [`fleet`]: with `state.backend: redis`, rollouts set through any gateway's admin API
//!   live in Redis and every gateway follows them; the gateway that set one pre-warms and
//!   publishes its progress ([`record`]), so every gateway ramps alike.
//!
//! Without a rollout for a model, the registry's rule applies: the checkpoint with the
//! most routable replicas serves it.

pub(crate) mod fleet;
pub(crate) mod hot;
pub(crate) mod model;
pub(crate) mod prewarm;
pub(crate) mod record;
mod resync;

use crate::config::RolloutConfig;
pub(crate) use model::{ModelRollout, Progress, RolloutStatus};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

/// The rollouts in force, and the history they pre-warm from.
#[derive(Default)]
pub(crate) struct Rollouts {
    models: RwLock<HashMap<String, Arc<ModelRollout>>>,
    /// Hot prefixes per checkpoint.
    pub hot: hot::HotTable,
}

impl Rollouts {
    /// No rollouts; hot prefixes kept as `hot` says.
    pub(crate) fn new(hot: &crate::config::HotPrefixConfig) -> Self {
        Self {
            hot: hot::HotTable::new(hot),
            ..Self::default()
        }
    }

    /// The rollout of `model`, if one is in force.
    pub(crate) fn get(&self, model: &str) -> Option<Arc<ModelRollout>> {
        let m = self.models.read();
        if m.is_empty() {
            return None;
        }
        m.get(model).cloned()
    }

    /// Puts `cfg` in force for its model (replacing any rollout of it; a running pre-warm
    /// of the old one stops). Returns it, for the caller to start its pre-warm.
    pub(crate) fn set(&self, cfg: &RolloutConfig) -> Arc<ModelRollout> {
        self.install(Arc::new(ModelRollout::new(cfg)))
    }

    /// Puts `m` in force for its model, as [`Rollouts::set`].
    pub(crate) fn install(&self, m: Arc<ModelRollout>) -> Arc<ModelRollout> {
        if let Some(old) = self.models.write().insert(m.model.clone(), m.clone()) {
            old.stop_prewarm();
        }
        m
    }

    /// Ends `model`'s rollout (the registry's rule applies again). False when none.
    pub(crate) fn remove(&self, model: &str) -> bool {
        match self.models.write().remove(model) {
            Some(old) => {
                old.stop_prewarm();
                true
            }
            None => false,
        }
    }

    /// Ends `model`'s rollout if it is still `m` (not replaced meanwhile).
    pub(crate) fn remove_if(&self, m: &Arc<ModelRollout>) -> bool {
        let mut all = self.models.write();
        if all.get(&m.model).is_some_and(|cur| Arc::ptr_eq(cur, m)) {
            all.remove(&m.model);
            m.stop_prewarm();
            return true;
        }
        false
    }
    /// Applies the config's rollouts after a reload: new or changed entries are put in
    /// force, entries gone from the file end; unchanged ones (and what the admin API did to
    /// them) stay. Returns the ones put in force.
    pub(crate) fn apply_config(
        &self,
        new: &[RolloutConfig],
        previous: &[RolloutConfig],
    ) -> Vec<Arc<ModelRollout>> {
        for old in previous {
            if !new.iter().any(|n| n.model == old.model) {
                self.remove(&old.model);
            }
        }
        new.iter()
            .filter(|n| !previous.contains(n) || self.get(&n.model).is_none())
            .map(|n| self.set(n))
            .collect()
    }

    /// Every rollout in force.
    pub(crate) fn all(&self) -> Vec<Arc<ModelRollout>> {
        self.models.read().values().cloned().collect()
    }

    /// Every rollout's status, by model.
    pub(crate) fn list(&self) -> Vec<RolloutStatus> {
        let mut v: Vec<RolloutStatus> = self.models.read().values().map(|m| m.status()).collect();
        v.sort_by(|a, b| a.model.cmp(&b.model));
        v
    }
}

#[cfg(test)]
mod tests;
