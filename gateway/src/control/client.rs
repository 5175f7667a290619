//! The control-plane HTTP client (replica info, load, tokenizer, KV event stream, health
//! probes), on hyper's HTTP/1.1 client: one connection per request, or one kept-alive
//! connection for the load poller ([`KeptAlive`]); plain `http://` only. The proxied
//! traffic does not use it (Pingora keeps its own upstream pool).

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::Method;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;

use crate::replicas::addr::ReplicaAddr;
/// A control-plane request failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// Connect failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The HTTP exchange failed (bad response, connection closed early).
    #[error("http: {0}")]
    Http(#[from] hyper::Error),
    /// Deadline passed.
    #[error("timed out")]
    Timeout,
    /// The request could not be built, or the response was unusable.
    #[error("bad exchange: {0}")]
    Protocol(String),
    /// Non-2xx status.
    #[error("status {0}")]
    Status(u16),
}

/// A response with its whole body.
#[derive(Debug)]
pub(crate) struct Response {
    /// Status code.
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// The response, or [`ClientError::Status`] when it is not a 2xx.
    fn success(self) -> Result<Self, ClientError> {
        if (200..300).contains(&self.status) {
            Ok(self)
        } else {
            Err(ClientError::Status(self.status))
        }
    }

    /// The body parsed as JSON.
    fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}

/// An open response whose body is read incrementally. Dropping it closes the connection.
pub(crate) struct BodyStream {
    body: hyper::body::Incoming,
}

/// A sender on a new connection to `addr`; the connection task ends when the sender and
/// the last response body are dropped.
async fn connect(addr: &ReplicaAddr) -> Result<Sender, ClientError> {
    let stream = TcpStream::connect(addr.authority()).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "control-plane connection ended");
        }
    });
    Ok(sender)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

fn build(
    addr: &ReplicaAddr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    extra: &[(http::HeaderName, http::HeaderValue)],
) -> Result<http::Request<Full<Bytes>>, ClientError> {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.authority())
        .header(ACCEPT, "*/*");
    for (k, v) in extra {
        req = req.header(k, v);
    }
    if body.is_some() {
        req = req.header(CONTENT_TYPE, "application/json");
    }
    req.body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|e| ClientError::Protocol(e.to_string()))
}

/// Sends one request on a new connection and returns the status and the open body.
pub(crate) async fn open(
    addr: &ReplicaAddr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
) -> Result<(u16, BodyStream), ClientError> {
    open_with(addr, method, path, body, &[]).await
}

/// [`open`] with extra request headers.
pub(crate) async fn open_with(
    addr: &ReplicaAddr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    extra: &[(http::HeaderName, http::HeaderValue)],
) -> Result<(u16, BodyStream), ClientError> {
    let mut sender = connect(addr).await?;
    let resp = sender
        .send_request(build(addr, method, path, body, extra)?)
        .await?;
    let status = resp.status().as_u16();
    Ok((
        status,
        BodyStream {
            body: resp.into_body(),
        },
    ))
}

/// A kept-alive connection for a poller: one connection serves request after request, and
/// is reopened after a failure or a close (a load poll every 200 ms would otherwise open
/// five connections a second per replica).
pub(crate) struct KeptAlive {
    addr: ReplicaAddr,
    sender: Option<Sender>,
}

impl KeptAlive {
    /// No connection yet; the first request opens one.
    pub(crate) fn new(addr: ReplicaAddr) -> Self {
        Self { addr, sender: None }
    }

    /// `GET path` parsed as JSON, within `timeout`. Non-2xx is an error; any failure drops
    /// the connection.
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        // A kept connection the server has just closed fails at once: one more try, on a
        // new connection.
        let reused = self.is_connected();
        let mut res = self.exchange_within(path, timeout).await;
        if res.is_err() && reused {
            res = self.exchange_within(path, timeout).await;
        }
        res?.success()?.json()
    }

    /// `GET path`'s body (a 2xx), within `timeout`; any failure drops the connection.
    pub(crate) async fn get_body(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<Vec<u8>, ClientError> {
        let reused = self.is_connected();
        let mut res = self.exchange_within(path, timeout).await;
        if res.is_err() && reused {
            res = self.exchange_within(path, timeout).await;
        }
        Ok(res?.success()?.body)
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
        let status = resp.status().as_u16();
        let body = BodyStream {
            body: resp.into_body(),
        }
        .read_all(MAX_BODY)
        .await?;
        self.sender = Some(sender);
        Ok(Response { status, body })
    }

    /// Whether a connection is open.
    fn is_connected(&self) -> bool {
        self.sender.as_ref().is_some_and(|s| !s.is_closed())
    }
}

