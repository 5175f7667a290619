//! The decode replica's side: fetch the prompt's KV from the prefill replica, check it
//! block by block, and cache the good run before the request is submitted.

use super::record::{record_layout, Expected};
use crate::server::http::AppState;
use crate::server::transfer::engine::{held_prefix, import};
use crate::server::worker::ImportBlock;
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::time::timeout_at;
use warmpath_core::{CacheSalt, TokenId};
use warmpath_protocol::kv_block::{Frame, FrameReader};
use warmpath_protocol::replica_api::{PrefillRequest, HEADER_CACHE_SALT, PATH_KV_PREFILL};

/// How a transfer went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferOutcome {
    /// Every block the replica lacked arrived and was cached.
    Ok,
    /// Some leading blocks were cached; the replica computes the rest.
    Partial,
    /// Nothing was cached; the replica computes the prompt itself.
    Failed,
    /// The replica held every block already: nothing to fetch.
    Skipped,
}

impl TransferOutcome {
    /// The header value and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferOutcome::Ok => "ok",
            TransferOutcome::Partial => "partial",
            TransferOutcome::Failed => "failed",
            TransferOutcome::Skipped => "skipped",
        }
    }
}

/// The result of [`pull`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// How it went.
    pub outcome: TransferOutcome,
    /// What ended it (`complete` when nothing went wrong).
    pub reason: &'static str,
    /// Prompt tokens whose KV was taken from the prefill replica.
    pub tokens: usize,
}

/// Fetches what this replica lacks of `prompt`'s KV from the prefill replica at `from`
/// and caches it. Never fails the request: whatever goes wrong, the caller submits the
/// prompt and the engine computes what is not cached.
pub async fn pull(
    state: &AppState,
    prompt: &[TokenId],
    salt: Option<&CacheSalt>,
    from: &str,
) -> Transfer {
    let t0 = Instant::now();
    let bs = state.block_size;
    let (hashes, have) = held_prefix(state, prompt, salt).await;
    if have >= hashes.len() {
        return finish(state, t0, TransferOutcome::Skipped, "cached", 0);
    }
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(state.kv_transfer_timeout_ms);
    let want = Expected {
        layout: record_layout(state.facts.kv_layout),
        hashes: &hashes,
        prompt,
    };
    let mut blocks: Vec<ImportBlock> = Vec::new();
    let reason = fetch(state, &want, salt, from, have, deadline, &mut blocks).await;
    let expected = hashes.len() - have;
    let received = blocks.len();
    let cached = import(state, blocks).await;
    let reason = if reason == "complete" && cached < received {
        "import" // every block arrived, but the pool could not take them all
    } else {
        reason
    };
    let outcome = if cached == 0 {
        TransferOutcome::Failed
    } else if cached == expected && reason == "complete" {
        TransferOutcome::Ok
    } else {
        TransferOutcome::Partial
    };
    finish(state, t0, outcome, reason, cached * bs)
}

/// Reads the prefill replica's stream into `blocks` (checked, in chain order) until it
/// ends, breaks, turns bad or runs out of time; returns what ended it.
async fn fetch(
    state: &AppState,
    want: &Expected<'_>,
    salt: Option<&CacheSalt>,
    from: &str,
    skip: usize,
    deadline: tokio::time::Instant,
    blocks: &mut Vec<ImportBlock>,
) -> &'static str {
    let body = PrefillRequest {
        prompt: want.prompt.to_vec(),
        skip_blocks: skip as u32,
    };
    let mut req = state
        .http
        .post(format!("{}{PATH_KV_PREFILL}", from.trim_end_matches('/')))
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(s) = salt {
        req = req.header(HEADER_CACHE_SALT, s.as_str());
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
                Ok(Some(Frame::Record(bytes))) => match want.check(skip + blocks.len(), &bytes) {
                    Ok(b) => blocks.push(b),
                    Err(r) => return r.as_str(),
                },
                Err(_) => return "corrupt",
            }
        }
    }
}

fn finish(
    state: &AppState,
    t0: Instant,
    outcome: TransferOutcome,
    reason: &'static str,
    tokens: usize,
) -> Transfer {
    let m = &state.metrics;
    m.kv_transfers
        .with_label_values(&[outcome.as_str(), reason])
        .inc();
    m.kv_transfer_tokens.inc_by(tokens as u64);
    m.kv_transfer_seconds.observe(t0.elapsed().as_secs_f64());
    if matches!(outcome, TransferOutcome::Partial | TransferOutcome::Failed) {
        tracing::warn!(
            outcome = outcome.as_str(),
            reason,
            tokens,
            "KV transfer fell short; computing the rest"
        );
    }
    Transfer {
        outcome,
        reason,
        tokens,
    }
}
