//! [`ZmqSubscriber`]: follows one engine's KV event publisher (vLLM or SGLang) over ZeroMQ
//! and hands Warmpath [`KvStreamMessage`]s to a sink, for the caller to apply with
//! `state.router.apply_message(replica, &msg)`.
//!
//! The publisher's PUB socket sends `(topic, seq: 8 bytes BE, payload)`; sequence numbers
//! start at 0 with the publisher and grow by one per batch. The subscriber keeps the last
//! one it applied:
//! - the next one: applied;
//! - a gap: the missing batches are asked of the replay endpoint and applied in order; when
//!   there is none, the replay fails or times out, or it does not reach back to the first
//!   missing batch (the publisher's buffer is bounded), the replica's entries are dropped
//!   (a new epoch, an empty snapshot) and the stream goes on from what arrived;
//! - a number at or below the last, or the publisher's connection closing: the publisher
//!   restarted, so its cache is gone: dropped likewise.
//!
//! On the first batch after a start or a drop, the replay endpoint is asked for everything
//! it still buffers: any unbroken run of batches ending just before the live one is a valid
//! history from an empty start (a block it never saw stored is simply unknown), so the
//! subscriber learns what the engine cached before it joined, as far back as the buffer goes.

use super::config::ZmqEventsConfig;
use super::counters::{bump, CounterSnapshot, SubscriberCounters};
use super::rehash::EventMapper;
use super::replay::replay;
use super::stream::EventStream;
use bytes::Bytes;
use futures::channel::mpsc::Receiver;
use futures::StreamExt;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use warmpath_core::{Epoch, KvStreamMessage};
use zeromq::{Socket, SocketEvent, SocketOptions, SocketRecv, SubSocket, ZmqError, ZmqMessage};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Follows one engine publisher; see the module documentation.
pub struct ZmqSubscriber<S> {
    cfg: ZmqEventsConfig,
    stream: EventStream<S>,
    counters: Arc<SubscriberCounters>,
    /// The engine sequence number of the last batch applied, if the stream has a place.
    last: Option<u64>,
}

/// Follows `cfg`'s publisher until `stop()` returns true, handing every message to `sink`;
/// returns the final counters. Shorthand for [`ZmqSubscriber::new`] and
/// [`ZmqSubscriber::run`].
pub(crate) async fn run<S: FnMut(KvStreamMessage)>(
    cfg: ZmqEventsConfig,
    mapper: EventMapper,
    sink: S,
    stop: impl Fn() -> bool,
) -> CounterSnapshot {
    ZmqSubscriber::new(cfg, mapper, sink).run(stop).await
}

