//! Checkpoint rollouts: one model served by replicas on two checkpoints at once, and which
//! of the two a request goes to.
//!
//! A rollout moves a model from checkpoint `from` to checkpoint `to`. Every conversation
//! has a key (the hash of its first blocks of tokens, salted per tenant, computed the same
//! way whatever the checkpoint: see [`sticky_key`]), and the key maps to a fixed point `u` in
//! `[0, 1)`. A request goes to `to` when `u < share`:
//! - **sticky**: a conversation's turns share their first blocks, so they share a key, and
//!   with it one checkpoint, whose cache holds their prefix;
//! - **monotone**: raising the share only moves conversations from `from` to `to`, never
//!   back, so a ramp never sends a warm conversation back to a cache it left;
//! - **abort** sets the share to 0: every conversation returns to `from`.
//!
//! The share a request sees is the operator's target times the ramp (`0..=1`): how far the
//! new checkpoint's replicas have been pre-warmed with the old checkpoint's hot prefixes
//! ([`Rollout::share`]). Paused holds the share where it was.

use serde::{Deserialize, Serialize};
use warmpath_core::hash::{block_hashes, HashNamespace, RootSeed};
use warmpath_core::ids::{BlockSize, CacheSalt, CheckpointId, TokenId};
use warmpath_core::rng::mix64;

/// Where a rollout stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutState {
    /// Traffic moves to `to` up to the target share as pre-warm progresses.
    #[default]
    Active,
    /// The share stays where it was when paused.
    Paused,
    /// Every request goes to `from`.
    Aborted,
}

/// One model's rollout from one checkpoint to another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    /// The checkpoint being replaced.
    pub from: CheckpointId,
    /// The new checkpoint.
    pub to: CheckpointId,
    /// Target share of conversations on `to`, in `[0, 1]` (the canary fraction).
    pub target: f64,
    /// Active, paused or aborted.
    pub state: RolloutState,
    /// The share when it was paused (held while paused).
    pub paused_share: f64,
}

impl Rollout {
    /// An active rollout towards `target` (clamped to `[0, 1]`).
    pub fn new(from: CheckpointId, to: CheckpointId, target: f64) -> Self {
        Self {
            from,
            to,
            target: target.clamp(0.0, 1.0),
            state: RolloutState::Active,
            paused_share: 0.0,
        }
    }

    /// The share of conversations on `to` now, given the pre-warm `ramp` in `[0, 1]` (1 when
    /// pre-warm is off: a naive cut-over).
    pub fn share(&self, ramp: f64) -> f64 {
        match self.state {
            RolloutState::Active => self.target * ramp.clamp(0.0, 1.0),
            RolloutState::Paused => self.paused_share,
            RolloutState::Aborted => 0.0,
        }
    }

    /// Pauses at the share the current `ramp` gives.
    pub fn pause(&mut self, ramp: f64) {
        if self.state == RolloutState::Active {
            self.paused_share = self.share(ramp);
            self.state = RolloutState::Paused;
        }
    }

    /// Resumes a paused (or aborted) rollout.
    pub fn resume(&mut self) {
        self.state = RolloutState::Active;
    }

    /// Sends every request back to `from`.
    pub fn abort(&mut self) {
        self.state = RolloutState::Aborted;
    }

    /// The checkpoint for a conversation with `key` at `share`.
    pub fn checkpoint_for(&self, key: u64, share: f64) -> &CheckpointId {
        if position(key) < share {
            &self.to
        } else {
            &self.from
        }
    }
}

/// The pre-warm ramp in `[0, 1]`: the fraction of planned replays done (`replayed`), and
/// no faster than linear over `min_ramp_ms` from the rollout's start (`elapsed_ms` ago; 0
/// for no floor). The floor spreads what pre-warm cannot replay (say, conversations' private
/// histories) over time instead of moving every conversation at once.
pub fn ramp(replayed: f64, elapsed_ms: u64, min_ramp_ms: u64) -> f64 {
    let timed = if min_ramp_ms == 0 {
        1.0
    } else {
        elapsed_ms as f64 / min_ramp_ms as f64
    };
    replayed.min(timed).clamp(0.0, 1.0)
}

/// Blocks of a prompt that key its conversation for a rollout.
pub const STICKY_BLOCKS: usize = 8;

/// The conversation key of a prompt without message structure (a text or token-id
/// completion): the chained hash of its first [`STICKY_BLOCKS`] blocks (the whole prompt
/// when shorter), under a namespace that names no checkpoint, salted per tenant. Prompts
/// share it once their common prefix covers those blocks, so a shared prefix of at least
/// that length stays on one checkpoint. Chats use [`conversation_key`].
pub fn sticky_key(tokens: &[TokenId], block_size: BlockSize, salt: Option<&CacheSalt>) -> u64 {
    sticky_key_seeded(sticky_seed(salt), tokens, block_size)
}

/// The seed [`sticky_key`] hashes under for `salt`: a caller that keys many prompts of one
/// tenant computes it once and passes it to [`sticky_key_seeded`].
pub fn sticky_seed(salt: Option<&CacheSalt>) -> RootSeed {
    HashNamespace::new(CheckpointId::new("warmpath/rollout-key"))
        .with_salt(salt.cloned())
        .root_seed()
}

/// [`sticky_key`] under a seed from [`sticky_seed`].
pub fn sticky_key_seeded(seed: RootSeed, tokens: &[TokenId], block_size: BlockSize) -> u64 {
    let bs = block_size.0.max(1) as usize;
    let n = tokens.len().min(STICKY_BLOCKS * bs);
    let full = n / bs * bs;
    let hashes = block_hashes(seed, &tokens[..full], block_size);
    // A tail shorter than a block (a short prompt) still keys the conversation.
    let mut key = hashes.last().map_or(seed.0, |h| h.0);
    for t in &tokens[full..n] {
        key = mix64(key ^ u64::from(t.0));
    }
    key
}

