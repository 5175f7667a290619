//! One model's rollout in force: the rule's state, the pre-warm's progress, and the
//! generation that orders every change to it (a pre-warm task of an older generation
//! changes nothing).

use crate::config::{PrewarmConfig, RolloutConfig};
use parking_lot::Mutex;
use router_policy::{Rollout, RolloutState};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use warmpath_core::CheckpointId;

/// Pre-warm task generations, unique in the process: a rollout that replaces another never
/// reuses one of its values.
static TASKS: AtomicU64 = AtomicU64::new(1);

fn next_task() -> u64 {
    TASKS.fetch_add(1, Ordering::AcqRel)
}

/// Wall-clock milliseconds since the Unix epoch: the ramp's start is shared by a fleet.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

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

/// An operator's change to a rollout in force.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Change {
    /// Hold the share.
    Pause,
    /// Go on (after an abort: the time ramp and an unfinished pre-warm start over).
    Resume,
    /// Every conversation back to `from`.
    Abort,
}

/// How a rollout is shared through the fleet's store.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shared {
    /// The setting's id (a new `PUT` makes a new one).
    pub rev: u64,
    /// The store's generation this gateway last wrote or read ([`PENDING`] while its own
    /// write is under way).
    pub gen: u64,
    /// Tag of the gateway running the pre-warm.
    pub owner: String,
    /// Whether that is this gateway.
    pub mine: bool,
}

/// The generation of a shared rollout whose first write is under way: newer than any the
/// store holds, so the poller never replaces it with an older snapshot.
pub(crate) const PENDING: u64 = u64::MAX;

