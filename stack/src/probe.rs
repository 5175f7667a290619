//! A loopback HTTP client for readiness checks: one request per connection, the whole
//! body read, on the workspace's client ([`warmpath_http`]).

use crate::error::StackError;
use http::{HeaderName, HeaderValue, Method};
use std::time::Duration;
use warmpath_http::Addr;

/// A response: status, headers and the whole body.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Reply {
    /// Body parsed as JSON.
    pub fn json(&self) -> Result<serde_json::Value, StackError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            StackError::Http(format!(
                "not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            ))
        })
    }

    /// First header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` to `addr` (`127.0.0.1:PORT`) with optional JSON body and headers;
/// the whole exchange (connect, request, body) must finish within `timeout`. Any status
/// is a reply (a redirect is not followed).
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    timeout: Duration,
) -> Result<Reply, StackError> {
    let fail = |e: &dyn std::fmt::Display| StackError::Http(format!("{method} {addr}{path}: {e}"));
    let to: Addr = addr.parse().map_err(|e| fail(&e))?;
    let method_ = Method::from_bytes(method.as_bytes()).map_err(|e| fail(&e))?;
    let extra = headers
        .iter()
        .map(|(k, v)| {
            Ok((
                HeaderName::from_bytes(k.as_bytes())?,
                HeaderValue::from_str(v)?,
            ))
        })
        .collect::<Result<Vec<_>, http::Error>>()
        .map_err(|e| fail(&e))?;
    let r = warmpath_http::fetch(&to, method_, path, body.map(str::as_bytes), &extra, timeout)
        .await
        .map_err(|e| fail(&e))?;
    let headers = r
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    Ok(Reply {
        status: r.status,
        headers,
        body: r.body,
    })
}

/// `GET path`, within 5 s.
pub async fn get(addr: &str, path: &str) -> Result<Reply, StackError> {
    request(addr, "GET", path, &[], None, Duration::from_secs(5)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-shot server on a free loopback port: reads one request head, answers `raw`,
    /// and hands back what it read.
    async fn serve_once(raw: &'static [u8]) -> (String, tokio::task::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.expect("read");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(raw).await.expect("write");
            s.shutdown().await.expect("shutdown");
            String::from_utf8_lossy(&got).into_owned()
        });
        (addr, task)
    }

    #[tokio::test]
    async fn reads_chunked_and_plain_bodies_and_sends_headers() {
        let (addr, srv) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .await;
        let r = request(
            &addr,
            "POST",
            "/x",
            &[("Authorization", "Bearer k")],
            Some("{}"),
            Duration::from_secs(5),
        )
        .await
        .expect("reply");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcde"[..]));
        let head = srv.await.expect("server").to_ascii_lowercase();
        assert!(head.starts_with("post /x http/1.1\r\n"), "{head}");
        assert!(head.contains("authorization: bearer k\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json\r\n"),
            "{head}"
        );

        let (addr, _srv) =
            serve_once(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nX-A: b\r\n\r\nno").await;
        let r = get(&addr, "/").await.expect("reply");
        assert_eq!((r.status, r.body.as_slice()), (404, &b"no"[..]));
        assert_eq!(r.header("x-a"), Some("b"));
    }

    #[tokio::test]
    async fn garbage_refusal_and_silence_are_errors() {
        let (addr, _srv) = serve_once(b"garbage\r\n\r\n").await;
        assert!(get(&addr, "/").await.is_err());
        // A port with nothing listening: bind, note the port, close.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        assert!(get(&closed, "/").await.is_err());
        // A server that accepts and never answers: the timeout ends the exchange.
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let hold = tokio::spawn(async move { l.accept().await.map(|(s, _)| s) });
        let t0 = std::time::Instant::now();
        let e = request(&addr, "GET", "/", &[], None, Duration::from_millis(300)).await;
        assert!(
            matches!(&e, Err(StackError::Http(m)) if m.contains("timed out")),
            "{e:?}"
        );
        assert!(t0.elapsed() < Duration::from_secs(3));
        hold.abort();
    }
}
