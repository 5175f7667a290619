//! [`Pool`]: idle connections to one address, shared by concurrent requests.

use crate::addr::Addr;
use crate::body::{whole_within, BodyStream, Response};
use crate::conn::{build, connect, Header};
use crate::error::ClientError;
use crate::idle::Idle;
use http::Method;
use std::sync::Arc;
use std::time::Duration;

/// Connections to one address, each reused once the body it carried has been read to its
/// end (a load generator's thousands of requests need not open thousands of connections).
/// A request takes an idle connection or opens a new one; a body dropped before its end
/// closes its connection.
#[derive(Clone, Debug)]
pub struct Pool {
    addr: Addr,
    idle: Arc<Idle>,
}

impl Pool {
    /// A pool for `addr` keeping at most `max_idle` idle connections.
    pub fn new(addr: Addr, max_idle: usize) -> Self {
        Self {
            addr,
            idle: Arc::new(Idle::new(max_idle)),
        }
    }

    /// Where the pool connects.
    pub fn addr(&self) -> &Addr {
        &self.addr
    }

    /// How many connections are idle now.
    pub fn idle(&self) -> usize {
        self.idle.len()
    }

    /// Sends one request and returns the status and the open body. A kept connection that
    /// fails before a response head (the server closed it as the request went out) is
    /// dropped and the request is sent once more on a new connection; the caller bounds
    /// the time.
    pub async fn open_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
        extra: &[Header],
    ) -> Result<(u16, BodyStream), ClientError> {
        let req = || build(&self.addr, method.clone(), path, body, extra);
        if let Some(mut sender) = self.idle.take() {
            if sender.ready().await.is_ok() {
                match sender.send_request(req()?).await {
                    Ok(resp) => {
                        return Ok(BodyStream::new(resp, Some((sender, self.idle.clone()))))
                    }
                    Err(e) => tracing::debug!(error = %e, "kept connection failed; reconnecting"),
                }
            }
        }
        let mut sender = connect(&self.addr).await?;
        let resp = sender.send_request(req()?).await?;
        Ok(BodyStream::new(resp, Some((sender, self.idle.clone()))))
    }

    /// [`open_with`](Self::open_with) read whole (at most [`MAX_BODY`](crate::MAX_BODY)
    /// bytes) within `timeout`; any status comes back.
    pub async fn fetch(
        &self,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
        extra: &[Header],
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        whole_within(timeout, self.open_with(method, path, body, extra)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::serve_all;
    use std::sync::atomic::Ordering;

    #[tokio::test]
    async fn a_body_read_to_its_end_frees_its_connection_for_the_next_request() {
        let (addr, accepts) = serve_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
        let pool = Pool::new(addr, 8);
        for i in 0..4 {
            let (status, body) = pool.open_with(Method::GET, "/", None, &[]).await.unwrap();
            assert_eq!(status, 200);
            assert_eq!(body.read_all(16).await.unwrap(), b"ok", "request {i}");
            assert_eq!(pool.idle(), 1, "request {i}");
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 1);

        let r = pool
            .fetch(Method::GET, "/", None, &[], Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
        assert_eq!(accepts.load(Ordering::SeqCst), 1);

        // Two at once: two connections; a body dropped unread closes its connection.
        let (_, a) = pool.open_with(Method::GET, "/", None, &[]).await.unwrap();
        let (_, b) = pool.open_with(Method::GET, "/", None, &[]).await.unwrap();
        assert_eq!(accepts.load(Ordering::SeqCst), 2);
        drop(a);
        b.read_all(16).await.unwrap();
        assert_eq!(pool.idle(), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced() {
        // One answer per connection, then the server closes it.
        let (addr, accepts) =
            serve_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok").await;
        let pool = Pool::new(addr, 8);
        for i in 0..3 {
            let (_, body) = pool
                .open_with(Method::POST, "/", Some(b"{}"), &[])
                .await
                .unwrap();
            assert_eq!(body.read_all(16).await.unwrap(), b"ok", "request {i}");
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 3);
        assert_eq!(pool.idle(), 0);
    }
}
