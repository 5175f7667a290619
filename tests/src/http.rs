//! The e2e tests' HTTP client, blocking (the tests are plain threads): one request per
//! connection, full or streamed body.
//!
//! [`request`], [`get`], [`post_json`], [`post_sse`] and [`first_ndjson_line`] run the
//! workspace's client ([`warmpath_http`]) on a current-thread runtime per call. [`raw`]
//! and [`read_response`] stay a raw-socket reader on purpose: the tests that use them send
//! bytes no HTTP client would (smuggling, malformed heads, partial requests held open,
//! connections counted against a limit) and read what comes back on that same socket.

use anyhow::{anyhow, bail, Context, Result};
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use warmpath_http::http::header::CONNECTION;
use warmpath_http::http::{HeaderMap, HeaderName, HeaderValue, Method};
use warmpath_http::{Addr, Header};

/// A complete response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// De-chunked body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// First header named `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Body as JSON.
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "not JSON (status {}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends raw request bytes and reads one response (until EOF if needed).
pub fn raw(addr: &str, request: &[u8], timeout: Duration) -> Result<HttpResponse> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(request)?;
    let mut r = BufReader::new(s);
    read_response(&mut r)
}

/// Runs `f` to its end on a current-thread runtime of its own.
fn block_on<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(f)
}

/// Where `addr` (`host:port`) is, and `headers` after a `Connection: close` (every
/// exchange here is the connection's only one).
fn target(addr: &str, headers: &[(&str, &str)]) -> Result<(Addr, Vec<Header>)> {
    let to: Addr = addr.parse()?;
    let mut extra = vec![(CONNECTION, HeaderValue::from_static("close"))];
    for (k, v) in headers {
        extra.push((
            HeaderName::from_bytes(k.as_bytes()).with_context(|| format!("header {k:?}"))?,
            HeaderValue::from_bytes(v.as_bytes()).with_context(|| format!("header {k}: {v:?}"))?,
        ));
    }
    Ok((to, extra))
}

/// The headers as (lower-case name, value) pairs.
fn pairs(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| {
            let v = String::from_utf8_lossy(v.as_bytes()).trim().to_string();
            (k.as_str().to_string(), v)
        })
        .collect()
}

/// `method path` with optional JSON body and extra headers (within 120 s).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<HttpResponse> {
    let (to, extra) = target(addr, headers)?;
    let method = Method::from_bytes(method.as_bytes())?;
    let timeout = Duration::from_secs(120);
    let r = block_on(async {
        let r = warmpath_http::fetch(&to, method, path, body, &extra, timeout).await;
        r.with_context(|| format!("{addr}{path}"))
    })?;
    Ok(HttpResponse {
        status: r.status,
        headers: pairs(&r.headers),
        body: r.body,
    })
}

/// POST JSON.
pub fn post_json(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Result<HttpResponse> {
    request(
        addr,
        "POST",
        path,
        headers,
        Some(body.to_string().as_bytes()),
    )
}

/// GET.
pub fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> Result<HttpResponse> {
    request(addr, "GET", path, headers, None)
}

fn read_head(r: &mut impl BufRead) -> Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    if line.is_empty() {
        bail!("connection closed before a response");
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow!("bad status line {line:?}"))?
        .parse()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok((status, headers))
}

/// Reads one response from a connection the caller wrote a request on.
pub fn read_response(r: &mut BufReader<TcpStream>) -> Result<HttpResponse> {
    let (status, headers) = read_head(r)?;
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let mut body = Vec::new();
    if chunked {
        let mut c = ChunkReader {
            inner: r,
            left: 0,
            done: false,
        };
        c.read_to_end(&mut body)?;
    } else if let Some(n) = len {
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

struct ChunkReader<R: BufRead> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for ChunkReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            self.inner.read_line(&mut line)?;
            if line.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "chunked body truncated",
                ));
            }
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            if size == 0 {
                let mut end = String::new();
                self.inner.read_line(&mut end)?;
                self.done = true;
                return Ok(0);
            }
            self.left = size;
        }
        let cap = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..cap])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "chunk truncated",
            ));
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// A streamed SSE response: status, headers, and the `data:` payloads in order.
#[derive(Debug)]
pub struct Sse {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// Each event's data.
    pub events: Vec<String>,
    /// Whether the body ended cleanly (terminal chunk).
    pub clean_end: bool,
    /// The body as it came (comment lines included).
    pub raw: String,
}

