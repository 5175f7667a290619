//! Checkpoint rollouts at the gateway: which checkpoint each request of a model in rollout
//! goes to, the pre-warm that earns the new checkpoint its share, and the history it
//! replays.
//!
//! The rule itself (sticky, monotone shares; pause; abort) is `router_policy::rollout`.
//! Here it meets the running gateway:
//! - [`Rollouts`]: the rollouts in force, one per model, from `rollouts:` in the config or
//!   the admin API (`/admin/rollouts`), and [`ModelRollout::choose`] on the request path.
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
pub(crate) mod prewarm;
pub(crate) mod record;

use crate::config::{PrewarmConfig, RolloutConfig};
use parking_lot::{Mutex, RwLock};
use router_policy::{Rollout, RolloutState};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use warmpath_core::CheckpointId;

/// How far a rollout's pre-warm is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct Progress {
    /// The replay task found the new checkpoint's replicas and planned its work.
    pub started: bool,
    /// Replays planned (prefixes x replicas of `to`).
    pub planned: u64,
    /// Replays finished, failed ones included.
    pub done: u64,
    /// Replays that failed or timed out.
    pub failed: u64,
    /// Every planned replay finished.
    pub finished: bool,
}

struct Runtime {
    rollout: Rollout,
    prewarm: PrewarmConfig,
    progress: Progress,
    /// When the rollout was put in force (the start of `prewarm.ramp_s`).
    since: std::time::Instant,
}

impl Runtime {
    /// The pre-warm ramp in `[0, 1]` ([`router_policy::rollout::ramp`]): the fraction of
    /// planned replays done (1 without pre-warm, or when there was nothing to replay; 0
    /// before the new checkpoint has a replica), no faster than `prewarm.ramp_s`.
    fn ramp(&self) -> f64 {
        let p = &self.progress;
        let replayed = if self.prewarm.top_n == 0 || (p.finished && p.planned == 0) {
            1.0
        } else if p.planned == 0 {
            0.0
        } else {
            p.done as f64 / p.planned as f64
        };
        let elapsed = self.since.elapsed().as_millis() as u64;
        router_policy::rollout::ramp(replayed, elapsed, self.prewarm.ramp_s * 1000)
    }
}

/// A rollout as the admin API and the dashboard show it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RolloutStatus {
    /// The model.
    pub model: String,
    /// Old checkpoint.
    pub from: CheckpointId,
    /// New checkpoint.
    pub to: CheckpointId,
    /// Target share, percent.
    pub target_percent: f64,
    /// Share of conversations on `to` now, percent.
    pub share_percent: f64,
    /// Pre-warm ramp, `[0, 1]`.
    pub ramp: f64,
    /// `active`, `paused` or `aborted`.
    pub state: RolloutState,
    /// Pre-warm settings.
    pub prewarm: PrewarmConfig,
    /// Pre-warm progress.
    pub progress: Progress,
}

/// One model's rollout in force.
pub(crate) struct ModelRollout {
    /// The model.
    pub model: String,
    /// The config it was put in force with.
    pub cfg: RolloutConfig,
    inner: Mutex<Runtime>,
    /// Bumped on every change; a pre-warm task of an older generation stops.
    generation: AtomicU64,
    /// The fleet record's id when the rollout is shared through Redis (0: this gateway's
    /// own), whether this gateway runs its pre-warm, and the tag of the gateway that does.
    shared: Mutex<(u64, bool, String)>,
}

impl ModelRollout {
    fn new(cfg: &RolloutConfig, generation: u64) -> Self {
        let mut rollout = Rollout::new(
            CheckpointId::new(cfg.from.as_str()),
            CheckpointId::new(cfg.to.as_str()),
            cfg.share(),
        );
        match cfg.state {
            RolloutState::Active => {}
            // Paused from the start: nothing moved yet.
            RolloutState::Paused => rollout.pause(0.0),
            RolloutState::Aborted => rollout.abort(),
        }
        Self {
            model: cfg.model.clone(),
            cfg: cfg.clone(),
            shared: Mutex::new((0, false, String::new())),
            inner: Mutex::new(Runtime {
                rollout,
                prewarm: cfg.prewarm.clone(),
                progress: Progress::default(),
                since: std::time::Instant::now(),
            }),
            generation: AtomicU64::new(generation),
        }
    }

    /// The checkpoint for a conversation with sticky key `key`, and the other one (the
    /// fallback when the first has no routable replica).
    pub(crate) fn choose(&self, key: u64) -> (CheckpointId, CheckpointId) {
        let g = self.inner.lock();
        let share = g.rollout.share(g.ramp());
        let first = g.rollout.checkpoint_for(key, share).clone();
        let other = if first == g.rollout.to {
            g.rollout.from.clone()
        } else {
            g.rollout.to.clone()
        };
        (first, other)
    }