struct Runtime {
    rollout: Rollout,
    prewarm: PrewarmConfig,
    progress: Progress,
    /// Bumped on every progress change: orders the owner's progress writes.
    progress_seq: u64,
    /// The pre-warm generation in force; a change that stops the running pre-warm takes a
    /// new one.
    task: u64,
    /// The generation whose pre-warm task was started (at most one per generation).
    claimed: Option<u64>,
    /// When the ramp started (`prewarm.ramp_s` counts from here), Unix milliseconds.
    since_ms: u64,
    shared: Option<Shared>,
    /// A change applied here that the store has not taken yet (Redis was unreachable).
    unsynced: bool,
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
        let elapsed = now_ms().saturating_sub(self.since_ms);
        router_policy::rollout::ramp(replayed, elapsed, self.prewarm.ramp_s * 1000)
    }

    fn wants_prewarm(&self) -> bool {
        self.rollout.state != RolloutState::Aborted
            && self.prewarm.top_n > 0
            && self.rollout.target > 0.0
            && !self.progress.finished
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
    /// The fleet store's generation of a shared rollout (absent when this gateway's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

/// One model's rollout in force.
pub(crate) struct ModelRollout {
    /// The model.
    pub model: String,
    /// The config it was put in force with.
    pub cfg: RolloutConfig,
    inner: Mutex<Runtime>,
}

impl ModelRollout {
    pub(super) fn new(cfg: &RolloutConfig) -> Self {
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
            inner: Mutex::new(Runtime {
                rollout,
                prewarm: cfg.prewarm.clone(),
                progress: Progress::default(),
                progress_seq: 0,
                task: next_task(),
                claimed: None,
                since_ms: now_ms(),
                shared: None,
                unsynced: false,
            }),
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

    /// The pre-warm generation in force.
    pub(crate) fn generation(&self) -> u64 {
        self.inner.lock().task
    }

    /// The pre-warm settings.
    pub(crate) fn prewarm(&self) -> PrewarmConfig {
        self.inner.lock().prewarm.clone()
    }

    /// Whether a pre-warm should run: not aborted (a paused rollout keeps warming; the
    /// pause only holds the share), pre-warm on, a share above 0 (at 0% no conversation
    /// moves: nothing to warm for), not finished.
    #[cfg(test)]
    pub(crate) fn wants_prewarm(&self) -> bool {
        self.inner.lock().wants_prewarm()
    }

    /// Claims the pre-warm of the generation in force: `Some(generation)` for the one
    /// caller that starts its task, `None` when it needs none, one was started already, or
    /// another gateway of the fleet runs it.
    pub(crate) fn claim_prewarm(&self) -> Option<u64> {
        let mut g = self.inner.lock();
        let elsewhere = g.shared.as_ref().is_some_and(|s| !s.mine);
        if elsewhere || !g.wants_prewarm() || g.claimed == Some(g.task) {
            return None;
        }
        g.claimed = Some(g.task);
        Some(g.task)
    }

    /// Records pre-warm progress, from the task of generation `generation` only (checked
    /// under the same lock a change takes). True when it was taken.
    pub(crate) fn update(&self, generation: u64, f: impl FnOnce(&mut Progress)) -> bool {
        let mut g = self.inner.lock();
        if g.task != generation {
            return false;
        }
        f(&mut g.progress);
        g.progress_seq += 1;
        true
    }

    /// The progress and its sequence number (higher: newer).
    pub(crate) fn progress(&self) -> (u64, Progress) {
        let g = self.inner.lock();
        (g.progress_seq, g.progress)
    }

    /// Stops the running pre-warm (the rollout was replaced or ended).
    pub(super) fn stop_prewarm(&self) {
        self.inner.lock().task = next_task();
    }

    /// How it is shared through the fleet's store, if it is.
    pub(crate) fn shared(&self) -> Option<Shared> {
        self.inner.lock().shared.clone()
    }

    /// Marks it shared through the fleet's store.
    pub(crate) fn set_shared(&self, shared: Shared) {
        self.inner.lock().shared = Some(shared);
    }

    /// Marks a change applied here that the store has not taken (Redis unreachable): the
    /// fleet poller writes it when Redis answers ([`super::resync`]).
    pub(crate) fn mark_unsynced(&self) {
        self.inner.lock().unsynced = true;
    }

    /// Whether a change applied here waits to be written to the store.
    pub(crate) fn unsynced(&self) -> bool {
        self.inner.lock().unsynced
    }

    /// The store took the change, or refused it for a newer state.
    pub(crate) fn synced(&self) {
        self.inner.lock().unsynced = false;
    }

    /// Records the store's generation after a write or a read.
    pub(crate) fn set_generation(&self, gen: u64) {
        if let Some(s) = self.inner.lock().shared.as_mut() {
            s.gen = gen;
        }
    }

    /// When the ramp started, Unix milliseconds.
    pub(crate) fn ramp_start_ms(&self) -> u64 {
        self.inner.lock().since_ms
    }

    /// State and paused share, as the fleet's record carries them.
    pub(crate) fn parts(&self) -> (RolloutState, f64) {
        let g = self.inner.lock();
        (g.rollout.state, g.rollout.paused_share)
    }

    /// State, paused share and ramp start as they will be after `c`, changing nothing
    /// (what a shared change writes before it applies here).
    pub(crate) fn preview(&self, c: Change) -> (RolloutState, f64, u64) {
        let g = self.inner.lock();
        let mut r = g.rollout.clone();
        let mut since_ms = g.since_ms;
        match c {
            Change::Pause => r.pause(g.ramp()),
            Change::Resume => {
                if r.state == RolloutState::Aborted {
                    since_ms = now_ms();
                }
                r.resume();
            }
            Change::Abort => r.abort(),
        }
        (r.state, r.paused_share, since_ms)
    }

    /// Applies `c` here. True when it resumed from an abort (the caller restarts an
    /// unfinished pre-warm).
    pub(crate) fn apply(&self, c: Change) -> bool {
        match c {
            Change::Pause => self.pause(),
            Change::Resume => return self.resume(),
            Change::Abort => self.abort(),
        }
        false
    }

    /// Takes a newer record from the fleet's store: its state, paused share and ramp start.
    /// Returns true when it resumed from an abort (the owner restarts its pre-warm).
    pub(crate) fn apply_remote(
        &self,
        state: RolloutState,
        paused_share: f64,
        since_ms: u64,
    ) -> bool {
        let now = self.inner.lock().rollout.state;
        let resumed = match (now, state) {
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
        };
        self.inner.lock().since_ms = since_ms;
        resumed
    }

    /// Takes the owner's pre-warm progress (on a gateway that does not run the pre-warm).
    pub(crate) fn apply_progress(&self, progress: Progress) {
        self.inner.lock().progress = progress;
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
            g.since_ms = now_ms();
        }
        aborted
    }

    /// Every conversation back to `from`; a running pre-warm stops.
    pub(crate) fn abort(&self) {
        let mut g = self.inner.lock();
        g.rollout.abort();
        g.task = next_task();
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
            generation: g.shared.as_ref().map(|s| s.gen).filter(|g| *g != PENDING),
        }
    }
}
