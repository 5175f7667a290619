//! The one prefix loader: before a request is submitted, load what this replica lacks of
//! the prompt's KV from a [`KvSource`]: held prefix, fetch, import, then the outcome, its
//! reason, the tokens loaded, the source's metrics and log. Never fails the request:
//! whatever goes wrong, the engine computes what is not cached.

use super::link::KvLink;
use super::record::Expected;
use super::source::{KvSource, LoadOutcome};
use std::time::Instant;
use warmpath_core::{CacheSalt, TokenId};

/// The result of [`load`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    /// How it went.
    pub outcome: LoadOutcome,
    /// The outcome's name for this source: the header value and metric label.
    pub label: &'static str,
    /// What ended the run: `complete` when nothing went wrong, `cached` when skipped,
    /// `import` when the pool had no room, otherwise the source's reason.
    pub reason: &'static str,
    /// Prompt tokens whose KV came from the source.
    pub tokens: usize,
}

/// Loads the blocks of `prompt` after those this replica holds from `source` and caches
/// the run it gets.
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
    let want = Expected {
        layout: link.layout(),
        hashes: &hashes,
        prompt,
    };
    let mut blocks = Vec::new();
    let reason = source.fetch(&want, salt, have, &mut blocks).await;
    let expected = hashes.len() - have;
    let found = blocks.len();
    let cached = link.import(blocks).await;
    let strict = source.strict_end();
    let reason = if cached < found && (!strict || reason == "complete") {
        // The pool could not take every block that came.
        warmpath_protocol::replica_api::KV_TRANSFER_REASON_IMPORT
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