impl<S: FnMut(KvStreamMessage)> ZmqSubscriber<S> {
    /// A subscriber whose first epoch is the current time in milliseconds, so each life of
    /// it starts an epoch of its own.
    pub fn new(cfg: ZmqEventsConfig, mapper: EventMapper, sink: S) -> Self {
        let first = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_millis() as u64);
        Self::with_epoch(cfg, mapper, sink, Epoch(first))
    }

    /// A subscriber opening with `first_epoch`.
    pub fn with_epoch(
        cfg: ZmqEventsConfig,
        mapper: EventMapper,
        sink: S,
        first_epoch: Epoch,
    ) -> Self {
        let counters = Arc::new(SubscriberCounters::default());
        let stream = EventStream::new(mapper, sink, first_epoch, counters.clone());
        Self {
            cfg,
            stream,
            counters,
            last: None,
        }
    }

    /// The live counters, for metrics; they stay readable after the subscriber ends.
    pub fn counters(&self) -> Arc<SubscriberCounters> {
        self.counters.clone()
    }

    /// Emits the opening snapshot, then connects, follows, and reconnects with backoff until
    /// `stop()` returns true (checked at least every `poll_ms`).
    pub async fn run(mut self, stop: impl Fn() -> bool) -> CounterSnapshot {
        self.stream.start();
        let mut backoff = BACKOFF_MIN;
        while !stop() {
            match until_stopped(self.connect(), &stop, self.cfg.poll()).await {
                None => break,
                Some(Ok((sub, monitor))) => {
                    bump(&self.counters.connects);
                    backoff = BACKOFF_MIN;
                    tracing::info!(endpoint = %self.cfg.endpoint, "following engine KV events");
                    self.follow(sub, monitor, &stop).await;
                }
                Some(Err(e)) => {
                    tracing::info!(endpoint = %self.cfg.endpoint, error = %e, "engine KV events: connect failed");
                    if until_stopped(tokio::time::sleep(backoff), &stop, self.cfg.poll())
                        .await
                        .is_none()
                    {
                        break;
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
        self.counters.snapshot()
    }

    async fn connect(&self) -> Result<(SubSocket, Receiver<SocketEvent>), ZmqError> {
        let mut options = SocketOptions::default();
        options.connect_timeout(self.cfg.connect_timeout());
        let mut sub = SubSocket::with_options(options);
        let monitor = sub.monitor();
        // Remembered and sent to the publisher on every (re)connection.
        sub.subscribe(&self.cfg.topic).await?;
        sub.connect(&self.cfg.endpoint).await?;
        Ok((sub, monitor))
    }

    /// Reads live batches until the stream fails or `stop()`. The SUB socket reconnects by
    /// itself; a disconnection still drops, since the publisher may have restarted.
    async fn follow(
        &mut self,
        mut sub: SubSocket,
        mut monitor: Receiver<SocketEvent>,
        stop: &impl Fn() -> bool,
    ) {
        let poll = self.cfg.poll();
        while !stop() {
            // Biased, monitor first: a disconnection is handled before any batch that came
            // after it (over the new connection), so one restart drops once.
            tokio::select! {
                biased;
                Some(event) = monitor.next() => {
                    if let SocketEvent::Disconnected(_) = event {
                        self.lost("publisher disconnected");
                    }
                }
                msg = sub.recv() => match msg {
                    Ok(msg) => self.on_message(msg).await,
                    Err(e) => {
                        tracing::info!(error = %e, "engine KV event stream failed");
                        self.lost("event stream failed");
                        return;
                    }
                },
                _ = tokio::time::sleep(poll) => {}
            }
        }
    }

    fn lost(&mut self, why: &str) {
        if self.last.take().is_some() {
            self.stream.drop_all(why);
        }
        self.counters.next_seq.store(0, Ordering::Relaxed);
    }

    async fn on_message(&mut self, msg: ZmqMessage) {
        let Some((seq, payload)) = parse_live(msg) else {
            bump(&self.counters.bad_frames);
            tracing::debug!("engine KV event message without (topic, seq, payload) frames");
            return;
        };
        match self.last {
            Some(last) if last.checked_add(1) == Some(seq) => {}
            Some(last) if seq <= last => {
                self.lost("publisher restarted (sequence number went back)");
                self.catch_up(seq).await;
            }
            Some(last) => {
                bump(&self.counters.gaps);
                self.fill_gap(last, seq).await;
            }
            None => self.catch_up(seq).await,
        }
        self.apply(seq, &payload, false);
    }

    /// With nothing known, applies whatever unbroken history before `seq` the publisher
    /// still buffers.
    async fn catch_up(&mut self, seq: u64) {
        if seq == 0 {
            return;
        }
        if let Some(batches) = self.replay(0, seq).await {
            for (s, payload) in contiguous_tail(&batches, seq) {
                self.apply(*s, payload, true);
            }
        }
    }

    /// Batches `last + 1 .. seq` are missing.
    async fn fill_gap(&mut self, last: u64, seq: u64) {
        tracing::debug!(last, seq, "engine KV events: sequence gap");
        let Some(batches) = self.replay(last + 1, seq).await else {
            self.stream.drop_all("sequence gap not replayed");
            return;
        };
        let tail = contiguous_tail(&batches, seq);
        if tail.first().map(|b| b.0) != Some(last + 1) {
            bump(&self.counters.replay_failures);
            self.stream.drop_all("replay did not reach back to the gap");
        }
        for (s, payload) in tail {
            self.apply(*s, payload, true);
        }
    }

    /// Batches `from .. until` from the replay endpoint; `None` when there is none or the
    /// replay failed.
    async fn replay(&self, from: u64, until: u64) -> Option<Vec<(u64, Bytes)>> {
        let endpoint = self.cfg.replay_endpoint.as_deref()?;
        bump(&self.counters.replays);
        match replay(endpoint, from, until, self.cfg.replay_timeout()).await {
            Ok(batches) => Some(batches),
            Err(e) => {
                bump(&self.counters.replay_failures);
                tracing::info!(endpoint, from, error = %e, "engine KV events: replay failed");
                None
            }
        }
    }

    fn apply(&mut self, seq: u64, payload: &[u8], replayed: bool) {
        if let Err(e) = self.stream.apply(payload, replayed) {
            bump(&self.counters.decode_errors);
            tracing::info!(seq, error = %e, "undecodable engine KV event batch");
            self.stream.drop_all("undecodable batch");
        }
        self.last = Some(seq);
        self.counters
            .next_seq
            .store(seq.saturating_add(1), Ordering::Relaxed);
    }
}

/// `(seq, payload)` of a live message `(topic, seq, payload)`.
fn parse_live(msg: ZmqMessage) -> Option<(u64, Bytes)> {
    let [_topic, seq, payload]: [Bytes; 3] = msg.into_vec().try_into().ok()?;
    let seq: [u8; 8] = seq[..].try_into().ok()?;
    Some((u64::from_be_bytes(seq), payload))
}

/// The longest run of consecutive batches that ends with `until - 1` (empty if the last
/// batch is not `until - 1`).
fn contiguous_tail(batches: &[(u64, Bytes)], until: u64) -> &[(u64, Bytes)] {
    let mut start = batches.len();
    let mut want = until;
    while start > 0 && want > 0 && batches[start - 1].0 == want - 1 {
        start -= 1;
        want -= 1;
    }
    &batches[start..]
}

/// Runs `fut` to completion unless `stop()` turns true first (checked every `poll`).
async fn until_stopped<F: Future>(
    fut: F,
    stop: &impl Fn() -> bool,
    poll: Duration,
) -> Option<F::Output> {
    tokio::pin!(fut);
    loop {
        if stop() {
            return None;
        }
        if let Ok(out) = tokio::time::timeout(poll, fut.as_mut()).await {
            return Some(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batches(seqs: &[u64]) -> Vec<(u64, Bytes)> {
        seqs.iter().map(|&s| (s, Bytes::new())).collect()
    }

    fn seqs(b: &[(u64, Bytes)]) -> Vec<u64> {
        b.iter().map(|b| b.0).collect()
    }

    #[test]
    fn the_contiguous_tail_ends_just_before_the_live_batch() {
        assert_eq!(
            seqs(contiguous_tail(&batches(&[3, 4, 5]), 6)),
            vec![3, 4, 5]
        );
        assert_eq!(seqs(contiguous_tail(&batches(&[3, 5, 6]), 7)), vec![5, 6]);
        assert!(contiguous_tail(&batches(&[3, 4]), 6).is_empty());
        assert!(contiguous_tail(&batches(&[]), 6).is_empty());
        assert_eq!(seqs(contiguous_tail(&batches(&[0]), 1)), vec![0]);
    }

    #[test]
    fn live_messages_need_three_frames_and_an_eight_byte_sequence_number() {
        let m = |f: &[&[u8]]| {
            ZmqMessage::try_from(
                f.iter()
                    .map(|x| Bytes::copy_from_slice(x))
                    .collect::<Vec<_>>(),
            )
            .unwrap()
        };
        let seq = 9u64.to_be_bytes();
        assert_eq!(
            parse_live(m(&[b"kv-events", &seq, b"p"])),
            Some((9, Bytes::from_static(b"p")))
        );
        assert_eq!(parse_live(m(&[&seq, b"p"])), None);
        assert_eq!(parse_live(m(&[b"", b"\x01", b"p"])), None);
    }
}
