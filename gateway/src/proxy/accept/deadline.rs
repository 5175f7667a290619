//! A total deadline for reading each request header (`timeouts.client_read_ms`), and the
//! bounds on its size ([`super::head`]).
//!
//! Pingora bounds each read of a request header (by its keep-alive timeout, 60 s), not the
//! whole header, so a client that sends a header a byte at a time holds a connection open
//! for as long as it likes (slowloris). Every accepted connection is wrapped in a
//! [`DeadlineStream`] (`super::connection`), whose reads fail with `TimedOut` once a header
//! has been arriving for longer than the limit.
//!
//! The clock of a connection:
//! - runs from the accept for the first request;
//! - stops when the gateway's request filter runs ([`DeadlineStream::header_read`]): the
//!   header is complete, and the body has its own deadline (`crate::proxy::read`);
//! - restarts at the first byte of the next request on the connection, after the previous
//!   one has been logged ([`DeadlineStream::expect_next_request`]); an idle keep-alive
//!   connection is Pingora's to close (60 s).
//!
//! The same wrapper counts each head's bytes and lines as they pass ([`HeadScanner`], reset
//! with the clock): once a head is over `limits.max_header_bytes` or `limits.max_headers`,
//! the bytes that passed a bound are withheld from Pingora, the connection is answered
//! with a 431 OpenAI error (`headers_too_large`, `Connection: close`), its write side shut,
//! and up to [`DRAIN_BYTES`] more of what the client is still sending are read and dropped
//! for at most [`DRAIN_MS`] (so that the client sees the answer rather than a reset); then
//! the read fails and Pingora drops the connection without an answer of its own.
//!
//! Pipelining. Once a request has been read whole and is being answered
//! ([`DeadlineStream::body_read`]), Pingora keeps reading the connection only to notice a
//! client that goes away, and fails the request if a byte arrives ("sent data after end of
//! body"): a client that pipelines its next request would get a 502 for the first. So in
//! that phase the wrapper holds back what arrives (at most [`PIPELINE_BYTES`]; more fails
//! the read) and gives Pingora only the end of the connection; the held bytes are the start
//! of the next request, read once this one has been logged.
//!
//! The gateway serves plaintext HTTP/1.1 only (no h2c), so each connection carries one
//! request at a time and the hooks see every one.

use super::answer;
use super::head::{HeadLimits, HeadScanner, Verdict};
use crate::error::GatewayError;
use async_trait::async_trait;
use pingora_core::protocols::{Shutdown, Stream};
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The deadline is off: the header has been read.
const OFF: u64 = 0;
/// Between requests: the clock starts at the next byte.
const WAITING: u64 = u64::MAX;
/// A request is being answered: what arrives is held back for the next one.
const HELD: u64 = u64::MAX - 1;
/// The most bytes of pipelined requests held back while one is answered.
pub(crate) const PIPELINE_BYTES: usize = 64 * 1024;
/// After a 431, the most bytes read and dropped before the connection is closed.
pub(crate) const DRAIN_BYTES: usize = 64 * 1024;
/// After a 431, the longest wait for the client to stop sending.
pub(crate) const DRAIN_MS: u64 = 1000;

/// The limits of one connection's request heads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// The total deadline for each request header.
    pub deadline: Duration,
    /// Bounds on each head's size.
    pub head: HeadLimits,
}

/// A head over its bounds being answered: the 431 written, the write side shut, then
/// what the client still sends drained.
#[derive(Debug)]
struct Refusal {
    answer: Vec<u8>,
    written: usize,
    shut: bool,
    drained: usize,
}

/// An accepted connection with a header deadline (see the module docs).
#[derive(Debug)]
pub(crate) struct DeadlineStream {
    inner: Stream,
    start: Instant,
    limit_ms: u64,
    /// [`OFF`], [`WAITING`], or the deadline as milliseconds since `start`, plus one.
    deadline: AtomicU64,
    /// Wakes a read that waits past the deadline.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    head: HeadScanner,
    head_limits: HeadLimits,
    refusal: Option<Refusal>,
    /// Pipelined bytes held back while a request was answered, not yet given to Pingora.
    early: Vec<u8>,
    /// The client closed its side after pipelining (`early` is the rest of the connection).
    early_eof: bool,
}

impl DeadlineStream {
    /// `inner` with a total deadline and size bounds for each request header.
    pub(crate) fn wrap(inner: Stream, limits: Limits) -> Stream {
        Box::new(Self::new(inner, limits))
    }

    fn new(inner: Stream, limits: Limits) -> Self {
        let limit_ms = u64::try_from(limits.deadline.as_millis()).unwrap_or(u64::MAX / 2);
        Self {
            inner,
            start: Instant::now(),
            limit_ms,
            deadline: AtomicU64::new(limit_ms + 1),
            timer: None,
            head: HeadScanner::new(),
            head_limits: limits.head,
            refusal: None,
            early: Vec::new(),
            early_eof: false,
        }
    }

    /// The connection's deadline stream, when the session runs on one.
    pub(crate) fn of(session: &pingora_proxy::Session) -> Option<&Self> {
        session.as_downstream().stream()?.as_any().downcast_ref()
    }

