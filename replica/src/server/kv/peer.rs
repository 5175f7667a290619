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
use super::trust::{now_ms, TransferTrust};
use crate::server::metrics::Metrics;
use std::time::Duration;
use tokio::time::timeout_at;
use warmpath_core::CacheSalt;
use warmpath_http::{Endpoint, Header};
use warmpath_protocol::kv_block::{Frame, FrameReader};
use warmpath_protocol::replica_api::{
    PrefillRequest, HEADER_CACHE_SALT, HEADER_KV_TIER_OFF, KV_TRANSFER_REASON_IMPORT,
    PATH_KV_PREFILL,
};
use warmpath_protocol::transfer_auth::HEADER_TRANSFER_AUTH;

/// How long connecting to the prefill replica may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The prefill replica at `from`, asked over HTTP ([`warmpath_http`]: a redirect is an
/// `http_status` failure, never followed) within `timeout`.
#[derive(Clone, Copy, Debug)]
pub struct Peer<'a> {
    /// The prefill replica's base URL (`http://host:port`).
    pub from: &'a str,
    /// How long the whole transfer may take (`--kv-transfer-timeout-ms`).
    pub timeout: Duration,
    /// Signs the pull when a transfer key is set.
    pub trust: &'a TransferTrust,
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
        let Ok(to) = Endpoint::parse(self.from) else {
            return "connect";
        };
        let mut extra: Vec<Header> = Vec::new();
        if let Some(s) = salt {
            match axum::http::HeaderValue::from_str(s.as_str()) {
                Ok(v) => extra.push((axum::http::HeaderName::from_static(HEADER_CACHE_SALT), v)),
                Err(_) => return "connect",
            }
        }
        if self.tier_off {
            extra.push((
                axum::http::HeaderName::from_static(HEADER_KV_TIER_OFF),
                axum::http::HeaderValue::from_static("1"),
            ));
        }
        let body = match serde_json::to_vec(&body) {
            Ok(b) => b,
            Err(_) => return "connect",
        };
        let path = to.path(PATH_KV_PREFILL);
        if let Some(sig) = self.trust.sign_pull(PATH_KV_PREFILL, now_ms()) {
            match axum::http::HeaderValue::from_str(&sig) {
                Ok(v) => extra.push((axum::http::HeaderName::from_static(HEADER_TRANSFER_AUTH), v)),
                Err(_) => return "connect",
            }
        }
        let open = warmpath_http::open_with_connect_timeout(
            &to.addr,
            axum::http::Method::POST,
            &path,
            Some(&body),
            &extra,
            CONNECT_TIMEOUT,
        );
        let mut stream = match timeout_at(deadline, open).await {
            Err(_) => return "timeout",
            Ok(Err(_)) => return "connect",
            Ok(Ok((status, s))) if (200..300).contains(&status) => s,
            Ok(Ok(_)) => return "http_status",
        };
        let mut reader = FrameReader::default();
        loop {
            let chunk = match timeout_at(deadline, stream.next_chunk()).await {
                Err(_) => return "timeout",
                Ok(Ok(None)) | Ok(Err(_)) => return "truncated",
                Ok(Ok(Some(c))) => c,
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