/// The conversation key of a chat: its messages up to and including the first `user`
/// message (roles and contents), salted per tenant. Every later turn repeats them, so a
/// conversation keeps its key however short its first turn was, and conversations behind
/// one long system prompt still differ by their first question. Gateways that share no
/// state agree on it.
pub fn conversation_key<'m>(
    messages: impl IntoIterator<Item = (&'m str, &'m str)>,
    salt: Option<&CacheSalt>,
) -> u64 {
    let seed = HashNamespace::new(CheckpointId::new("warmpath/conversation-key"))
        .with_salt(salt.cloned())
        .root_seed();
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(seed.0);
    for (role, content) in messages {
        for part in [role, content] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        if role == "user" {
            break;
        }
    }
    h.digest()
}

/// Where conversation `key` sits in `[0, 1)`: it is on the new checkpoint exactly while the
/// share exceeds this point, so this is also the share at which it moves.
pub fn position(key: u64) -> f64 {
    (mix64(key ^ 0x5EED_00C0_FFEE) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_keeps_its_key_across_turns_and_differs_by_its_first_question() {
        let salt = CacheSalt::new("t");
        let sys = "You are helpful. ".repeat(100);
        let turn1 = [("system", sys.as_str()), ("user", "hi")];
        let turn2 = [
            ("system", sys.as_str()),
            ("user", "hi"),
            ("assistant", "hello"),
            ("user", "how are you?"),
        ];
        let k = conversation_key(turn1, Some(&salt));
        assert_eq!(k, conversation_key(turn2, Some(&salt)));
        let other = [("system", sys.as_str()), ("user", "hey")];
        assert_ne!(k, conversation_key(other, Some(&salt)));
        assert_ne!(k, conversation_key(turn1, None), "salted per tenant");
        // Lengths are framed: moving bytes between role and content changes the key.
        assert_ne!(
            conversation_key([("user", "ab")], None),
            conversation_key([("usera", "b")], None)
        );
        // The point a key moves at is the point `checkpoint_for` flips.
        let r = Rollout::new(CheckpointId::new("a"), CheckpointId::new("b"), 1.0);
        let p = position(k);
        assert_eq!(r.checkpoint_for(k, p).as_str(), "a");
        assert_eq!(r.checkpoint_for(k, p + 1e-9).as_str(), "b");
    }

    fn ro(target: f64) -> Rollout {
        Rollout::new(CheckpointId::new("m@1"), CheckpointId::new("m@2"), target)
    }

    #[test]
    fn share_splits_conversations_by_weight() {
        let r = ro(0.3);
        let on_new = (0..20_000u64)
            .filter(|k| r.checkpoint_for(mix64(*k), r.share(1.0)) == &r.to)
            .count();
        let frac = on_new as f64 / 20_000.0;
        assert!((frac - 0.3).abs() < 0.02, "{frac}");
    }

    #[test]
    fn raising_the_share_only_moves_conversations_forward() {
        let r = ro(1.0);
        for k in 0..5_000u64 {
            let key = mix64(k);
            let mut on_new = false;
            for step in 0..=20 {
                let now_new = r.checkpoint_for(key, f64::from(step) / 20.0) == &r.to;
                assert!(!on_new || now_new, "key {key} moved back at step {step}");
                on_new = now_new;
            }
            assert!(on_new, "share 1 puts everyone on the new checkpoint");
        }
    }

    #[test]
    fn the_ramp_waits_for_the_slower_of_replay_and_time() {
        assert_eq!(ramp(1.0, 0, 0), 1.0);
        assert_eq!(ramp(0.5, 0, 0), 0.5);
        assert_eq!(ramp(1.0, 15_000, 30_000), 0.5);
        assert_eq!(ramp(0.25, 15_000, 30_000), 0.25);
        assert_eq!(ramp(1.0, 90_000, 30_000), 1.0);
    }

    #[test]
    fn pause_holds_and_abort_returns_everyone() {
        let mut r = ro(0.8);
        assert_eq!(r.share(0.5), 0.4);
        r.pause(0.5);
        assert_eq!(r.share(1.0), 0.4, "paused: the ramp no longer moves it");
        r.resume();
        assert_eq!(r.share(1.0), 0.8);
        r.abort();
        assert_eq!(r.share(1.0), 0.0);
        assert!((0..1000u64).all(|k| r.checkpoint_for(mix64(k), r.share(1.0)) == &r.from));
    }

    #[test]
    fn sticky_key_follows_the_conversation_not_the_checkpoint() {
        let bs = BlockSize(4);
        let first: Vec<TokenId> = (0..40).map(TokenId).collect();
        let mut second = first.clone();
        second.extend((100..140).map(TokenId));
        let salt = CacheSalt::new("tenant-a");
        let k1 = sticky_key(&first, bs, Some(&salt));
        assert_eq!(
            k1,
            sticky_key(&second, bs, Some(&salt)),
            "next turn, same key"
        );
        assert_ne!(k1, sticky_key(&first, bs, None), "salted per tenant");
        let other: Vec<TokenId> = (1..41).map(TokenId).collect();
        assert_ne!(k1, sticky_key(&other, bs, Some(&salt)));
        // Short prompts (under a block) still differ.
        assert!((0.0..1.0).contains(&position(k1)));
        assert_ne!(
            sticky_key(&[TokenId(1)], bs, None),
            sticky_key(&[TokenId(2)], bs, None)
        );
    }
}
