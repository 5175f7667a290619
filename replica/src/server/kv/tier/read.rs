//! The tier's read side, a [`KvSource`]: on a local miss, take the consecutive run of the
//! prompt's next blocks that the tier holds, checked record by record; the loader caches
//! it before the request is submitted. Lookups are counted by outcome (`hit`, `partial`,
//! `miss`, `skipped`) and reason (`complete`: every block found, `absent`: the next block
//! is not in the tier, `forged`: its MAC does not verify under `--kv-store-key-file`, `corrupt`, `mismatch`: another layout, checkpoint, salt or prompt,
//! `timeout`, `unavailable`: no connection or a Redis error, `import`: the pool had no
//! room, `busy`: no room in the load budget, `cached`: skipped). At most
//! [`READ_AHEAD_GROUPS`] `MGET`s are in flight at once, so a long prompt's lookup holds a
//! bounded number of records.

use super::conn::TierConn;
use super::mac::TierMac;
use super::rate::TierRate;
use crate::server::kv::record::Expected;
use crate::server::kv::sink::Sink;
use crate::server::kv::source::{KvSource, LoadOutcome, SourceMetrics};
use crate::server::metrics::Metrics;
use futures_util::stream::{self, StreamExt};
use std::time::Duration;
use tokio::time::timeout_at;
use warmpath_core::CacheSalt;
use warmpath_protocol::kv_block::tier_key;
use warmpath_protocol::replica_api::KV_TRANSFER_REASON_IMPORT;

/// Keys per `MGET`. The groups are read in order, so a late group ends the run at its first
/// block.
const GROUP: usize = 8;

/// `MGET`s in flight at once.
const READ_AHEAD_GROUPS: usize = 2;

/// Records a lookup may hold beyond the one it checks.
pub const READ_AHEAD_BLOCKS: usize = GROUP * READ_AHEAD_GROUPS;

/// The tier as the HTTP side holds it: the read side's [`KvSource`].
#[derive(Clone)]
pub struct Tier {
    /// The connection (lazy, reconnecting).
    pub conn: TierConn,
    /// Lookup time limit.
    pub timeout: Duration,
    /// Measured load rate, reported to the router.
    pub rate: TierRate,
    /// The tier key values are sealed with, if any.
    pub mac: Option<TierMac>,
}

impl std::fmt::Debug for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tier")
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl KvSource for Tier {
    fn name(&self) -> &'static str {
        "tier"
    }

    fn label(&self, outcome: LoadOutcome) -> &'static str {
        match outcome {
            LoadOutcome::Full => "hit",
            LoadOutcome::Partial => "partial",
            LoadOutcome::None => "miss",
            LoadOutcome::Skipped => "skipped",
        }
    }

    fn metrics<'m>(&self, m: &'m Metrics) -> SourceMetrics<'m> {
        SourceMetrics {
            loads: &m.kv_tier_lookups,
            tokens: &m.kv_tier_hit_tokens,
            seconds: &m.kv_tier_lookup_seconds,
        }
    }

    /// A known set of keys: every block found is a hit, and a pool that took fewer is
    /// `import` whatever ended the run.
    fn strict_end(&self) -> bool {
        false
    }

    fn read_ahead_blocks(&self) -> usize {
        READ_AHEAD_BLOCKS
    }

    fn patience(&self) -> Duration {
        self.timeout
    }

    /// The measured load rate ([`TierRate`]).
    fn loaded(&self, tokens: usize, took: Duration) {
        self.rate.observe(tokens, took);
    }

    /// Reads blocks `skip..` into `sink` (checked, in chain order) until one is missing,
    /// bad or late; returns what ended the run.
    async fn fetch(
        &self,
        want: &Expected<'_>,
        _salt: Option<&CacheSalt>,
        skip: usize,
        sink: &mut Sink<'_>,
    ) -> &'static str {
        let Some(conn) = self.conn.get() else {
            self.conn.failed("read", &"not connected");
            return "unavailable";
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let keys: Vec<String> = want.hashes[skip..].iter().map(|h| tier_key(*h)).collect();
        let cmds: Vec<redis::Cmd> = keys
            .chunks(GROUP)
            .map(|g| {
                let mut cmd = redis::cmd("MGET");
                cmd.arg(g);
                cmd
            })
            .collect();
        let mut keys = keys.into_iter();
        let mut groups = stream::iter(cmds)
            .map(|cmd| {
                let mut c = conn.clone();
                async move { cmd.query_async::<Vec<Option<Vec<u8>>>>(&mut c).await }
            })
            .buffered(READ_AHEAD_GROUPS);
        loop {
            let values = match timeout_at(deadline, groups.next()).await {
                Err(_) => return "timeout",
                Ok(None) => return "complete",
                Ok(Some(Err(e))) => {
                    self.conn.failed("read", &e);
                    return "unavailable";
                }
                Ok(Some(Ok(v))) => v,
            };
            for v in values {
                let key = keys.next().unwrap_or_default();
                let Some(bytes) = v else {
                    return "absent";
                };
                let record = match &self.mac {
                    None => bytes.as_slice(),
                    Some(m) => match m.open(&key, &bytes) {
                        Some(r) => r,
                        None => return "forged",
                    },
                };
                match want.check(skip + sink.taken(), record) {
                    Ok(b) => {
                        if sink.push(b).await.is_err() {
                            return KV_TRANSFER_REASON_IMPORT;
                        }
                    }
                    Err(r) => return r.as_str(),
                }
            }
        }
    }
}
