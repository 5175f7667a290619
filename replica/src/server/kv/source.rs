//! [`KvSource`]: a place a prompt's following blocks can come from instead of being
//! computed. Both remote sources are on this seam: the shared tier in Redis
//! ([`Tier`](super::tier::Tier), `--kv-store`) and a prefill replica
//! ([`Peer`](super::peer::Peer), `x-warmpath-prefill-from`). The one loader,
//! [`load`](super::load::load), drives any of them the same way: it asks the engine loop
//! which leading blocks it holds, has the source fetch the following ones (each checked by
//! [`Expected::check`] against this replica's layout, chain and prompt), caches the run of
//! good blocks, then counts, times and names the outcome.
//!
//! # A third source
//! Host memory, a local disk, another engine's KV connector: one new file under `kv/`
//! with a type that implements [`KvSource`]:
//! - [`fetch`](KvSource::fetch): read the records of blocks `skip..` of `want.hashes` in
//!   chain order, push each one [`Expected::check`] accepts into the [`Sink`]
//!   (`skip + sink.taken()` is its index; the sink caches them in batches as they come and
//!   says when the pool is full) and stop at the first that is missing, refused or late;
//!   return what ended the run (`complete` when every block came; `import` when the sink
//!   refused; a [`Refusal`](super::record::Refusal)'s `as_str()` when a check failed;
//!   otherwise a reason of the source's own, such as `absent`, `timeout` or
//!   `unavailable`). It holds its own time limit, and reads at most
//!   [`read_ahead_blocks`](KvSource::read_ahead_blocks) records ahead of the one it checks.
//! - [`patience`](KvSource::patience): how long a load may wait for room in the load
//!   budget ([`LoadBudget`](super::budget::LoadBudget)) before it gives up (`busy`).
//! - [`name`](KvSource::name), [`label`](KvSource::label) (the outcome names its header
//!   and metric use) and [`metrics`](KvSource::metrics) (its metric family: loads by
//!   outcome and reason, tokens, seconds), plus [`strict_end`](KvSource::strict_end) and,
//!   optionally, [`loaded`](KvSource::loaded) and [`short_warning`](KvSource::short_warning).
//!
//! Besides that file: one line where sources are chosen (`http/generate.rs`, before a
//! request is submitted, `load(&state.kv, &source, &prompt, salt)`), and, for a metric
//! family of its own, its three metrics registered in `metrics.rs`.

use super::record::Expected;
use super::sink::Sink;
use crate::server::metrics::Metrics;
use prometheus::{Histogram, IntCounter, IntCounterVec};
use std::future::Future;
use std::time::Duration;
use warmpath_core::CacheSalt;

/// How a load went, in the source's words ([`KvSource::label`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadOutcome {
    /// Every block the replica lacked came from the source (tier `hit`, peer `ok`).
    Full,
    /// A leading run came from the source; the engine computes the rest (`partial`).
    Partial,
    /// Nothing came from the source (tier `miss`, peer `failed`).
    None,
    /// The replica held every full block already: nothing was asked (`skipped`).
    Skipped,
}

/// A source's metric family.
#[derive(Clone, Copy, Debug)]
pub struct SourceMetrics<'m> {
    /// Loads, by `outcome` ([`KvSource::label`]) and `reason`.
    pub loads: &'m IntCounterVec,
    /// Prompt tokens whose KV came from the source.
    pub tokens: &'m IntCounter,
    /// Time of a load (fetch and import).
    pub seconds: &'m Histogram,
}

/// A place a prompt's following KV blocks can come from.
pub trait KvSource {
    /// The source's name (`tier`, `peer`).
    fn name(&self) -> &'static str;

    /// The outcome's name in this source's header value and metric label.
    fn label(&self, outcome: LoadOutcome) -> &'static str;

    /// This source's metric family in `m`.
    fn metrics<'m>(&self, m: &'m Metrics) -> SourceMetrics<'m>;

    /// Whether the run has an explicit end (a stream's end frame): then a load is
    /// [`Full`](LoadOutcome::Full) only when the run ended `complete`, and a pool that
    /// took fewer blocks than arrived is reported as `import` only when nothing else ended
    /// the run first. A source that reads a known set of keys (the tier) says `false`: a
    /// full count is full, and the pool's refusal always names the reason.
    fn strict_end(&self) -> bool;

    /// Records this source may hold beyond the one being checked (its read-ahead): with
    /// the sink's batch, what a load reserves in the load budget.
    fn read_ahead_blocks(&self) -> usize;

    /// How long a load from this source waits for room in the load budget.
    fn patience(&self) -> Duration;

    /// Reads blocks `skip..` of `want` into `sink` (checked, in chain order) until one is
    /// missing, bad or late, or the sink refuses; returns what ended the run. `salt` is the
    /// tenant's (already in `want.hashes`; a source that computes remotely passes it on).
    fn fetch(
        &self,
        want: &Expected<'_>,
        salt: Option<&CacheSalt>,
        skip: usize,
        sink: &mut Sink<'_>,
    ) -> impl Future<Output = &'static str> + Send;

    /// Called when a load cached `tokens` tokens (more than 0) in `took`.
    fn loaded(&self, _tokens: usize, _took: Duration) {}

    /// The warning logged when a load fell short ([`Partial`](LoadOutcome::Partial) or
    /// [`None`](LoadOutcome::None)), if the source wants one.
    fn short_warning(&self) -> Option<&'static str> {
        None
    }
}
