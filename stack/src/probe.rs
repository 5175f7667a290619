//! A minimal HTTP/1.1 client for loopback health checks: one request per connection.

use crate::error::StackError;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response: status and de-chunked body.
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

/// Sends `method path` to `addr` (`127.0.0.1:PORT`) with optional JSON body and headers.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    timeout: Duration,
) -> Result<Reply, StackError> {
    let fut = async {
        let mut s = TcpStream::connect(addr)
            .await
            .map_err(|e| StackError::Http(format!("connect {addr}: {e}")))?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body.unwrap_or(""));
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| StackError::Http(format!("write {addr}: {e}")))?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)
            .await
            .map_err(|e| StackError::Http(format!("read {addr}: {e}")))?;
        parse(&raw)
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| StackError::Http(format!("{method} {addr}{path}: timed out")))?
}

/// `GET path`.
pub async fn get(addr: &str, path: &str) -> Result<Reply, StackError> {
    request(addr, "GET", path, &[], None, Duration::from_secs(5)).await
}

fn parse(raw: &[u8]) -> Result<Reply, StackError> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| StackError::Http("no response header".into()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| StackError::Http(format!("bad status line in {head:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        b = &b[eol + 2..];
        if size == 0 || b.len() < size {
            break;
        }
        out.extend_from_slice(&b[..size]);
        b = b.get(size + 2..).unwrap_or(&[]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chunked_and_plain_bodies() {
        let r = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcde"[..]));
        let r = parse(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nX-A: b\r\n\r\nno").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"no"[..]));
        assert_eq!(r.header("x-a"), Some("b"));
        assert!(parse(b"garbage").is_err());
    }
}