impl BodyStream {
    /// The next piece of body, or `None` at the end. Cancel-safe: a dropped call loses
    /// nothing.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        while let Some(frame) = self.body.frame().await {
            // Trailers carry nothing the control plane reads.
            if let Ok(data) = frame?.into_data() {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// Reads the rest of the body, failing past `limit` bytes.
    pub(crate) async fn read_all(mut self, limit: usize) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        while let Some(c) = self.next_chunk().await? {
            if out.len() + c.len() > limit {
                return Err(ClientError::Protocol(format!(
                    "body larger than {limit} bytes"
                )));
            }
            out.extend_from_slice(&c);
        }
        Ok(out)
    }
}

/// One request with a deadline; the whole body is returned. Non-2xx is an error.
pub(crate) async fn request(
    addr: &ReplicaAddr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    let fut = async {
        let (status, stream) = open(addr, method, path, body).await?;
        let body = stream.read_all(MAX_BODY).await?;
        Ok::<_, ClientError>(Response { status, body })
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| ClientError::Timeout)??
        .success()
}

/// `POST path` with a JSON body and extra headers, with a deadline; the whole answer is
/// returned. Non-2xx is an error.
pub(crate) async fn post_json(
    addr: &ReplicaAddr,
    path: &str,
    body: &[u8],
    extra: &[(http::HeaderName, http::HeaderValue)],
    timeout: Duration,
) -> Result<Response, ClientError> {
    let fut = async {
        let (status, stream) = open_with(addr, Method::POST, path, Some(body), extra).await?;
        let body = stream.read_all(MAX_BODY).await?;
        Ok::<_, ClientError>(Response { status, body })
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| ClientError::Timeout)??
        .success()
}

/// The largest control-plane body read whole (a tokenizer spec is a few MB).
const MAX_BODY: usize = 256 * 1024 * 1024;

/// `GET path` parsed as JSON.
pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    addr: &ReplicaAddr,
    path: &str,
    timeout: Duration,
) -> Result<T, ClientError> {
    request(addr, Method::GET, path, None, timeout)
        .await?
        .json()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-connection server that reads the request head and answers `reply`; it returns
    /// what it read.
    async fn serve_once(reply: &'static [u8]) -> (ReplicaAddr, tokio::task::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "client closed before its request head");
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(reply).await.unwrap();
            got
        });
        let addr = ReplicaAddr {
            host: "127.0.0.1".into(),
            port,
        };
        (addr, task)
    }

    #[tokio::test]
    async fn reads_chunked_and_length_bodies() {
        let (addr, server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .await;
        let r = request(&addr, Method::GET, "/v1/x", None, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcde"[..]));
        let head = String::from_utf8(server.await.unwrap()).unwrap();
        assert!(head.starts_with("GET /v1/x HTTP/1.1\r\n"), "{head}");
        assert!(head
            .to_ascii_lowercase()
            .contains(&format!("host: {}", addr.authority())));

        let (addr, _) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{\"a\"").await;
        let r = request(&addr, Method::GET, "/", None, Duration::from_secs(2)).await;
        // Length-delimited: exactly the promised bytes come back.
        assert_eq!(r.unwrap().body, b"{\"a\"");
    }

    #[tokio::test]
    async fn a_kept_alive_connection_serves_polls_and_reopens_after_a_close() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let accepts = Arc::new(AtomicUsize::new(0));
        let counted = accepts.clone();
        // Each connection answers two requests; a third is read and dropped with the
        // connection, unanswered (a server closing a kept connection as a request arrives).
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 1024];
                    for answer in [true, true, false] {
                        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        got.clear();
                        if answer {
                            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
                            s.write_all(reply).await.unwrap();
                        }
                    }
                });
            }
        });
        let addr = ReplicaAddr {
            host: "127.0.0.1".into(),
            port,
        };
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
    async fn failures_are_typed() {
        let (addr, _) =
            serve_once(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n").await;
        let e = request(
            &addr,
            Method::POST,
            "/",
            Some(b"{}"),
            Duration::from_secs(2),
        )
        .await;
        assert!(matches!(e, Err(ClientError::Status(503))), "{e:?}");

        // A body cut short of its Content-Length is an HTTP error, not a short body.
        let (addr, _) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").await;
        let e = request(&addr, Method::GET, "/", None, Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Http(_))), "{e:?}");

        // Not HTTP at all.
        let (addr, _) = serve_once(b"SSH-2.0-OpenSSH\r\n\r\n").await;
        let e = get_json::<serde_json::Value>(&addr, "/", Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Http(_))), "{e:?}");

        // Nobody answers within the deadline.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = ReplicaAddr {
            host: "127.0.0.1".into(),
            port: l.local_addr().unwrap().port(),
        };
        let e = request(&addr, Method::GET, "/", None, Duration::from_millis(200)).await;
        assert!(matches!(e, Err(ClientError::Timeout)), "{e:?}");
    }
}
