//! A small HTTP/1.1 client for the control plane (replica info, load, tokenizer, KV event
//! stream, health probes). One request per connection; chunked and length-delimited bodies.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    /// Connect, read or write failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Deadline passed.
    #[error("timed out")]
    Timeout,
    /// The response was not valid HTTP.
    #[error("bad response: {0}")]
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
    /// Body bytes (de-chunked).
    pub body: Vec<u8>,
}

/// An open response whose body is read incrementally.
pub struct BodyStream {
    stream: TcpStream,
    buf: Vec<u8>,
    framing: Framing,
    done: bool,
}

#[derive(Clone, Copy)]
enum Framing {
    Length(usize),
    Chunked,
    Eof,
}

/// Sends one request and returns the status and the open body.
pub async fn open(
    addr: &ReplicaAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<(u16, BodyStream), ClientError> {
    let mut stream = TcpStream::connect(addr.authority()).await?;
    stream.set_nodelay(true)?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: */*\r\n",
        addr.authority()
    );
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await?;
    if let Some(b) = body {
        stream.write_all(b).await?;
    }
    let mut buf = Vec::with_capacity(4096);
    let (status, framing, consumed) = loop {
        let mut tmp = [0u8; 4096];
        let n = stream.read(&mut tmp).await?;
        if n == 0 {
            return Err(ClientError::Protocol(
                "connection closed before headers".into(),
            ));
        }
        buf.extend_from_slice(&tmp[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let status = resp.code.unwrap_or(0);
                let mut framing = Framing::Eof;
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("transfer-encoding")
                        && String::from_utf8_lossy(h.value)
                            .to_ascii_lowercase()
                            .contains("chunked")
                    {
                        framing = Framing::Chunked;
                    } else if h.name.eq_ignore_ascii_case("content-length") {
                        if let Ok(n) = String::from_utf8_lossy(h.value).trim().parse() {
                            if !matches!(framing, Framing::Chunked) {
                                framing = Framing::Length(n);
                            }
                        }
                    }
                }
                break (status, framing, len);
            }
            Ok(httparse::Status::Partial) if buf.len() < 64 * 1024 => continue,
            Ok(httparse::Status::Partial) => {
                return Err(ClientError::Protocol("header too large".into()))
            }
            Err(e) => return Err(ClientError::Protocol(e.to_string())),
        }
    };
    buf.drain(..consumed);
    let done = matches!(framing, Framing::Length(0));
    Ok((
        status,
        BodyStream {
            stream,
            buf,
            framing,
            done,
        },
    ))
}

impl BodyStream {
    async fn fill(&mut self) -> Result<bool, ClientError> {
        let mut tmp = [0u8; 8192];
        let n = self.stream.read(&mut tmp).await?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n > 0)
    }

    /// The next piece of body, or `None` at the end.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, ClientError> {
        if self.done {
            return Ok(None);
        }
        match self.framing {
            Framing::Length(left) => {
                if self.buf.is_empty() && !self.fill().await? {
                    return Err(ClientError::Protocol("body truncated".into()));
                }
                let take = self.buf.len().min(left);
                let out: Vec<u8> = self.buf.drain(..take).collect();
                self.framing = Framing::Length(left - take);
                self.done = left == take;
                Ok(Some(out))
            }
            Framing::Eof => {
                if self.buf.is_empty() && !self.fill().await? {
                    self.done = true;
                    return Ok(None);
                }
                Ok(Some(std::mem::take(&mut self.buf)))
            }
            Framing::Chunked => loop {
                if let Some(pos) = find_crlf(&self.buf) {
                    let line = String::from_utf8_lossy(&self.buf[..pos]).to_string();
                    let size_str = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size_str, 16).map_err(|_| {
                        ClientError::Protocol(format!("bad chunk size {size_str:?}"))
                    })?;
                    if size == 0 {
                        self.done = true;
                        return Ok(None);
                    }
                    if self.buf.len() >= pos + 2 + size + 2 {
                        let out = self.buf[pos + 2..pos + 2 + size].to_vec();
                        self.buf.drain(..pos + 2 + size + 2);
                        return Ok(Some(out));
                    }
                }
                if !self.fill().await? {
                    return Err(ClientError::Protocol("chunked body truncated".into()));
                }
            },
        }
    }

    /// Reads the rest of the body.
    pub async fn read_all(mut self, limit: usize) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        while let Some(c) = self.next_chunk().await? {
            out.extend_from_slice(&c);
            if out.len() > limit {
                return Err(ClientError::Protocol("body too large".into()));
            }
        }
        Ok(out)
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// One request with a deadline; the whole body is returned. Non-2xx is an error.
pub async fn request(
    addr: &ReplicaAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    let fut = async {
        let (status, stream) = open(addr, method, path, body).await?;
        let body = stream.read_all(256 * 1024 * 1024).await?;
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

/// `GET path` parsed as JSON.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    addr: &ReplicaAddr,
    path: &str,
    timeout: Duration,
) -> Result<T, ClientError> {
    let resp = request(addr, "GET", path, None, timeout).await?;
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
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

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
    async fn reads_chunked_bodies() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await.unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .await
                .unwrap();
        });
        let addr = ReplicaAddr {
            host: "127.0.0.1".into(),
            port,
        };
        let r = request(&addr, "GET", "/", None, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"abcde");
    }
}
