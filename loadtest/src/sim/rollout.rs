//! A checkpoint rollout inside a simulated run: the cluster serves checkpoint A on
//! `replicas`; at `at_ms`, `new_replicas` replicas on checkpoint B join with cold caches (B's
//! block hashes differ from A's: the checkpoint seeds the hash), and conversations move to B
//! by `router_policy::Rollout`'s sticky, monotone share.
//!
//! Two arms:
//! - **naive**: at `at_ms` the share jumps to the target;
//! - **prewarm**: before `at_ms` the gateway records every prompt in a
//!   `router_policy::HotPrefixes` table; at `at_ms` the `prewarm_top` hottest prefixes are
//!   sent to B's replicas as prefill-only requests (routed by the policy, costing B's
//!   prefill time, filling B's caches), at most `prewarm_concurrency` at a time so live
//!   traffic on B never queues behind the whole replay; the share is
//!   `Rollout::share(ramp)` with `ramp` the fraction of those requests done.
//!
//! Every request's checkpoint is `Rollout::checkpoint_for(sticky_key(first blocks), share)`.
//! The replay goes in the order conversations move as the share rises (the point in
//! `[0, 1)` their key maps to, `router_policy::rollout::position`), so a conversation
//! tends to move once its prefix is warm.

use crate::prompt::Prompt;
use crate::workload::RequestSpec;
use router_policy::rollout::{position, STICKY_BLOCKS};
use router_policy::{sticky_key, BlockSize, CheckpointId, HotPrefixes, Rollout, TokenId};
use std::collections::VecDeque;

/// Which rollout arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutArm {
    /// The share jumps to the target when the new replicas join.
    Naive,
    /// Hot prefixes replayed to the new replicas first; the share ramps with the replay.
    Prewarm,
}

impl RolloutArm {
    /// Stable label.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutArm::Naive => "naive",
            RolloutArm::Prewarm => "prewarm",
        }
    }
}

/// Rollout settings.
#[derive(Clone, Debug)]
pub struct RolloutSim {
    /// The new checkpoint.
    pub to: CheckpointId,
    /// Replicas that join on it.
    pub new_replicas: u32,
    /// When they join and the rollout starts, ms of virtual time.
    pub at_ms: f64,
    /// Target share of conversations on the new checkpoint, `[0, 1]`.
    pub target: f64,
    /// The arm.
    pub arm: RolloutArm,
    /// Hot prefixes replayed (prewarm arm).
    pub prewarm_top: usize,
    /// Pre-warm requests in flight at once.
    pub prewarm_concurrency: usize,
    /// Shortest prefix worth replaying, tokens.
    pub prewarm_min_tokens: usize,
    /// Keys the hot-prefix table keeps.
    pub hot_capacity: usize,
    /// Longest prefix the table keeps per key, tokens.
    pub hot_max_tokens: usize,
}

/// Which of the two checkpoints (0: the old one, 1: the new one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CkIx(pub u8);

/// Index of the old checkpoint.
pub const OLD: CkIx = CkIx(0);
/// Index of the new checkpoint.
pub const NEW: CkIx = CkIx(1);

/// The rollout's state during a run.
#[derive(Debug)]
pub(super) struct RolloutRun {
    cfg: RolloutSim,
    rollout: Rollout,
    /// Hot prefixes, tagged with their conversation key.
    hot: HotPrefixes<u64>,
    started: bool,
    /// Pre-warm prompts not sent yet, in replay order.
    pending: VecDeque<Vec<TokenId>>,
    prewarm_total: usize,
    prewarm_sent: usize,
    prewarm_done: usize,
    /// When the last pre-warm request finished, ms.
    pub(super) prewarm_done_at: Option<f64>,
}

/// The first `n` tokens of `prompt` (generated lazily: long prompts cost only `n`).
pub fn prefix_tokens(prompt: &Prompt, n: usize) -> Vec<TokenId> {
    prompt
        .segments
        .iter()
        .flat_map(|s| s.token_ids())
        .take(n)
        .collect()
}

impl RolloutRun {
    pub(super) fn new(cfg: RolloutSim, from: CheckpointId) -> Self {
        let rollout = Rollout::new(from, cfg.to.clone(), cfg.target);
        let hot = HotPrefixes::new(cfg.hot_capacity, cfg.hot_max_tokens);
        Self {
            cfg,
            rollout,
            hot,
            started: false,
            pending: VecDeque::new(),
            prewarm_total: 0,
            prewarm_sent: 0,
            prewarm_done: 0,
            prewarm_done_at: None,
        }
    }

    /// Fraction of the pre-warm done (1 without one).
    pub(super) fn ramp(&self) -> f64 {
        if self.prewarm_total == 0 {
            1.0
        } else {
            self.prewarm_done as f64 / self.prewarm_total as f64
        }
    }

    /// The share of conversations on the new checkpoint now.
    pub(super) fn share(&self) -> f64 {
        if !self.started {
            return 0.0;
        }
        match self.cfg.arm {
            RolloutArm::Naive => self.rollout.share(1.0),
            RolloutArm::Prewarm => self.rollout.share(self.ramp()),
        }
    }

