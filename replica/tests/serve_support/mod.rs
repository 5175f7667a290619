//! Shared helpers for the serving tests: an in-process server and a minimal HTTP/1.1
//! client over a raw socket (so tests can also drop a connection mid-stream).
#![allow(dead_code, unreachable_pub)]

use replica::server::{start, ServeArgs, ServerHandle};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Starts a server for `model` with `tweak` applied to its args.
pub async fn server(model: &str, tweak: impl FnOnce(&mut ServeArgs)) -> ServerHandle {
    let mut args = ServeArgs::for_model(model);
    tweak(&mut args);
    start(args).await.expect("server starts")
}

/// A response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// `data:` payloads of an SSE body.
    pub fn sse_data(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }
}

fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

type Head = (u16, Vec<(String, String)>, usize);

fn split_head(raw: &[u8]) -> Option<Head> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Some((status, headers, end + 4))
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..nl]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = nl + 2;
        let end = (start + size).min(b.len());
        out.extend_from_slice(&b[start..end]);
        b = &b[(end + 2).min(b.len())..];
    }
    out
}

/// Sends a request and reads the whole response.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&request_bytes(method, path, headers, body))
        .await
        .unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(600), s.read_to_end(&mut raw))
        .await
        .expect("response within the timeout")
        .unwrap();
    let (status, headers, off) = split_head(&raw).expect("a response head");
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(&raw[off..])
    } else {
        raw[off..].to_vec()
    };
    Resp {
        status,
        headers,
        body,
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Resp {
    send(addr, "GET", path, &[], b"").await
}

pub async fn post_json(addr: SocketAddr, path: &str, body: &Value) -> Resp {
    send(addr, "POST", path, &[], body.to_string().as_bytes()).await
}

pub async fn post_json_salted(addr: SocketAddr, path: &str, salt: &str, body: &Value) -> Resp {
    send(
        addr,
        "POST",
        path,
        &[("x-warmpath-cache-salt", salt)],
        body.to_string().as_bytes(),
    )
    .await
}

/// An open response whose body is read incrementally.
pub struct Open {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

impl Open {
    /// Reads until `needle` appears in the raw bytes (or the timeout passes).
    pub async fn read_until(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut chunk = [0u8; 4096];
        loop {
            if String::from_utf8_lossy(&self.buf).contains(needle) {
                return true;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.stream.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return false,
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Body so far, de-chunked.
    pub fn body(&self) -> Vec<u8> {
        match split_head(&self.buf) {
            Some((_, _, off)) => dechunk(&self.buf[off..]),
            None => Vec::new(),
        }
    }
}

/// Sends a request and returns the open connection without reading.
pub async fn open(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Open {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&request_bytes(method, path, headers, body))
        .await
        .unwrap();
    Open {
        stream: s,
        buf: Vec::new(),
    }
}

/// Polls `f` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
