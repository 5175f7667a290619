//! Draining on `SIGTERM`: in-flight streams finish within `shutdown_grace_s`, and one still
//! running near its end is ended with a terminal SSE error event instead of being cut
//! silently when Pingora tears its runtimes down.
//!
//! On `SIGTERM` Pingora stops accepting (the listener closes: new connections are refused),
//! tells kept-alive connections to close after their current request, sleeps the whole
//! grace period, then drops every task still running. [`on_sigterm`] (on the control
//! runtime) waits for the same signal and, [`cut_after`] the grace period less a margin,
//! cuts every upstream connection: each is wrapped in a [`CutStream`]
//! (`crate::proxy::upstream`) whose reads then fail. A stream under way takes the ordinary
//! failure path (`crate::proxy::failure::answer`): its client gets the error event, never
//! `[DONE]`, and the response ends; a request still waiting for its first byte gets a 502
//! OpenAI error.

use async_trait::async_trait;
use pingora_core::protocols::{Shutdown, Stream};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Whether upstream connections have been cut, and who to wake when they are.
#[derive(Debug)]
pub(crate) struct Drain {
    cut: AtomicBool,
    notify: Notify,
}

impl Drain {
    /// Not cut.
    pub(crate) const fn new() -> Self {
        Self {
            cut: AtomicBool::new(false),
            notify: Notify::const_new(),
        }
    }

    /// Cuts every upstream connection (reads pending now fail too).
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether [`Self::cut`] has run.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Acquire)
    }
}

impl Default for Drain {
    fn default() -> Self {
        Self::new()
    }
}

/// The process's drain.
pub(crate) static DRAIN: Drain = Drain::new();

/// When, after `SIGTERM`, upstream connections are cut: the grace period less a quarter
/// of it, at most 1 s, so that the error events are written before Pingora stops.
pub(crate) fn cut_after(grace: Duration) -> Duration {
    grace.saturating_sub((grace / 4).min(Duration::from_secs(1)))
}

/// Waits for `SIGTERM`, then cuts [`DRAIN`] at [`cut_after`] the grace period.
pub(crate) async fn on_sigterm(grace: Duration) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch SIGTERM, streams are not cut before exit: {e}");
            return;
        }
    };
    term.recv().await;
    let after = cut_after(grace);
    tracing::info!(
        grace_s = grace.as_secs(),
        cut_after_ms = after.as_millis() as u64,
        "SIGTERM: draining"
    );
    tokio::time::sleep(after).await;
    tracing::info!("grace period ending: cutting the streams still running");
    DRAIN.cut();
}

/// An upstream connection whose reads fail once its [`Drain`] is cut.
pub(crate) struct CutStream {
    inner: Stream,
    drain: &'static Drain,
    /// Wakes a read pending when the cut comes.
    notified: Option<Pin<Box<Notified<'static>>>>,
}

impl std::fmt::Debug for CutStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutStream")
            .field("inner", &self.inner)
            .field("cut", &self.drain.is_cut())
            .finish()
    }
}

impl CutStream {
    /// `inner`, cut with `drain`.
    pub(crate) fn new(inner: Stream, drain: &'static Drain) -> Self {
        Self {
            inner,
            drain,
            notified: None,
        }
    }

    fn cut_error() -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the gateway is shutting down",
        )
    }
}

impl AsyncRead for CutStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.drain.is_cut() {
            return Poll::Ready(Err(Self::cut_error()));
        }
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending => {
                let drain = this.drain;
                let notified = this.notified.get_or_insert_with(|| {
                    let mut n = Box::pin(drain.notify.notified());
                    n.as_mut().enable();
                    n
                });
                if drain.is_cut() || notified.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(Self::cut_error()));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl AsyncWrite for CutStream {
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

#[async_trait]
impl Shutdown for CutStream {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await;
    }
}

crate::proxy::wrapped::connection_traits!(CutStream);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn the_cut_comes_before_the_grace_period_ends() {
        assert_eq!(cut_after(Duration::from_secs(30)), Duration::from_secs(29));
        assert_eq!(
            cut_after(Duration::from_secs(2)),
            Duration::from_millis(1500)
        );
        assert_eq!(cut_after(Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_pending_read_fails_when_the_drain_is_cut() {
        static D: Drain = Drain::new();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = l.accept().await.unwrap();
        let inner: Stream = Box::new(pingora_core::protocols::l4::stream::Stream::from(tcp));
        let mut s = CutStream::new(inner, &D);
        let read = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            s.read(&mut buf).await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!read.is_finished(), "nothing to read yet");
        D.cut();
        let r = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("woken by the cut")
            .unwrap();
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
    }
}
