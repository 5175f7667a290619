//! A blocking HTTP/1.1 client for tests: one request per connection, full or streamed body.

use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

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

/// `method path` with optional JSON body and extra headers.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<HttpResponse> {
    raw(
        addr,
        &build(addr, method, path, headers, body),
        Duration::from_secs(120),
    )
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

fn build(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
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
    let mut out = req.into_bytes();
    if let Some(b) = body {
        out.extend_from_slice(b);
    }
    out
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

/// POSTs a streaming request and collects SSE events until the stream ends.
pub fn post_sse(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Result<Sse> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.write_all(&build(
        addr,
        "POST",
        path,
        headers,
        Some(body.to_string().as_bytes()),
    ))?;
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r)?;
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let mut raw = Vec::new();
    let clean_end = if chunked {
        let mut c = ChunkReader {
            inner: &mut r,
            left: 0,
            done: false,
        };
        c.read_to_end(&mut raw).is_ok()
    } else {
        r.read_to_end(&mut raw).is_ok()
    };
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
    })
}

/// Opens a GET whose body is newline-delimited (e.g. the KV event stream) and returns the
/// first non-empty line of the de-chunked body.
pub fn first_ndjson_line(addr: &str, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r)?;
    if status != 200 {
        bail!("status {status}");
    }
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let mut body: Box<dyn BufRead> = if chunked {
        Box::new(BufReader::new(ChunkReader {
            inner: r,
            left: 0,
            done: false,
        }))
    } else {
        Box::new(r)
    };
    loop {
        let mut line = String::new();
        if body.read_line(&mut line)? == 0 {
            bail!("stream ended without a line");
        }
        if !line.trim().is_empty() {
            return Ok(line);
        }
    }
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