    /// Picks the checkpoint for `spec` (and, before the start in the prewarm arm, records
    /// its prompt as the gateway would).
    pub(super) fn checkpoint_for(&mut self, spec: &RequestSpec, bs: BlockSize) -> CkIx {
        let sticky = STICKY_BLOCKS * bs.0.max(1) as usize;
        let record = !self.started && self.cfg.arm == RolloutArm::Prewarm;
        let n = if record {
            sticky.max(self.cfg.hot_max_tokens)
        } else {
            sticky
        };
        let tokens = prefix_tokens(&spec.prompt, n);
        let key = sticky_key(&tokens[..tokens.len().min(sticky)], bs, None);
        if record {
            self.hot.record(key, &tokens, &key);
        }
        if self.rollout.checkpoint_for(key, self.share()) == &self.rollout.to {
            NEW
        } else {
            OLD
        }
    }

    /// Starts the rollout: in the prewarm arm, queues the `prewarm_top` hottest prefixes
    /// for replay in the order their conversations move (see [`RolloutRun::next_prewarm`]).
    pub(super) fn start(&mut self) {
        self.started = true;
        if self.cfg.arm == RolloutArm::Naive {
            return;
        }
        let mut top: Vec<(f64, Vec<TokenId>)> = self
            .hot
            .top(self.cfg.prewarm_top, self.cfg.prewarm_min_tokens)
            .into_iter()
            .map(|h| (position(h.key), h.tokens.clone()))
            .collect();
        top.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.prewarm_total = top.len();
        self.pending = top.into_iter().map(|(_, t)| t).collect();
        self.hot.clear();
    }

    /// The next pre-warm prompt to send (its number and tokens), if one is pending and
    /// fewer than `prewarm_concurrency` are in flight.
    pub(super) fn next_prewarm(&mut self) -> Option<(usize, Vec<TokenId>)> {
        let in_flight = self.prewarm_sent - self.prewarm_done;
        if in_flight >= self.cfg.prewarm_concurrency.max(1) {
            return None;
        }
        let t = self.pending.pop_front()?;
        self.prewarm_sent += 1;
        Some((self.prewarm_sent - 1, t))
    }

    /// One pre-warm request finished (or could not be sent) at `now`.
    pub(super) fn prewarm_finished(&mut self, now: f64) {
        self.prewarm_done += 1;
        if self.prewarm_done == self.prewarm_total {
            self.prewarm_done_at = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Segment;

    fn cfg(arm: RolloutArm) -> RolloutSim {
        RolloutSim {
            to: CheckpointId::new("m@2"),
            new_replicas: 2,
            at_ms: 1000.0,
            target: 1.0,
            arm,
            prewarm_top: 4,
            prewarm_concurrency: 1,
            prewarm_min_tokens: 32,
            hot_capacity: 64,
            hot_max_tokens: 1024,
        }
    }

    fn spec(system: u64, question: u64) -> RequestSpec {
        RequestSpec {
            id: 0,
            group: system,
            arrival_ms: 0.0,
            prompt: Prompt {
                segments: vec![
                    Segment::new(&[system], 256, true),
                    Segment::new(&[system, question], 32, false),
                ],
            },
            output_tokens: 4,
        }
    }

    #[test]
    fn prewarm_replays_the_shared_prefix_and_ramps_the_share() {
        let bs = BlockSize(16);
        let mut r = RolloutRun::new(cfg(RolloutArm::Prewarm), CheckpointId::new("m@1"));
        for q in 0..3 {
            assert_eq!(r.checkpoint_for(&spec(7, q), bs), OLD, "before the start");
        }
        r.checkpoint_for(&spec(8, 0), bs);
        r.start();
        // One at a time (concurrency 1), in the order the conversations move.
        let (a, first) = r.next_prewarm().unwrap();
        assert!(r.next_prewarm().is_none(), "one in flight");
        assert_eq!(r.share(), 0.0, "nothing replayed yet");
        r.prewarm_finished(5.0);
        assert_eq!(r.share(), 0.5);
        let (b, second) = r.next_prewarm().unwrap();
        assert_eq!((a, b), (0, 1));
        r.prewarm_finished(9.0);
        assert_eq!((r.share(), r.prewarm_done_at), (1.0, Some(9.0)));
        assert!(r.next_prewarm().is_none());
        // The group seen three times is cut back to its 256-token system prompt; the one
        // seen once is its whole prompt.
        let mut lens = [first.len(), second.len()];
        lens.sort_unstable();
        assert_eq!(lens, [256, 288]);
        let group7 = if first.len() == 256 { &first } else { &second };
        assert_eq!(*group7, prefix_tokens(&spec(7, 0).prompt, 256));
        // Replayed in the order they move: the first one moves at a lower share.
        let key = |s: &RequestSpec| sticky_key(&prefix_tokens(&s.prompt, 128), bs, None);
        let (p7, p8) = (position(key(&spec(7, 0))), position(key(&spec(8, 0))));
        assert_eq!(first.len() == 256, p7 < p8);
        assert_eq!(r.checkpoint_for(&spec(7, 9), bs), NEW);
    }

    #[test]
    fn naive_moves_everyone_at_once() {
        let bs = BlockSize(16);
        let mut r = RolloutRun::new(cfg(RolloutArm::Naive), CheckpointId::new("m@1"));
        assert_eq!(r.checkpoint_for(&spec(1, 0), bs), OLD);
        r.start();
        assert!(r.next_prewarm().is_none());
        assert_eq!(r.share(), 1.0);
        assert!((0..20).all(|g| r.checkpoint_for(&spec(g, 0), bs) == NEW));
    }
}