impl Sse {
    /// First header named `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// POSTs a streaming request and collects SSE events until the stream ends (or nothing
/// arrives for 60 s: not a clean end).
pub fn post_sse(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Result<Sse> {
    post_sse_watched(addr, path, headers, body, &|_| {})
}

/// As [`post_sse`], calling `on_chunk` with each body chunk as it arrives (a test that
/// acts mid-stream waits on it).
pub fn post_sse_watched(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
    on_chunk: &dyn Fn(&[u8]),
) -> Result<Sse> {
    let (to, extra) = target(addr, headers)?;
    let body = body.to_string();
    let quiet = Duration::from_secs(60);
    let (status, headers, raw, clean_end) = block_on(async {
        let open = warmpath_http::open_with(&to, Method::POST, path, Some(body.as_bytes()), &extra);
        let (status, mut stream) = tokio::time::timeout(quiet, open)
            .await
            .map_err(|_| anyhow!("{addr}{path}: no response head in {quiet:?}"))??;
        let headers = pairs(stream.headers());
        let mut raw = Vec::new();
        let clean_end = loop {
            match tokio::time::timeout(quiet, stream.next_chunk()).await {
                Ok(Ok(Some(c))) => {
                    on_chunk(&c);
                    raw.extend_from_slice(&c);
                }
                Ok(Ok(None)) => break true,
                Ok(Err(_)) | Err(_) => break false,
            }
        };
        Ok((status, headers, raw, clean_end))
    })?;
    let text = String::from_utf8_lossy(&raw);
    let events = text
        .split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect();
    Ok(Sse {
        status,
        headers,
        events,
        clean_end,
        raw: text.into_owned(),
    })
}

/// Opens a GET whose body is newline-delimited (e.g. the KV event stream) and returns the
/// first non-empty line of the body (with its newline), within 10 s.
pub fn first_ndjson_line(addr: &str, path: &str) -> Result<String> {
    let to: Addr = addr.parse()?;
    block_on(async {
        let find = async {
            let (status, mut stream) = warmpath_http::open(&to, Method::GET, path, None).await?;
            if status != 200 {
                bail!("status {status}");
            }
            let mut buf = Vec::new();
            loop {
                let chunk = stream.next_chunk().await?;
                if let Some(c) = &chunk {
                    buf.extend_from_slice(c);
                }
                let ended = chunk.is_none();
                while let Some(n) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=n).collect();
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        return Ok(String::from_utf8_lossy(&line).into_owned());
                    }
                }
                if ended {
                    if buf.iter().all(u8::is_ascii_whitespace) {
                        bail!("stream ended without a line");
                    }
                    return Ok(String::from_utf8_lossy(&buf).into_owned());
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), find)
            .await
            .map_err(|_| anyhow!("{addr}{path}: no line in 10 s"))?
    })
}

/// Serves each connection `l` accepts on its own thread with `serve` until the flag
/// `stop(shared)` is set (checked at each accept: a test double's accept loop).
pub fn accept_loop<S: Send + Sync + 'static>(
    l: std::net::TcpListener,
    shared: std::sync::Arc<S>,
    stop: fn(&S) -> &std::sync::atomic::AtomicBool,
    serve: fn(TcpStream, &S) -> std::io::Result<()>,
) {
    std::thread::spawn(move || {
        for conn in l.incoming() {
            if stop(&shared).load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            let Ok(conn) = conn else { continue };
            let s = shared.clone();
            std::thread::spawn(move || {
                let _ = serve(conn, &s);
            });
        }
    });
}
