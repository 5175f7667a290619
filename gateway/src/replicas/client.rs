//! The control-plane HTTP client (replica info, load, tokenizer, KV event stream, health
//! probes), on hyper's HTTP/1.1 client: one connection per request, plain `http://` only.
//! The proxied traffic does not use it (Pingora keeps its own upstream pool).

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::Method;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;
/// Where a replica listens, parsed from `http://host:port`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplicaAddr {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl ReplicaAddr {
    /// Parses `http://host:port` (a trailing `/` is allowed; TLS is not supported).
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url:?}: only http:// replica URLs are supported"))?;
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(format!("{url:?}: a replica URL has no path"));
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{url:?}: missing port"))?;
        let port: u16 = port.parse().map_err(|_| format!("{url:?}: bad port"))?;
        if host.is_empty() {
            return Err(format!("{url:?}: missing host"));
        }
        Ok(Self {
            host: host.to_string(),
            port,
        })
    }

    /// `host:port`.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.authority())
    }
}

/// A control-plane request failure.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
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
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// An open response whose body is read incrementally. Dropping it closes the connection.
pub struct BodyStream {
    body: hyper::body::Incoming,
}

/// Sends one request on a new connection and returns the status and the open body.
pub async fn open(
    addr: &ReplicaAddr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
) -> Result<(u16, BodyStream), ClientError> {
    let stream = TcpStream::connect(addr.authority()).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection task ends with the response body (or when the body is dropped).
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "control-plane connection ended");
        }
    });
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.authority())
        .header(ACCEPT, "*/*");
    if body.is_some() {
        req = req.header(CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    Ok((
        status,
        BodyStream {
            body: resp.into_body(),
        },
    ))
}

impl BodyStream {
    /// The next piece of body, or `None` at the end. Cancel-safe: a dropped call loses
    /// nothing.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        while let Some(frame) = self.body.frame().await {
            // Trailers carry nothing the control plane reads.
            if let Ok(data) = frame?.into_data() {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// Reads the rest of the body, failing past `limit` bytes.
    pub async fn read_all(mut self, limit: usize) -> Result<Vec<u8>, ClientError> {
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
pub async fn request(
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
    let resp = tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| ClientError::Timeout)??;
    if !(200..300).contains(&resp.status) {
        return Err(ClientError::Status(resp.status));
    }
    Ok(resp)
}

/// The largest control-plane body read whole (a tokenizer spec is a few MB).
const MAX_BODY: usize = 256 * 1024 * 1024;

/// `GET path` parsed as JSON.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    addr: &ReplicaAddr,
    path: &str,
    timeout: Duration,
) -> Result<T, ClientError> {
    let resp = request(addr, Method::GET, path, None, timeout).await?;
    serde_json::from_slice(&resp.body).map_err(|e| ClientError::Protocol(e.to_string()))
}

/// Splits a byte stream into lines.
#[derive(Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes, returning the complete lines (without `\n`, `\r` trimmed).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.pending.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            out.push(line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn parses_replica_urls() {
        let a = ReplicaAddr::parse("http://127.0.0.1:9000/").unwrap();
        assert_eq!(a.authority(), "127.0.0.1:9000");
        assert!(ReplicaAddr::parse("https://x:1").is_err());
        assert!(ReplicaAddr::parse("http://x").is_err());
        assert!(ReplicaAddr::parse("http://x:1/v1").is_err());
    }

    #[test]
    fn splits_lines_across_pushes() {
        let mut s = LineSplitter::default();
        assert!(s.push(b"ab").is_empty());
        assert_eq!(s.push(b"c\r\nde\nf"), vec![b"abc".to_vec(), b"de".to_vec()]);
        assert_eq!(s.push(b"\n"), vec![b"f".to_vec()]);
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
