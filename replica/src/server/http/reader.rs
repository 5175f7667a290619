//! Reading a job's [`SeqEvent`]s as text pieces, applying stop strings: text is held back
//! while it could still be the start of a stop string; when one appears the answer ends
//! and the reply channel is dropped, which cancels the sequence in the engine loop within
//! one step.
//!
//! The reader also keeps what a migrated stream needs (`crate::server::http::resume`):
//! the ids of the tokens read since the last text piece, and the bytes of text sent.

use super::job::Job;
use crate::server::worker::{FinishReason, SeqEvent};
use warmpath_engine::sampling::find_stop;
use warmpath_protocol::openai::{PromptTokensDetails, Usage};

/// What reading a job produced.
#[derive(Debug, PartialEq)]
pub(super) enum Piece {
    Text(String),
    /// Tokens are being replayed (a continuation): no text, but the stream is alive.
    Alive,
    Done(FinishReason),
    Failed(String),
}

/// Replayed tokens per [`Piece::Alive`].
const REPLAYED_PER_ALIVE: usize = 16;

/// Reads a job's events as text pieces, applying stop strings.
pub(super) struct Reader {
    pub(super) job: Job,
    held: String,
    max_stop: usize,
    cached_tokens: usize,
    completion_tokens: usize,
    queue: std::collections::VecDeque<Piece>,
    ended: bool,
    /// Ids read since the last text piece went out ([`Self::take_ids`]).
    ids: Vec<u32>,
    /// Bytes of completion text handed out (a continuation's count starts with what the
    /// client already holds).
    sent_bytes: u64,
    /// Tokens replayed so far (a continuation).
    replayed: usize,
}

impl Reader {
    pub(super) fn new(mut job: Job) -> Self {
        let max_stop = job.stop.iter().map(String::len).max().unwrap_or(0);
        let held = std::mem::take(&mut job.resume.unsent);
        let sent_bytes = job.resume.sent_bytes;
        Self {
            job,
            held,
            max_stop,
            cached_tokens: 0,
            completion_tokens: 0,
            queue: Default::default(),
            ended: false,
            ids: Vec::new(),
            sent_bytes,
            replayed: 0,
        }
    }

    /// Usage as the client's whole answer counts it: a continuation's prompt is the
    /// original one, its completion the tokens before the seam and after it.
    pub(super) fn usage(&self) -> Usage {
        let p = self.job.prompt_tokens as u32;
        let c = (self.job.resume.prior_tokens + self.completion_tokens) as u32;
        Usage {
            prompt_tokens: p,
            completion_tokens: c,
            total_tokens: p + c,
            prompt_tokens_details: Some(PromptTokensDetails {
                cached_tokens: self.cached_tokens as u32,
            }),
        }
    }

    /// The ids read since the last call, and the bytes of text handed out so far.
    pub(super) fn take_ids(&mut self) -> (u64, Vec<u32>) {
        (self.sent_bytes, std::mem::take(&mut self.ids))
    }

    fn end(&mut self, last: Piece) {
        self.queue.push_back(last);
        self.ended = true;
        // Dropping interest cancels the sequence in the engine loop within one step.
        self.job.rx.close();
    }

    fn emit(&mut self, text: String) {
        self.sent_bytes += text.len() as u64;
        self.queue.push_back(Piece::Text(text));
    }

    /// Moves what can be emitted from `held` to the queue; ends on a stop string.
    fn release(&mut self, final_flush: bool) -> bool {
        if let Some(pos) = find_stop(&self.held, &self.job.stop) {
            self.held.truncate(pos);
            let text = std::mem::take(&mut self.held);
            if !text.is_empty() {
                self.emit(text);
            }
            self.end(Piece::Done(FinishReason::Stop));
            return true;
        }
        let keep = if final_flush {
            0
        } else {
            self.max_stop.saturating_sub(1)
        };
        if self.held.len() > keep {
            let mut cut = self.held.len() - keep;
            while !self.held.is_char_boundary(cut) {
                cut -= 1;
            }
            let rest = self.held.split_off(cut);
            let out = std::mem::replace(&mut self.held, rest);
            if !out.is_empty() {
                self.emit(out);
            }
        }
        false
    }

    fn on_event(&mut self, ev: Option<SeqEvent>) {
        match ev {
            None => self.end(Piece::Failed("the engine dropped the request".into())),
            Some(SeqEvent::Admitted { cached_tokens }) => self.cached_tokens = cached_tokens,
            Some(SeqEvent::Replayed) => {
                self.replayed += 1;
                if self.replayed.is_multiple_of(REPLAYED_PER_ALIVE) {
                    self.queue.push_back(Piece::Alive);
                }
            }
            Some(SeqEvent::Token(t)) => {
                self.completion_tokens += 1;
                self.ids.push(t.0);
                if let Some(s) = self.job.decoder.push(t) {
                    self.held.push_str(&s);
                }
                self.release(false);
            }
            Some(SeqEvent::Finished {
                reason,
                completion_tokens,
            }) => {
                self.completion_tokens = completion_tokens;
                if let Some(s) = self.job.decoder.finish() {
                    self.held.push_str(&s);
                }
                if !self.release(true) {
                    self.end(Piece::Done(reason));
                }
            }
            Some(SeqEvent::Failed(m)) => self.end(Piece::Failed(m)),
        }
    }

    /// The next piece; `None` after the last one.
    pub(super) async fn next(&mut self) -> Option<Piece> {
        loop {
            if let Some(p) = self.queue.pop_front() {
                return Some(p);
            }
            if self.ended {
                return None;
            }
            let ev = self.job.rx.recv().await;
            self.on_event(ev);
        }
    }
}
