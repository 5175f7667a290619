//! One send for a request header and its body.
//!
//! Pingora's HTTP/1 client flushes a request header as soon as it is written and then
//! writes the body: two `send`s, two TCP segments and, on a replica that sleeps between
//! requests, two wake-ups per request. The gateway holds every request body whole before it
//! connects upstream (`crate::proxy::read` reads it for routing), so nothing is gained by sending
//! the header ahead of it. [`Coalesce`] wraps an upstream connection and follows the
//! requests written on it ([`super::framing`]): a request header announcing a
//! body by `Content-Length` is held, a flush while it is held sends nothing, and the first
//! body write goes out together with it in one vectored write.
//!
//! Only a header is ever held, never a body byte, and only until the next write, a
//! shutdown or the end of the connection. A header whose body never followed would leave
//! the replica waiting for that body anyway, so holding it adds no failure of its own; the
//! read deadline bounds both alike. A connection whose framing it cannot follow (a chunked
//! request) is passed through untouched from then on.

use super::framing::{self, Header, Position};
use async_trait::async_trait;
use pingora_core::protocols::{Shutdown, Stream};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The largest header held back (a larger one goes out as written).
const MAX_HELD: usize = 16 * 1024;

/// An upstream connection that sends a request header together with its body.
#[derive(Debug)]
pub(crate) struct Coalesce {
    inner: Stream,
    /// Where the writes stand in the current request.
    position: Position,
    /// A request header written but not yet sent (empty: nothing held).
    held: Vec<u8>,
    /// Bytes of `held` already sent.
    sent: usize,
}

impl Coalesce {
    /// Wraps a new connection (no request written on it yet).
    pub(crate) fn new(inner: Stream) -> Self {
        Self {
            inner,
            position: Position::Boundary,
            held: Vec::new(),
            sent: 0,
        }
    }

    /// Whether a request header is being held for its body.
    pub(crate) fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Sends what is held (and, with `body`, as much of it as the socket takes in the same
    /// write); returns the bytes of `body` written, 0 when nothing was held.
    fn poll_release(&mut self, cx: &mut Context<'_>, body: &[u8]) -> Poll<io::Result<usize>> {
        while self.sent < self.held.len() {
            let rest = &self.held[self.sent..];
            let rest_len = rest.len();
            let n = ready!(Pin::new(&mut self.inner)
                .poll_write_vectored(cx, &[IoSlice::new(rest), IoSlice::new(body)]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if n < rest_len {
                self.sent += n;
                continue;
            }
            self.held.clear();
            self.sent = 0;
            return Poll::Ready(Ok(n - rest_len));
        }
        Poll::Ready(Ok(0))
    }

    /// A write at a request boundary: the header is held when its body follows.
    fn poll_header(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let header = framing::header(buf);
        if let Header::Body { length, hold: true } = header {
            if buf.len() <= MAX_HELD {
                self.held.extend_from_slice(buf);
                self.position = Position::Body(length);
                return Poll::Ready(Ok(buf.len()));
            }
        }
        let n = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.position = match header {
            // A header is followed only when it went out whole.
            _ if n < buf.len() => Position::Lost,
            Header::Body { length, .. } => Position::Body(length),
            Header::Empty => Position::Boundary,
            Header::Unknown => Position::Lost,
        };
        Poll::Ready(Ok(n))
    }

    /// A write of body bytes (`left` of them still to come).
    fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
        left: u64,
    ) -> Poll<io::Result<usize>> {
        let mut n = 0;
        if self.holding() {
            n = ready!(self.poll_release(cx, buf))?;
        }
        if n == 0 && !buf.is_empty() {
            n = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        }
        self.position = Position::after_body(left, n);
        Poll::Ready(Ok(n))
    }
}

impl AsyncWrite for Coalesce {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.position {
            Position::Boundary => this.poll_header(cx, buf),
            Position::Body(left) => this.poll_body(cx, buf, left),
            // Nothing is held here: a hold ends with the first body write.
            Position::Lost => Pin::new(&mut this.inner).poll_write(cx, buf),
        }
    }

    // Vectored writes take the default path (the first non-empty slice through
    // `poll_write`), so every byte is counted against the framing.

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.holding() {
            // The body is on its way: it takes the header with it.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.holding() {
            ready!(this.poll_release(cx, &[]))?;
            ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl AsyncRead for Coalesce {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

// Everything else is the connection's own.

#[async_trait]
impl Shutdown for Coalesce {
    async fn shutdown(&mut self) {
        if self.holding() {
            // Best effort, as Pingora's own shutdown: the connection is closing anyway.
            let _ = std::future::poll_fn(|cx| self.poll_release(cx, &[])).await;
            let _ = self.inner.flush().await;
        }
        Shutdown::shutdown(&mut *self.inner).await;
    }
}

crate::proxy::wrapped::connection_traits!(Coalesce);

#[cfg(test)]
#[path = "coalesce_tests.rs"]
mod tests;
