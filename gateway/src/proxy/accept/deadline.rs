//! A total deadline for reading each request header (`timeouts.client_read_ms`).
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
//! The gateway serves plaintext HTTP/1.1 only (no h2c), so each connection carries one
//! request at a time and the two hooks see every one.

use async_trait::async_trait;
use pingora_core::protocols::{Shutdown, Stream};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The deadline is off: the header has been read.
const OFF: u64 = 0;
/// Between requests: the clock starts at the next byte.
const WAITING: u64 = u64::MAX;

/// An accepted connection with a header deadline (see the module docs).
#[derive(Debug)]
pub struct DeadlineStream {
    inner: Stream,
    start: Instant,
    limit_ms: u64,
    /// [`OFF`], [`WAITING`], or the deadline as milliseconds since `start`, plus one.
    deadline: AtomicU64,
    /// Wakes a read that waits past the deadline.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl DeadlineStream {
    /// `inner` with a total deadline of `limit` for each request header.
    pub fn wrap(inner: Stream, limit: Duration) -> Stream {
        Box::new(Self::new(inner, limit))
    }

    fn new(inner: Stream, limit: Duration) -> Self {
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX / 2);
        Self {
            inner,
            start: Instant::now(),
            limit_ms,
            deadline: AtomicU64::new(limit_ms + 1),
            timer: None,
        }
    }

    /// The connection's deadline stream, when the session runs on one.
    pub fn of(session: &pingora_proxy::Session) -> Option<&Self> {
        session.as_downstream().stream()?.as_any().downcast_ref()
    }

    /// The header is complete: no deadline until the next request.
    pub fn header_read(&self) {
        self.deadline.store(OFF, Ordering::Relaxed);
    }

    /// The request is done: the next one's clock starts at its first byte.
    pub fn expect_next_request(&self) {
        self.deadline.store(WAITING, Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX / 2) + 1
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
        let deadline = this.deadline.load(Ordering::Relaxed);
        if deadline == OFF {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if deadline != WAITING && this.now_ms() >= deadline {
            return Poll::Ready(Err(this.timed_out()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if deadline == WAITING && buf.filled().len() > before {
                    let at = this.now_ms() + this.limit_ms;
                    this.deadline.store(at, Ordering::Relaxed);
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
