//! One request's record, as `run` measures it and `simulate` computes it.

use serde::Serialize;
use warmpath_core::{CheckpointId, RegionId};

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Could not connect or the connection broke.
    Connect,
    /// No response in time.
    Timeout,
    /// HTTP 429.
    RateLimited,
    /// Other HTTP 4xx.
    Http4xx,
    /// HTTP 5xx.
    Http5xx,
    /// The stream ended without a token or was malformed.
    BadStream,
    /// The router had no replica (simulator).
    NoReplica,
}

impl ErrorKind {
    /// Stable name (same as the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Http4xx => "http_4xx",
            ErrorKind::Http5xx => "http_5xx",
            ErrorKind::BadStream => "bad_stream",
            ErrorKind::NoReplica => "no_replica",
        }
    }

    /// Classifies an HTTP status.
    pub fn from_status(status: u16) -> Self {
        match status {
            429 => ErrorKind::RateLimited,
            400..=499 => ErrorKind::Http4xx,
            _ => ErrorKind::Http5xx,
        }
    }
}

/// What happened to one request. Times are milliseconds; `start_ms` is relative to the
/// benchmark start.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RequestRecord {
    /// Request index.
    pub id: u64,
    /// Group / session / user.
    pub group: u64,
    /// Replica that served it (`x-warmpath-replica` or the simulated replica).
    pub replica: Option<String>,
    /// Send time since the benchmark start.
    pub start_ms: f64,
    /// Time to first token.
    pub ttft_ms: Option<f64>,
    /// End-to-end latency (send to last token); for a failure, send to failure.
    pub e2el_ms: f64,
    /// Gaps between consecutive tokens/chunks after the first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub itls_ms: Vec<f32>,
    /// Prompt tokens (server-reported when available).
    pub prompt_tokens: u32,
    /// Output tokens (server-reported when available).
    pub output_tokens: u32,
    /// Cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`).
    pub cached_tokens: u32,
    /// Of `cached_tokens`, those loaded from the shared KV tier rather than found in the
    /// replica's own cache (simulate with `--kv-tier on`).
    #[serde(skip_serializing_if = "is_zero")]
    pub tier_cached_tokens: u32,
    /// Cached prompt tokens the router predicted (`x-warmpath-predicted-cached-tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_cached_tokens: Option<u32>,
    /// The routing rule that chose the replica (simulator: the policy's decision branch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_branch: Option<&'static str>,
    /// Region the request came from (simulate with `--regions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin_region: Option<RegionId>,
    /// Region of the replica that served it (simulate with `--regions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_region: Option<RegionId>,
    /// Round trip between the two, included once in `ttft_ms` and `e2el_ms` (not in ITLs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// Checkpoint that served it (simulate with a rollout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointId>,
    /// Class label of the request (mixed: `short` / `long`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<&'static str>,
    /// Failure kind; `None` = completed.
    pub error: Option<ErrorKind>,
    /// Failure detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_detail: Option<String>,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

impl RequestRecord {
    /// True when the request completed.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// TPOT = (E2E - TTFT) / (output - 1), defined for completed requests with > 1 token.
    pub fn tpot_ms(&self) -> Option<f64> {
        match (self.error, self.ttft_ms) {
            (None, Some(ttft)) if self.output_tokens > 1 => {
                Some((self.e2el_ms - ttft) / (self.output_tokens - 1) as f64)
            }
            _ => None,
        }
    }

    /// Completion time since the benchmark start.
    pub fn end_ms(&self) -> f64 {
        self.start_ms + self.e2el_ms
    }
}