    /// The header is complete: no deadline until the next request.
    pub(crate) fn header_read(&self) {
        self.deadline.store(OFF, Ordering::Relaxed);
    }

    /// The request body has been read whole and the request is being answered: what the
    /// client sends now is held back (see the module docs).
    pub(crate) fn body_read(&self) {
        self.deadline.store(HELD, Ordering::Relaxed);
    }

    /// The request is done: the next one's clock starts at its first byte.
    pub(crate) fn expect_next_request(&self) {
        self.deadline.store(WAITING, Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX / 2) + 1
    }

    /// Starts answering a head over its bounds.
    fn refuse(&mut self) {
        let err = GatewayError::HeadersTooLarge {
            limit: self.head_limits.max_bytes,
        };
        tracing::debug!(limits = ?self.head_limits, "request head over its bounds: 431");
        self.refusal = Some(Refusal {
            answer: answer::closing(&err),
            written: 0,
            shut: false,
            drained: 0,
        });
        self.timer = None;
    }

    /// Drives the 431 (see the module docs); ends with an error for Pingora.
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = || io::Error::new(io::ErrorKind::InvalidData, "request head too large");
        let Some(r) = self.refusal.as_mut() else {
            return Poll::Ready(Err(done()));
        };
        let mut inner = Pin::new(&mut self.inner);
        while r.written < r.answer.len() {
            match inner.as_mut().poll_write(cx, &r.answer[r.written..]) {
                Poll::Ready(Ok(n)) if n > 0 => r.written += n,
                Poll::Ready(_) => return Poll::Ready(Err(done())),
                Poll::Pending => return Poll::Pending,
            }
        }
        if !r.shut {
            match inner.as_mut().poll_flush(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(Err(done())),
                Poll::Pending => return Poll::Pending,
            }
            match inner.as_mut().poll_shutdown(cx) {
                Poll::Ready(_) => r.shut = true,
                Poll::Pending => return Poll::Pending,
            }
        }
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(DRAIN_MS))));
        let mut scratch = [MaybeUninit::<u8>::uninit(); 4096];
        while r.drained < DRAIN_BYTES {
            let mut rb = ReadBuf::uninit(&mut scratch);
            match inner.as_mut().poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => r.drained += rb.filled().len(),
                Poll::Ready(_) => break,
                Poll::Pending => {
                    if timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    break;
                }
            }
        }
        Poll::Ready(Err(done()))
    }

    /// While a request is answered: holds back what arrives; ends only with the connection
    /// (an end with nothing held) or an error.
    fn poll_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.early_eof {
            return Poll::Pending;
        }
        // Not zeroed: this runs on every poll of a request being answered, and 4 KiB of
        // zeroes each time was a measurable share of a short request's cost.
        let mut scratch = [MaybeUninit::<u8>::uninit(); 4096];
        loop {
            let mut rb = ReadBuf::uninit(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                    if self.early.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                    // The next request is complete as far as the client goes; it is
                    // read after this one, and the end after it.
                    self.early_eof = true;
                    return Poll::Pending;
                }
                Poll::Ready(Ok(())) => {
                    if self.early.len() + rb.filled().len() > PIPELINE_BYTES {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("more than {PIPELINE_BYTES} bytes pipelined"),
                        )));
                    }
                    self.early.extend_from_slice(rb.filled());
                }
                other => return other,
            }
        }
    }

    /// The next bytes of the connection: the held-back ones first.
    fn poll_source(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.early.is_empty() {
            if self.early_eof {
                return Poll::Ready(Ok(()));
            }
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        let n = self.early.len().min(buf.remaining());
        buf.put_slice(&self.early[..n]);
        self.early.drain(..n);
        Poll::Ready(Ok(()))
    }

    fn timed_out(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("request header not complete within {} ms", self.limit_ms),
        )
    }
}

impl AsyncRead for DeadlineStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.refusal.is_some() {
            return this.poll_refusal(cx);
        }
        let deadline = this.deadline.load(Ordering::Relaxed);
        if deadline == HELD {
            return this.poll_held(cx);
        }
        if deadline == OFF {
            return this.poll_source(cx, buf);
        }
        if deadline != WAITING && this.now_ms() >= deadline {
            return Poll::Ready(Err(this.timed_out()));
        }
        let before = buf.filled().len();
        match this.poll_source(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() == before {
                    return Poll::Ready(Ok(()));
                }
                if deadline == WAITING {
                    let at = this.now_ms() + this.limit_ms;
                    this.deadline.store(at, Ordering::Relaxed);
                    this.head.reset();
                }
                if this.head.feed(&buf.filled()[before..], this.head_limits) == Verdict::TooLarge {
                    // Pingora never sees the bytes that passed a bound.
                    buf.set_filled(before);
                    this.refuse();
                    return this.poll_refusal(cx);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if deadline != WAITING => {
                let at = tokio::time::Instant::from_std(
                    this.start + Duration::from_millis(deadline - 1),
                );
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(this.timed_out())),
                    Poll::Pending => Poll::Pending,
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for DeadlineStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

// Everything else is the connection's own.

#[async_trait]
impl Shutdown for DeadlineStream {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await;
    }
}

crate::proxy::wrapped::connection_traits!(DeadlineStream);

#[cfg(test)]
#[path = "deadline_tests.rs"]
mod tests;
