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
//! Every request's checkpoint is `Rollout::checkpoint_for(key, share)`, the key as the
//! gateway makes it ([`RolloutKey`]: a chat's conversation, or the first 8 blocks of a
//! completion). The hot-prefix table is keyed by the first 8 blocks and replayed hottest
//! first, as the gateway's.

use crate::prompt::Prompt;
use crate::workload::RequestSpec;
use router_policy::rollout::STICKY_BLOCKS;
use router_policy::{sticky_key, HotPrefixes, Rollout};
use std::collections::VecDeque;
use warmpath_core::rng::mix64;
use warmpath_core::{BlockSize, CheckpointId, TokenId};

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

/// What keeps a request on one checkpoint (the gateway's rollout key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutKey {
    /// A chat's conversation (`router_policy::conversation_key`): the workload's user.
    Conversation,
    /// Every request its own conversation (one-shot chats).
    Request,
    /// The first 8 blocks of tokens (`router_policy::sticky_key`, completions).
    FirstBlocks,
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
    /// What keeps a request on one checkpoint.
    pub key: RolloutKey,
    /// The share ramps no faster than linearly over this many ms from the start (0: no
    /// floor), as the gateway's `prewarm.ramp_s`.
    pub ramp_ms: f64,
}

/// Seeds the conversation keys drawn from the workload's ids (any fixed odd constants).
const CONVERSATION_SALT: u64 = 0x7C0F_FEE5_0000_0001;
const REQUEST_SALT: u64 = 0x5EED_0000_0000_0003;

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
    /// When the rollout started, ms.
    started_at: f64,
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
            started_at: 0.0,
            pending: VecDeque::new(),
            prewarm_total: 0,
            prewarm_sent: 0,
            prewarm_done: 0,
            prewarm_done_at: None,
        }
    }

    /// The ramp at `now`: the fraction of the pre-warm done (1 without one, and in the
    /// naive arm), no faster than `ramp_ms` ([`router_policy::rollout::ramp`]).
    pub(super) fn ramp(&self, now: f64) -> f64 {
        let replayed = if self.prewarm_total == 0 || self.cfg.arm == RolloutArm::Naive {
            1.0
        } else {
            self.prewarm_done as f64 / self.prewarm_total as f64
        };
        let elapsed = (now - self.started_at).max(0.0) as u64;
        router_policy::rollout::ramp(replayed, elapsed, self.cfg.ramp_ms as u64)
    }

    /// The share of conversations on the new checkpoint at `now`.
    pub(super) fn share(&self, now: f64) -> f64 {
        if !self.started {
            return 0.0;
        }
        self.rollout.share(self.ramp(now))
    }

    /// Picks the checkpoint for `spec` (and, before the start in the prewarm arm, records
    /// its prompt as the gateway would).
    pub(super) fn checkpoint_for(&mut self, spec: &RequestSpec, bs: BlockSize, now: f64) -> CkIx {
        let sticky = STICKY_BLOCKS * bs.0.max(1) as usize;
        let record = !self.started && self.cfg.arm == RolloutArm::Prewarm;
        let n = if record {
            sticky.max(self.cfg.hot_max_tokens)
        } else {
            sticky
        };
        let tokens = prefix_tokens(&spec.prompt, n);
        // The hot-prefix table is keyed by the first blocks, as the gateway's: every
        // conversation behind one system prompt counts towards it.
        let key = sticky_key(&tokens[..tokens.len().min(sticky)], bs, None);
        if record {
            self.hot.record(key, &tokens, &key);
        }
        let conversation = match self.cfg.key {
            RolloutKey::FirstBlocks => key,
            RolloutKey::Conversation => mix64(spec.group ^ CONVERSATION_SALT),
            RolloutKey::Request => mix64(spec.id ^ REQUEST_SALT),
        };
        if self.rollout.checkpoint_for(conversation, self.share(now)) == &self.rollout.to {
            NEW
        } else {
            OLD
        }
    }

    /// Starts the rollout: in the prewarm arm, queues the `prewarm_top` hottest prefixes
    /// for replay, hottest first (as the gateway does).
    pub(super) fn start(&mut self, now: f64) {
        self.started = true;
        self.started_at = now;
        if self.cfg.arm == RolloutArm::Naive {
            return;
        }
        let top: Vec<Vec<TokenId>> = self
            .hot
            .top(self.cfg.prewarm_top, self.cfg.prewarm_min_tokens)
            .into_iter()
            .map(|h| h.tokens.clone())
            .collect();
        self.prewarm_total = top.len();
        self.pending = top.into_iter().collect();
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
            key: RolloutKey::FirstBlocks,
            ramp_ms: 0.0,
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
            class: None,
            system_segments: 0,
        }
    }

    #[test]
    fn prewarm_replays_the_shared_prefix_and_ramps_the_share() {
        let bs = BlockSize(16);
        let mut r = RolloutRun::new(cfg(RolloutArm::Prewarm), CheckpointId::new("m@1"));
        for q in 0..3 {
            assert_eq!(
                r.checkpoint_for(&spec(7, q), bs, 0.0),
                OLD,
                "before the start"
            );
        }
        r.checkpoint_for(&spec(8, 0), bs, 0.0);
        r.start(0.0);
        // One at a time (concurrency 1), hottest first.
        let (a, first) = r.next_prewarm().unwrap();
        assert!(r.next_prewarm().is_none(), "one in flight");
        assert_eq!(r.share(0.0), 0.0, "nothing replayed yet");
        r.prewarm_finished(5.0);
        assert_eq!(r.share(0.0), 0.5);
        let (b, second) = r.next_prewarm().unwrap();
        assert_eq!((a, b), (0, 1));
        r.prewarm_finished(9.0);
        assert_eq!((r.share(0.0), r.prewarm_done_at), (1.0, Some(9.0)));
        assert!(r.next_prewarm().is_none());
        // The group seen three times goes first, cut back to its 256-token system prompt;
        // the one seen once is its whole prompt.
        assert_eq!(first, prefix_tokens(&spec(7, 0).prompt, 256));
        assert_eq!(second.len(), 288);
        assert_eq!(r.checkpoint_for(&spec(7, 9), bs, 0.0), NEW);
    }

    #[test]
    fn conversations_keep_their_checkpoint_and_split_by_the_share() {
        let bs = BlockSize(16);
        let mut c = cfg(RolloutArm::Naive);
        c.target = 0.5;
        c.key = RolloutKey::Conversation;
        let mut r = RolloutRun::new(c, CheckpointId::new("m@1"));
        r.start(0.0);
        // 200 users behind one system prompt: about half move, each with all its turns.
        let mut on_new = 0;
        for user in 0..200u64 {
            let turn = |q: u64| RequestSpec {
                group: user,
                ..spec(1, user * 100 + q)
            };
            let first = r.checkpoint_for(&turn(0), bs, 0.0);
            assert!((1..5).all(|q| r.checkpoint_for(&turn(q), bs, 0.0) == first));
            on_new += usize::from(first == NEW);
        }
        assert!((70..=130).contains(&on_new), "{on_new}");
        // Keyed by the first blocks instead, they would all share one checkpoint.
        let mut fb = RolloutRun::new(cfg(RolloutArm::Naive), CheckpointId::new("m@1"));
        fb.rollout = Rollout::new(CheckpointId::new("m@1"), CheckpointId::new("m@2"), 0.5);
        fb.start(0.0);
        let one = fb.checkpoint_for(&spec(1, 0), bs, 0.0);
        assert!((0..50).all(|q| fb.checkpoint_for(&spec(1, q), bs, 0.0) == one));
    }

    #[test]
    fn naive_moves_everyone_at_once() {
        let bs = BlockSize(16);
        let mut r = RolloutRun::new(cfg(RolloutArm::Naive), CheckpointId::new("m@1"));
        assert_eq!(r.checkpoint_for(&spec(1, 0), bs, 0.0), OLD);
        r.start(0.0);
        assert!(r.next_prewarm().is_none());
        assert_eq!(r.share(0.0), 1.0);
        assert!((0..20).all(|g| r.checkpoint_for(&spec(g, 0), bs, 0.0) == NEW));
    }
}
