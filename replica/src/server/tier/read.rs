//! The tier's read side: on a local miss, take the consecutive run of the prompt's next
//! blocks that the tier holds, checked record by record, and cache it before the request
//! is submitted.

use super::Tier;
use crate::server::http::AppState;
use crate::server::transfer::engine::{held_prefix, import};
use crate::server::transfer::record::{record_layout, Expected};
use crate::server::worker::ImportBlock;
use futures_util::stream::{FuturesOrdered, StreamExt};
use std::time::Instant;
use tokio::time::timeout_at;
use warmpath_core::{CacheSalt, TokenId};
use warmpath_protocol::kv_block::tier_key;

/// Keys per `MGET`. Every group is sent at once; the groups are read in order, so a late
/// group ends the run at its first block.
const GROUP: usize = 8;

/// How a lookup went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierOutcome {
    /// Every block this replica lacked came from the tier.
    Hit,
    /// A leading run came from the tier; the engine computes the rest.
    Partial,
    /// Nothing came from the tier (`reason` says why).
    Miss,
    /// This replica held every full block already: nothing was asked.
    Skipped,
}

impl TierOutcome {
    /// The header value and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            TierOutcome::Hit => "hit",
            TierOutcome::Partial => "partial",
            TierOutcome::Miss => "miss",
            TierOutcome::Skipped => "skipped",
        }
    }
}

/// The result of [`lookup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierLookup {
    /// How it went.
    pub outcome: TierOutcome,
    /// What ended the run: `complete` (every block found), `absent` (the next block is
    /// not in the tier), `corrupt`, `mismatch` (another layout, checkpoint, salt or
    /// prompt), `timeout`, `unavailable` (no connection or a Redis error), `import` (the
    /// pool had no room), `cached` (skipped).
    pub reason: &'static str,
    /// Prompt tokens whose KV came from the tier.
    pub tokens: usize,
}

/// Looks up the blocks of `prompt` after those this replica holds and caches the run it
/// gets. Never fails the request: whatever goes wrong, the engine computes the rest.
pub async fn lookup(
    state: &AppState,
    tier: &Tier,
    prompt: &[TokenId],
    salt: Option<&CacheSalt>,
) -> TierLookup {
    let t0 = Instant::now();
    let bs = state.block_size;
    let (hashes, have) = held_prefix(state, prompt, salt).await;
    if have >= hashes.len() {
        return finish(state, t0, TierOutcome::Skipped, "cached", 0);
    }
    let want = Expected {
        layout: record_layout(state.facts.kv_layout),
        hashes: &hashes,
        prompt,
    };
    let mut blocks = Vec::new();
    let reason = fetch(tier, &want, have, &mut blocks).await;
    let found = blocks.len();
    let cached = import(state, blocks).await;
    let reason = if cached < found { "import" } else { reason };
    if cached > 0 {
        tier.rate.observe(cached * bs, t0.elapsed());
    }
    let outcome = match cached {
        0 => TierOutcome::Miss,
        n if have + n == hashes.len() => TierOutcome::Hit,
        _ => TierOutcome::Partial,
    };
    finish(state, t0, outcome, reason, cached * bs)
}

/// Reads blocks `skip..` into `blocks` (checked, in chain order) until one is missing, bad
/// or late; returns what ended the run.
async fn fetch(
    tier: &Tier,
    want: &Expected<'_>,
    skip: usize,
    blocks: &mut Vec<ImportBlock>,
) -> &'static str {
    let Some(conn) = tier.conn.get() else {
        tier.conn.failed("read", &"not connected");
        return "unavailable";
    };
    let deadline = tokio::time::Instant::now() + tier.timeout;
    let keys: Vec<String> = want.hashes[skip..].iter().map(|h| tier_key(*h)).collect();
    let mut groups: FuturesOrdered<_> = keys
        .chunks(GROUP)
        .map(|g| {
            let mut c = conn.clone();
            let mut cmd = redis::cmd("MGET");
            cmd.arg(g);
            async move { cmd.query_async::<Vec<Option<Vec<u8>>>>(&mut c).await }
        })
        .collect();
    loop {
        let values = match timeout_at(deadline, groups.next()).await {
            Err(_) => return "timeout",
            Ok(None) => return "complete",
            Ok(Some(Err(e))) => {
                tier.conn.failed("read", &e);
                return "unavailable";
            }
            Ok(Some(Ok(v))) => v,
        };
        for v in values {
            let Some(bytes) = v else {
                return "absent";
            };
            match want.check(skip + blocks.len(), &bytes) {
                Ok(b) => blocks.push(b),
                Err(r) => return r.as_str(),
            }
        }
    }
}

fn finish(
    state: &AppState,
    t0: Instant,
    outcome: TierOutcome,
    reason: &'static str,
    tokens: usize,
) -> TierLookup {
    let m = &state.metrics;
    m.kv_tier_lookups
        .with_label_values(&[outcome.as_str(), reason])
        .inc();
    m.kv_tier_hit_tokens.inc_by(tokens as u64);
    m.kv_tier_lookup_seconds.observe(t0.elapsed().as_secs_f64());
    TierLookup {
        outcome,
        reason,
        tokens,
    }
}
