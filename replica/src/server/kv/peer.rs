//! A prefill replica as a [`KvSource`]: the decode side of prefill/decode disaggregation.
//!
//! The decode replica pulls. The gateway sends the request to the decode replica with
//! the prefill replica's URL in `x-warmpath-prefill-from`; before it submits the request,
//! the decode replica's [`load`](super::load::load) asks its own cache how many leading
//! blocks it holds and asks the prefill replica for the rest (`POST /v1/kv/prefill`,
//! served by `http::kv_prefill`), which streams each block the engine step that caches it
//! (overlapping the transfer with its chunked prefill), as framed
//! [`KvBlockRecord`](warmpath_protocol::kv_block::KvBlockRecord)s. Each block is checked as
//! it arrives and the run of good blocks is cached; the request then finds them as a
//! cached prefix: `usage.prompt_tokens_details.cached_tokens` counts them.
//!
//! Nothing wrong is ever used: a block that fails its checksum, has another layout, or
//! whose chain hash or tokens differ from what this replica computes for the prompt
//! under its own checkpoint and the tenant's salt ends the transfer there, as do a cut
//! stream and the time limit; the replica computes everything after the last good
//! block. Each transfer is counted by outcome (`ok`, `partial`, `failed`, `skipped`) and
//! reason (`complete`, `connect`, `http_status`, `timeout`, `truncated`, `corrupt`,
//! `mismatch`, `import`, `cached`).

use super::record::Expected;
use super::sink::Sink;
use super::source::{KvSource, LoadOutcome, SourceMetrics};
use crate::server::metrics::Metrics;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::time::timeout_at;
use warmpath_core::CacheSalt;
use warmpath_protocol::kv_block::{Frame, FrameReader};
use warmpath_protocol::replica_api::{
    PrefillRequest, HEADER_CACHE_SALT, HEADER_KV_TIER_OFF, KV_TRANSFER_REASON_IMPORT,
    PATH_KV_PREFILL,
};

/// The prefill replica at `from`, asked over `http` within `timeout`.
#[derive(Clone, Copy, Debug)]
pub struct Peer<'a> {
    /// The HTTP client.
    pub http: &'a reqwest::Client,
    /// The prefill replica's base URL.
    pub from: &'a str,
    /// How long the whole transfer may take (`--kv-transfer-timeout-ms`).
    pub timeout: Duration,
    /// The gateway turned the shared KV tier off for this request: the prefill replica
    /// is asked the same (`x-warmpath-kv-tier-off`), so it writes none of the blocks.
    pub tier_off: bool,
}

impl KvSource for Peer<'_> {
    fn name(&self) -> &'static str {
        "peer"
    }

    fn label(&self, outcome: LoadOutcome) -> &'static str {
        match outcome {
            LoadOutcome::Full => "ok",
            LoadOutcome::Partial => "partial",
            LoadOutcome::None => "failed",
            LoadOutcome::Skipped => "skipped",
        }
    }

    fn metrics<'m>(&self, m: &'m Metrics) -> SourceMetrics<'m> {
        SourceMetrics {
            loads: &m.kv_transfers,
            tokens: &m.kv_transfer_tokens,
            seconds: &m.kv_transfer_seconds,
        }
    }

    /// The stream ends with an end frame: only a clean end is a full transfer.
    fn strict_end(&self) -> bool {
        true
    }

    fn short_warning(&self) -> Option<&'static str> {
        Some("KV transfer fell short; computing the rest")
    }

    /// One frame beyond the one being checked (the frame reader's buffer).
    fn read_ahead_blocks(&self) -> usize {
        1
    }

    fn patience(&self) -> Duration {
        self.timeout
    }

    /// Reads the prefill replica's stream into `sink` (checked, in chain order) until it
    /// ends, breaks, turns bad, finds the pool full or runs out of time; returns what
    /// ended it.
    async fn fetch(
        &self,
        want: &Expected<'_>,
        salt: Option<&CacheSalt>,
        skip: usize,
        sink: &mut Sink<'_>,
    ) -> &'static str {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let body = PrefillRequest {
            prompt: want.prompt.to_vec(),
            skip_blocks: skip as u32,
        };
        let mut req = self
            .http
            .post(format!(
                "{}{PATH_KV_PREFILL}",
                self.from.trim_end_matches('/')
            ))
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(s) = salt {
            req = req.header(HEADER_CACHE_SALT, s.as_str());
        }
        if self.tier_off {
            req = req.header(HEADER_KV_TIER_OFF, "1");
        }
        let body = match serde_json::to_vec(&body) {
            Ok(b) => b,
            Err(_) => return "connect",
        };
        let resp = match timeout_at(deadline, req.body(body).send()).await {
            Err(_) => return "timeout",
            Ok(Err(_)) => return "connect",
            Ok(Ok(r)) => r,
        };
        if !resp.status().is_success() {
            return "http_status";
        }
        let mut stream = resp.bytes_stream();
        let mut reader = FrameReader::default();
        loop {
            let chunk = match timeout_at(deadline, stream.next()).await {
                Err(_) => return "timeout",
                Ok(None) | Ok(Some(Err(_))) => return "truncated",
                Ok(Some(Ok(c))) => c,
            };
            reader.push(&chunk);
            loop {
                match reader.next_frame() {
                    Ok(None) => break,
                    Ok(Some(Frame::End)) => return "complete",
                    Ok(Some(Frame::Record(bytes))) => match want.check(skip + sink.taken(), &bytes)
                    {
                        Ok(b) => {
                            if sink.push(b).await.is_err() {
                                return KV_TRANSFER_REASON_IMPORT;
                            }
                        }
                        Err(r) => return r.as_str(),
                    },
                    Err(_) => return "corrupt",
                }
            }
        }
    }
}
