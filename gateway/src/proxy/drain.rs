//! Draining on `SIGTERM`: in-flight streams finish within `shutdown_grace_s`, one still
//! running near its end is ended with a terminal SSE error event instead of being cut
//! silently when Pingora tears its runtimes down, and the process exits as soon as the last
//! client connection has closed (an idle gateway stops at once, not after the grace period).
//!
//! On `SIGTERM` Pingora stops accepting (the listener closes: new connections are refused),
//! closes idle kept-alive connections and tells busy ones to close after their current
//! request, sleeps the whole grace period, then drops every task still running.
//! [`on_sigterm`] (on the control runtime) waits for the same signal and watches the open
//! client connections: once none has been open for [`QUIET`], it flushes the logs and exits
//! the process, without waiting for Pingora's sleep. [`cut_after`] the grace period less a
//! margin, it cuts every upstream connection still open: each is wrapped in a [`CutStream`]
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
use std::time::{Duration, Instant};
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

/// How often [`on_sigterm`] looks at the open connections while draining.
const POLL: Duration = Duration::from_millis(50);

/// How long no client connection must have been open before a draining gateway exits: the
/// work a request does after its connection closes (its log line, settling its tenant's
/// usage) gets this long to finish.
pub(crate) const QUIET: Duration = Duration::from_millis(250);

/// Tracks how long a count has stayed at zero.
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    since: Option<Instant>,
}

impl Quiet {
    /// Records `open` connections seen at `now`; true once none has been open for `quiet`.
    pub(crate) fn observe(&mut self, open: u32, now: Instant, quiet: Duration) -> bool {
        if open > 0 {
            self.since = None;
            return false;
        }
        now.duration_since(*self.since.get_or_insert(now)) >= quiet
    }
}

/// Waits for `SIGTERM`; then cuts [`DRAIN`] at [`cut_after`] the grace period, and exits the
/// process once `open()` (the client connections open) has stayed at zero for [`QUIET`].
pub(crate) async fn on_sigterm(grace: Duration, open: impl Fn() -> u32 + Send + 'static) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch SIGTERM, streams are not cut before exit: {e}");
            return;
        }
    };
    term.recv().await;
    let after = cut_after(grace);
    let cut_at = Instant::now() + after;
    tracing::info!(
        grace_s = grace.as_secs(),
        cut_after_ms = after.as_millis() as u64,
        open = open(),
        "SIGTERM: draining"
    );
    let mut quiet = Quiet::default();
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let now = Instant::now();
        if !DRAIN.is_cut() && now >= cut_at {
            tracing::info!("grace period ending: cutting the streams still running");
            DRAIN.cut();
        }
        if quiet.observe(open(), now, QUIET) {
            break;
        }
    }
    tracing::info!("drained: no client connection open, exiting");
    crate::logging::serving(false);
    std::process::exit(0);
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

    #[test]
    fn quiet_only_after_the_count_stays_at_zero() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut q = Quiet::default();
        assert!(!q.observe(2, t0, ms(250)), "connections open");
        assert!(!q.observe(0, t0 + ms(10), ms(250)), "zero only just now");
        assert!(!q.observe(0, t0 + ms(200), ms(250)));
        assert!(
            !q.observe(1, t0 + ms(300), ms(250)),
            "a connection came back"
        );
        assert!(
            !q.observe(0, t0 + ms(310), ms(250)),
            "the quiet period restarts"
        );
        assert!(q.observe(0, t0 + ms(560), ms(250)));
        assert!(Quiet::default().observe(0, t0, Duration::ZERO));
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