    /// The two checkpoints, `(from, to)`.
    pub(crate) fn checkpoints(&self) -> (CheckpointId, CheckpointId) {
        let g = self.inner.lock();
        (g.rollout.from.clone(), g.rollout.to.clone())
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The pre-warm settings.
    pub(crate) fn prewarm(&self) -> PrewarmConfig {
        self.inner.lock().prewarm.clone()
    }

    /// Whether a pre-warm should run: not aborted (a paused rollout keeps warming; the
    /// pause only holds the share), pre-warm on, not finished.
    pub(crate) fn wants_prewarm(&self) -> bool {
        let g = self.inner.lock();
        g.rollout.state != RolloutState::Aborted && g.prewarm.top_n > 0 && !g.progress.finished
    }

    /// Records pre-warm progress (from the replay task of generation `generation` only).
    pub(crate) fn update(&self, generation: u64, f: impl FnOnce(&mut Progress)) {
        if self.generation() == generation {
            f(&mut self.inner.lock().progress);
        }
    }

    /// The fleet record's id and whether this gateway owns the pre-warm, when shared.
    pub(crate) fn shared(&self) -> Option<(u64, bool)> {
        let s = self.shared.lock();
        (s.0 != 0).then_some((s.0, s.1))
    }

    /// The tag of the gateway running a shared rollout's pre-warm.
    pub(crate) fn owner_tag(&self) -> String {
        self.shared.lock().2.clone()
    }

    /// Marks it shared through the fleet's store as record `rev`, pre-warmed by the
    /// gateway tagged `owner_tag` (this one when `mine`).
    pub(crate) fn set_shared(&self, rev: u64, owner_tag: &str, mine: bool) {
        *self.shared.lock() = (rev, mine, owner_tag.to_string());
    }

    /// State, paused share and progress, as the fleet's record carries them.
    pub(crate) fn parts(&self) -> (RolloutState, f64, Progress) {
        let g = self.inner.lock();
        (g.rollout.state, g.rollout.paused_share, g.progress)
    }

    /// Takes another gateway's change (from the fleet's record): its state, and its
    /// pre-warm progress when this gateway does not run the pre-warm. Returns true when it
    /// resumed from an abort (the owner restarts its pre-warm).
    pub(crate) fn apply_remote(
        &self,
        state: RolloutState,
        paused_share: f64,
        progress: Option<Progress>,
    ) -> bool {
        if let Some(p) = progress {
            self.inner.lock().progress = p;
        }
        let now = self.inner.lock().rollout.state;
        match (now, state) {
            (a, b) if a == b => false,
            (_, RolloutState::Aborted) => {
                self.abort();
                false
            }
            (_, RolloutState::Paused) => {
                let mut g = self.inner.lock();
                g.rollout.resume();
                g.rollout.paused_share = paused_share;
                g.rollout.state = RolloutState::Paused;
                false
            }
            (_, RolloutState::Active) => self.resume(),
        }
    }

    /// Pauses at the current share.
    pub(crate) fn pause(&self) {
        let mut g = self.inner.lock();
        let ramp = g.ramp();
        g.rollout.pause(ramp);
    }

    /// Resumes. After a pause the ramp goes on from where it is (the pre-warm kept running
    /// while paused), so no conversation moves back. After an abort the time ramp starts
    /// again; returns true then, and the caller restarts an unfinished pre-warm.
    pub(crate) fn resume(&self) -> bool {
        let mut g = self.inner.lock();
        let aborted = g.rollout.state == RolloutState::Aborted;
        g.rollout.resume();
        if aborted {
            g.since = std::time::Instant::now();
        }
        aborted
    }

    /// Every conversation back to `from`; a running pre-warm stops.
    pub(crate) fn abort(&self) {
        self.inner.lock().rollout.abort();
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The share of conversations on `to` now, `[0, 1]`.
    #[cfg(test)]
    pub(crate) fn share(&self) -> f64 {
        let g = self.inner.lock();
        g.rollout.share(g.ramp())
    }

    /// The admin view.
    pub(crate) fn status(&self) -> RolloutStatus {
        let g = self.inner.lock();
        let ramp = g.ramp();
        RolloutStatus {
            model: self.model.clone(),
            from: g.rollout.from.clone(),
            to: g.rollout.to.clone(),
            target_percent: g.rollout.target * 100.0,
            share_percent: g.rollout.share(ramp) * 100.0,
            ramp,
            state: g.rollout.state,
            prewarm: g.prewarm.clone(),
            progress: g.progress,
        }
    }
}

/// The rollouts in force, and the history they pre-warm from.
#[derive(Default)]
pub(crate) struct Rollouts {
    models: RwLock<HashMap<String, Arc<ModelRollout>>>,
    generations: AtomicU64,
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
        let generation = self.generations.fetch_add(1 << 32, Ordering::AcqRel) + (1 << 32);
        let m = Arc::new(ModelRollout::new(cfg, generation));
        if let Some(old) = self.models.write().insert(cfg.model.clone(), m.clone()) {
            old.generation.fetch_add(1, Ordering::AcqRel);
        }
        m
    }

    /// Ends `model`'s rollout (the registry's rule applies again). False when none.
    pub(crate) fn remove(&self, model: &str) -> bool {
        match self.models.write().remove(model) {
            Some(old) => {
                old.generation.fetch_add(1, Ordering::AcqRel);
                true
            }
            None => false,
        }
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
mod tests {
    use super::*;
    use warmpath_core::rng::mix64;

    fn cfg(percent: f64, top_n: usize) -> RolloutConfig {
        RolloutConfig {
            model: "m".into(),
            from: "m@1".into(),
            to: "m@2".into(),
            percent,
            state: RolloutState::Active,
            prewarm: PrewarmConfig {
                top_n,
                ..PrewarmConfig::default()
            },
        }
    }

    fn on_new(m: &ModelRollout) -> usize {
        (0..4000u64)
            .filter(|k| m.choose(mix64(*k)).0.as_str() == "m@2")
            .count()
    }

    #[test]
    fn the_share_waits_for_the_prewarm_and_ramps_with_it() {
        let r = Rollouts::default();
        let m = r.set(&cfg(50.0, 4));
        assert_eq!(
            on_new(&m),
            0,
            "nothing moves before the new checkpoint is warm"
        );
        let generation = m.generation();
        m.update(generation, |p| {
            p.started = true;
            p.planned = 8;
            p.done = 4;
        });
        let half = on_new(&m) as f64 / 4000.0;
        assert!((half - 0.25).abs() < 0.03, "{half}");
        m.update(generation, |p| {
            p.done = 8;
            p.finished = true;
        });
        assert!((on_new(&m) as f64 / 4000.0 - 0.5).abs() < 0.03);
        // A stale task's update is ignored.
        m.abort();
        m.update(generation, |p| p.done = 0);
        assert_eq!(m.status().progress.done, 8);
        assert_eq!(on_new(&m), 0, "abort: everyone back on m@1");
    }

    #[test]
    fn pause_then_resume_never_moves_a_conversation_back() {
        let r = Rollouts::default();
        let m = r.set(&cfg(80.0, 4));
        let generation = m.generation();
        let step = |done: u64| {
            m.update(generation, |p| {
                p.started = true;
                p.planned = 4;
                p.done = done;
            })
        };
        step(1);
        let before: Vec<bool> = (0..2000u64)
            .map(|k| m.choose(mix64(k)).0.as_str() == "m@2")
            .collect();
        m.pause();
        step(3); // the pre-warm goes on while paused; the share holds
        assert!((m.share() - 0.2).abs() < 1e-9);
        assert!(!m.resume(), "a pause needs no new pre-warm");
        assert_eq!(m.generation(), generation, "the running pre-warm continues");
        assert!((m.share() - 0.6).abs() < 1e-9);
        for (k, was_new) in before.iter().enumerate() {
            let now_new = m.choose(mix64(k as u64)).0.as_str() == "m@2";
            assert!(!was_new || now_new, "conversation {k} moved back");
        }
        // Paused from the start (config `state: paused`): pre-warm still runs.
        let mut c = cfg(50.0, 4);
        c.state = RolloutState::Paused;
        let p = r.set(&c);
        assert!(p.wants_prewarm());
        assert_eq!(p.share(), 0.0);
        // After an abort, resuming restarts the pre-warm.
        m.abort();
        assert!(!m.wants_prewarm());
        assert!(m.resume());
        assert!(m.wants_prewarm());
    }

    #[test]
    fn naive_cut_over_and_config_reloads() {
        let r = Rollouts::default();
        let started = r.apply_config(&[cfg(100.0, 0)], &[]);
        assert_eq!(started.len(), 1);
        assert_eq!(
            on_new(&r.get("m").unwrap()),
            4000,
            "no pre-warm: full share at once"
        );
        // Unchanged on reload: kept (with its state).
        r.get("m").unwrap().pause();
        assert!(r
            .apply_config(&[cfg(100.0, 0)], &[cfg(100.0, 0)])
            .is_empty());
        assert_eq!(r.list()[0].state, RolloutState::Paused);
        // Gone from the file: ended.
        r.apply_config(&[], &[cfg(100.0, 0)]);
        assert!(r.get("m").is_none());
    }
}
