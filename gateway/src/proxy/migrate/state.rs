//! A migratable stream's state, kept in the request's context: what the client holds
//! (its [`Transcript`]), the migrations made and what they cost.

use super::transcript::Transcript;
use super::translate::Resume;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// A migratable stream's state.
#[derive(Debug)]
pub(crate) struct Migration {
    /// The body the first attempt got (the client's, or with the completion bound).
    body: Bytes,
    /// What the client holds.
    pub(crate) transcript: Transcript,
    /// Migrations made.
    pub(crate) count: u32,
    /// Tokens the continuations took as input (prompt and carried tokens), charged.
    pub(crate) reprefill_tokens: u64,
    /// The current attempt continues the stream.
    pub(crate) continuing: bool,
    /// When the last failure was seen.
    failed_at: Option<Instant>,
    /// From the last failure to the continuation's first event the client got.
    pub(crate) resume_latency: Option<Duration>,
    /// Why a failure mid-stream was not migrated.
    pub(crate) refused: Option<&'static str>,
    /// A continuation by token ids on `/v1/completions`: how its stream reads back.
    pub(crate) resume: Option<Resume>,
}

impl Migration {
    /// A stream that may migrate, forwarded with `body`.
    pub(crate) fn new(body: Bytes) -> Self {
        Self {
            body,
            transcript: Transcript::default(),
            count: 0,
            reprefill_tokens: 0,
            continuing: false,
            failed_at: None,
            resume_latency: None,
            refused: None,
            resume: None,
        }
    }

    /// The `outcome` label of `stream_migrations_total` once the request ended (`None`:
    /// its stream never failed).
    pub(crate) fn outcome(&self, completed: bool) -> Option<&'static str> {
        match (self.count, self.refused) {
            (0, None) => None,
            (0, Some(_)) => Some("refused"),
            _ if completed => Some("ok"),
            _ => Some("failed"),
        }
    }

    /// The path a continuation by token ids goes to, while one is under way.
    pub(crate) fn upstream_path(&self) -> Option<&'static str> {
        (self.continuing && self.resume.is_some()).then_some("/v1/completions")
    }

    /// The body the first attempt got.
    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }

    /// A continuation starts: one more migration, whose replica takes `reprefill` tokens
    /// as input (charged).
    pub(crate) fn begin(&mut self, reprefill: u64) {
        self.count += 1;
        self.continuing = true;
        self.failed_at = Some(Instant::now());
        self.reprefill_tokens += reprefill;
    }

    /// Passes one body chunk through the transcript; notes the continuation's first
    /// event.
    pub(crate) fn pass(&mut self, chunk: &Bytes) -> Bytes {
        let out = match self.resume.as_mut() {
            Some(r) => self.transcript.pass(&r.translate(chunk)),
            None => self.transcript.pass(chunk),
        };
        if !out.is_empty() {
            if let Some(t) = self.failed_at.take() {
                self.resume_latency = Some(t.elapsed());
            }
        }
        out
    }
}
