//! What the client of a stream holds, read from the events as they pass: the ids of the
//! tokens behind the text it got and that text's length (the replica's tags,
//! `warmpath_protocol::continuation`, stripped before the client sees them), the first
//! event (its `id` and `created`), and whether the answer already finished.
//!
//! Only whole events go downstream: a partial one waits for its end, so a replica that
//! dies mid-event leaves the client at an event boundary. After a migration, every event
//! of the continuation gets the first stream's `id` and `created` ([`Transcript::splice`]).

use bytes::Bytes;
use warmpath_protocol::continuation::{
    parse_tokens_comment, COMMENT_PREFIX, END_COMMENT, TOKENS_COMMENT,
};

/// The stream as the client has it.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    /// The start of an event whose end has not arrived.
    pending: Vec<u8>,
    /// Ids of the tokens behind the text sent (as the replica tagged them).
    pub(crate) tokens: Vec<u32>,
    /// Bytes of completion text sent.
    pub(crate) text_bytes: u64,
    /// Tags seen: the replica tags its events (the continuation can be exact).
    pub(crate) tagged: bool,
    /// The answer finished (`finish_reason` sent, or `[DONE]`): nothing to continue.
    pub(crate) ended: bool,
    /// The upstream sent an error event (held back: the stream may still continue).
    pub(crate) error_event: bool,
    /// That event, for the client if the stream does not continue.
    held_error: Option<Bytes>,
    /// Data events sent (`[DONE]` and error events aside).
    pub(crate) data_events: u32,
    /// An untagged stream's content sent, for a continuation by token ids
    /// (`super::completions`).
    pub(crate) text: String,
    /// An untagged stream sent what its text cannot carry (tool calls, reasoning).
    pub(crate) not_text: bool,
    /// The stream's server takes no token-id prompt, so an untagged stream could not
    /// continue by ids: its events are not read for their text (a JSON parse per event),
    /// and text sent counts as [`Self::not_text`].
    pub(crate) skip_text: bool,
    /// The first data event's JSON (for its `id` and `created`).
    first: Option<Bytes>,
    /// After a migration: the first stream's `id` and `created`, set on every event.
    splice: Option<(serde_json::Value, serde_json::Value)>,
}

/// Where the first event of `buf` ends (after its `\n\n`).
fn event_end(buf: &[u8]) -> Option<usize> {
    memchr::memmem::find(buf, b"\n\n").map(|p| p + 2)
}

