//! [`KeptAlive`]: one connection a poller reuses.

use crate::addr::Addr;
use crate::body::{BodyStream, Response, MAX_BODY};
use crate::conn::{build, connect, Sender};
use crate::error::ClientError;
use http::Method;
use std::time::Duration;

/// A kept-alive connection for a poller: one connection serves request after request, and
/// is reopened after a failure or a close (a load poll every 200 ms would otherwise open
/// five connections a second per replica).
pub struct KeptAlive {
    addr: Addr,
    sender: Option<Sender>,
}

impl KeptAlive {
    /// No connection yet; the first request opens one.
    pub fn new(addr: Addr) -> Self {
        Self { addr, sender: None }
    }

    /// `GET path` parsed as JSON, within `timeout`. Non-2xx is an error; any failure drops
    /// the connection.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        self.get(path, timeout).await?.success()?.json()
    }

    /// `GET path`'s body (a 2xx), within `timeout`; any failure drops the connection.
    pub async fn get_body(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<Vec<u8>, ClientError> {
        Ok(self.get(path, timeout).await?.success()?.body)
    }

    /// `GET path`, any status. A kept connection the server has just closed fails at
    /// once: one more try, on a new connection.
    async fn get(&mut self, path: &str, timeout: Duration) -> Result<Response, ClientError> {
        let reused = self.is_connected();
        let res = self.exchange_within(path, timeout).await;
        if res.is_err() && reused {
            return self.exchange_within(path, timeout).await;
        }
        res
    }

    async fn exchange_within(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        let res = tokio::time::timeout(timeout, self.exchange(path))
            .await
            .unwrap_or(Err(ClientError::Timeout));
        if res.is_err() {
            self.sender = None;
        }
        res
    }

    async fn exchange(&mut self, path: &str) -> Result<Response, ClientError> {
        let mut sender = match self.sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => connect(&self.addr).await?,
        };
        sender.ready().await?;
        let resp = sender
            .send_request(build(&self.addr, Method::GET, path, None, &[])?)
            .await?;
        let (status, body) = BodyStream::new(resp, None);
        let resp = body.into_response(status, MAX_BODY).await?;
        self.sender = Some(sender);
        Ok(resp)
    }

    /// Whether a connection is open.
    pub fn is_connected(&self) -> bool {
        self.sender.as_ref().is_some_and(|s| !s.is_closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn a_kept_alive_connection_serves_polls_and_reopens_after_a_close() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = Addr::from(l.local_addr().unwrap());
        let accepts = Arc::new(AtomicUsize::new(0));
        let counted = accepts.clone();
        // Each connection answers two requests; a third is read and dropped with the
        // connection, unanswered (a server closing a kept connection as a request arrives).
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    for answer in [true, true, false] {
                        if crate::testing::read_head(&mut s).await.is_none() {
                            return;
                        }
                        if answer {
                            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
                            s.write_all(reply).await.unwrap();
                        }
                    }
                });
            }
        });
        let mut c = KeptAlive::new(addr);
        for i in 0..6 {
            // Every poll succeeds: the one that meets a dropped connection is retried on a
            // new one.
            let v: serde_json::Value = c.get_json("/load", Duration::from_secs(2)).await.unwrap();
            assert_eq!(v["a"], 1, "poll {i}");
            assert!(c.is_connected(), "poll {i}");
        }
        // Six polls on connections that answer two each: three connections, not six.
        assert_eq!(accepts.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_poll_fails_on_a_non_2xx_and_drops_nothing_else() {
        let (addr, _) =
            crate::testing::serve_all(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n").await;
        let mut c = KeptAlive::new(addr);
        let e = c.get_body("/metrics", Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Status(500))), "{e:?}");
    }
}
