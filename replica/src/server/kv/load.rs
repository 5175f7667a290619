//! The one prefix loader: before a request is submitted, load what this replica lacks of
//! the prompt's KV from a [`KvSource`]: held prefix, fetch, import, then the outcome, its
//! reason, the tokens loaded, the source's metrics and log. Never fails the request:
//! whatever goes wrong, the engine computes what is not cached. Memory is bounded: a load
//! reserves its largest footprint in the [`LoadBudget`](super::budget::LoadBudget) first and
//! caches the blocks in batches as they come ([`Sink`]).

use super::link::KvLink;
use super::record::Expected;
use super::sink::{Sink, BATCH_BLOCKS};
use super::source::{KvSource, LoadOutcome};
use std::time::Instant;
use warmpath_core::{CacheSalt, TokenId};
use warmpath_protocol::replica_api::KV_TRANSFER_REASON_IMPORT;

/// The result of [`load`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    /// How it went.
    pub outcome: LoadOutcome,
    /// The outcome's name for this source: the header value and metric label.
    pub label: &'static str,
    /// What ended the run: `complete` when nothing went wrong, `cached` when skipped,
    /// `import` when the pool had no room, `busy` when the load budget had none, otherwise
    /// the source's reason.
    pub reason: &'static str,
    /// Prompt tokens whose KV came from the source.
    pub tokens: usize,
}

/// The reason of a load that found no room in the load budget.
pub const BUSY: &str = "busy";

/// The bytes a load reserves, for a source that reads `read_ahead` records ahead.
fn footprint(link: &KvLink, read_ahead: usize) -> u64 {
    (BATCH_BLOCKS + read_ahead + 1) as u64 * link.block_bytes()
}

/// `Err(bytes one load needs)` when `link`'s budget cannot hold even one load from a source
/// that reads `read_ahead` records ahead.
pub fn check_budget(link: &KvLink, read_ahead: usize) -> Result<(), u64> {
    let need = footprint(link, read_ahead);
    if link.budget().fits(need) {
        Ok(())
    } else {
        Err(need)
    }
}

/// Loads the blocks of `prompt` after those this replica holds from `source` and caches
/// the run it gets, batch by batch while the source delivers, within the load budget.
pub async fn load<S: KvSource>(
    link: &KvLink,
    source: &S,
    prompt: &[TokenId],
    salt: Option<&CacheSalt>,
) -> Load {
    let t0 = Instant::now();
    let bs = link.block_size();
    let (hashes, have) = link.held_prefix(prompt, salt).await;
    if have >= hashes.len() {
        return finish(link, source, t0, LoadOutcome::Skipped, "cached", 0);
    }
    let held = footprint(link, source.read_ahead_blocks());
    let Some(_reservation) = link.budget().reserve(held, source.patience()).await else {
        return finish(link, source, t0, LoadOutcome::None, BUSY, 0);
    };
    let want = Expected {
        layout: link.layout(),
        hashes: &hashes,
        prompt,
    };
    let mut sink = Sink::new(link);
    let reason = source.fetch(&want, salt, have, &mut sink).await;
    let _ = sink.flush().await;
    let expected = hashes.len() - have;
    let cached = sink.cached();
    let strict = source.strict_end();
    let reason = if sink.pool_full() && (!strict || reason == "complete") {
        // The pool could not take every block that came.
        KV_TRANSFER_REASON_IMPORT
    } else {
        reason
    };
    if cached > 0 {
        source.loaded(cached * bs, t0.elapsed());
    }
    let outcome = if cached == 0 {
        LoadOutcome::None
    } else if cached == expected && (!strict || reason == "complete") {
        LoadOutcome::Full
    } else {
        LoadOutcome::Partial
    };
    finish(link, source, t0, outcome, reason, cached * bs)
}

fn finish<S: KvSource>(
    link: &KvLink,
    source: &S,
    t0: Instant,
    outcome: LoadOutcome,
    reason: &'static str,
    tokens: usize,
) -> Load {
    let label = source.label(outcome);
    let m = source.metrics(link.metrics());
    m.loads.with_label_values(&[label, reason]).inc();
    m.tokens.inc_by(tokens as u64);
    m.seconds.observe(t0.elapsed().as_secs_f64());
    if matches!(outcome, LoadOutcome::Partial | LoadOutcome::None) {
        if let Some(message) = source.short_warning() {
            tracing::warn!(outcome = label, reason, tokens, "{message}");
        }
    }
    Load {
        outcome,
        label,
        reason,
        tokens,
    }
}

#[cfg(test)]
mod tests;