impl Transcript {
    /// Passes one body chunk: returns what the client gets (whole events, tags removed,
    /// a continuation's ids rewritten, an error event held back).
    pub(crate) fn pass(&mut self, chunk: &Bytes) -> Bytes {
        if self.pending.is_empty() && self.splice.is_none() && chunk.ends_with(b"\n\n") {
            // The usual chunk: one event, tagged on its first line.
            if let Some(nl) = chunk.iter().position(|&b| b == b'\n') {
                let line = &chunk[..nl];
                let rest = &chunk[nl + 1..];
                if line.starts_with(TOKENS_COMMENT)
                    && event_end(rest) == Some(rest.len())
                    && !rest.starts_with(b":")
                {
                    self.tag(line);
                    let out = chunk.slice(nl + 1..);
                    if self.data(&out[..out.len() - 2]) {
                        return out;
                    }
                    return Bytes::new();
                }
            }
            if let Some(out) = self.pass_plain(chunk) {
                return out;
            }
        }
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.pending.len());
        let mut at = 0;
        while let Some(len) = event_end(&self.pending[at..]) {
            let event = self.pending[at..at + len].to_vec();
            at += len;
            self.event(&event, &mut out);
        }
        self.pending.drain(..at);
        Bytes::from(out)
    }

    /// A chunk of whole events that the client gets unchanged (no line of Warmpath's own, no
    /// error event, no empty event: what an untagged engine sends): noted, and passed on as
    /// it came, without a copy. `None` (nothing noted) when some event needs the general
    /// path.
    fn pass_plain(&mut self, chunk: &Bytes) -> Option<Bytes> {
        // Looked for anywhere, not only where they would matter: a chunk that has one
        // takes the general path, which reads it exactly.
        let special = |needle: &[u8]| memchr::memmem::find(chunk, needle).is_some();
        if chunk.starts_with(b"\n\n")
            || special(b"\n\n\n")
            || special(COMMENT_PREFIX)
            || special(b"{\"error\"")
        {
            return None;
        }
        let mut at = 0;
        for end in memchr::memmem::find_iter(chunk, b"\n\n") {
            if end >= at {
                self.data(&chunk[at..end]);
                at = end + 2;
            }
        }
        Some(chunk.clone())
    }

    /// One whole event (ending in `\n\n`), appended to `out` as the client gets it.
    fn event(&mut self, event: &[u8], out: &mut Vec<u8>) {
        let mut kept: Vec<&[u8]> = Vec::new();
        for line in event[..event.len() - 2].split(|&b| b == b'\n') {
            if line.starts_with(TOKENS_COMMENT) {
                self.tag(line);
            } else if line.starts_with(END_COMMENT) {
                self.ended = true;
            } else if line.starts_with(COMMENT_PREFIX) {
                // A sign of life (`: warmpath-replay`): for the idle timeout, not the client.
            } else {
                kept.push(line);
            }
        }
        let body = kept.join(&b'\n');
        if body.is_empty() || !self.data(&body) {
            return;
        }
        match self.rewrite(&body) {
            Some(b) => out.extend_from_slice(&b),
            None => out.extend_from_slice(&body),
        }
        out.extend_from_slice(b"\n\n");
    }

    fn tag(&mut self, line: &[u8]) {
        if let Some(bytes) = parse_tokens_comment(line, &mut self.tokens) {
            self.text_bytes = bytes;
            self.tagged = true;
        }
    }

    /// Notes an event's data; false when the event is held back (an error event).
    fn data(&mut self, event: &[u8]) -> bool {
        let Some(data) = event.strip_prefix(b"data:") else {
            return true;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            self.ended = true;
            return true;
        }
        if data.starts_with(b"{\"error\"") {
            self.error_event = true;
            let mut held = event.to_vec();
            held.extend_from_slice(b"\n\n");
            self.held_error = Some(Bytes::from(held));
            return false;
        }
        self.data_events += 1;
        if self.skip_text {
            self.not_text |= !self.tagged;
        } else if !self.tagged {
            super::sent::note_sent(data, &mut self.text, &mut self.not_text);
        }
        if self.first.is_none() {
            self.first = Some(Bytes::copy_from_slice(data));
        }
        true
    }

    /// A continuation's data event with the first stream's `id` and `created`.
    fn rewrite(&self, event: &[u8]) -> Option<Vec<u8>> {
        let (id, created) = self.splice.as_ref()?;
        let data = event.strip_prefix(b"data:")?.trim_ascii();
        let mut v: serde_json::Value = serde_json::from_slice(data).ok()?;
        let obj = v.as_object_mut()?;
        obj.insert("id".into(), id.clone());
        obj.insert("created".into(), created.clone());
        // The client had its role chunk from the first stream: never a second role.
        if let Some(delta) = obj
            .get_mut("choices")
            .and_then(|c| c.get_mut(0))
            .and_then(|c| c.get_mut("delta"))
            .and_then(|d| d.as_object_mut())
        {
            delta.remove("role");
        }
        let mut out = b"data: ".to_vec();
        serde_json::to_writer(&mut out, &v).ok()?;
        Some(out)
    }

    /// The upstream's error event held back, for a stream that does not continue.
    pub(crate) fn take_held_error(&mut self) -> Option<Bytes> {
        self.held_error.take()
    }

    /// Starts splicing a continuation in: its events get the first stream's `id` and
    /// `created`; a partial event of the failed stream is dropped. False when the first
    /// event cannot be read (nothing to splice onto). With no event sent yet there is
    /// nothing to match: the continuation's events go out as they come.
    pub(crate) fn splice(&mut self) -> bool {
        self.pending.clear();
        self.error_event = false;
        self.held_error = None;
        if self.splice.is_some() {
            return true;
        }
        let Some(first) = &self.first else {
            return true;
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(first) else {
            return false;
        };
        let (Some(id), Some(created)) = (v.get("id"), v.get("created")) else {
            return false;
        };
        self.splice = Some((id.clone(), created.clone()));
        true
    }
}
