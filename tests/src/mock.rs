//! A mock replica for fault tests only (crash mid-stream, hang, error statuses, an endless
//! stream). It speaks the replica's control endpoints with the byte-level tokenizer
//! fixture; every response closes its connection. The gateway's health probe (a one-token
//! `ping`) is answered normally in the status modes: a replica that fails real traffic but
//! passes the probe.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use warmpath_core::{BlockSize, CheckpointId, KvStreamMessage};
use warmpath_protocol::replica_api::{ReplicaInfo, ReplicaLoad, HEADER_CACHE_SALT};

/// How the mock answers generation requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Normal answers (stream: 3 chunks, usage, `[DONE]`).
    Ok,
    /// Read the request, never answer.
    Hang,
    /// Stream: send the header and two chunks, then drop the connection.
    CrashMidStream,
    /// Answer with this status (no `Retry-After`).
    Status(u16),
    /// Answer with this status and `Retry-After: SECONDS`.
    StatusRetryAfter(u16, u64),
    /// Stream: send content chunks of 16 KiB until the connection fails (the gateway
    /// closed it), then count the stream as aborted. A request without `stream` gets the
    /// normal answer.
    Endless,
    /// Stream one chunk per requested `max_tokens` (3 without), one every `delay_ms`, then
    /// usage and `[DONE]` (a non-streaming request is answered as in `Ok` after the same
    /// total delay).
    SlowStream {
        /// Pause before each chunk.
        delay_ms: u64,
    },
}

struct Shared {
    mode: Mutex<Mode>,
    generations: AtomicUsize,
    aborted: AtomicUsize,
    salts: Mutex<Vec<String>>,
    bodies: Mutex<Vec<Vec<u8>>>,
    raw: Mutex<Vec<Vec<u8>>>,
    stop: AtomicBool,
}

/// A running mock replica.
pub struct MockReplica {
    shared: Arc<Shared>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl MockReplica {
    /// Starts a mock serving model `mock`.
    pub fn start(mode: Mode) -> Self {
        Self::start_on(mode, "127.0.0.1:0").expect("bind")
    }

    /// As [`MockReplica::start`], listening on `bind` (e.g. `127.0.0.2:PORT`: loopback
    /// addresses that share a port, as pods behind one Service do).
    pub fn start_on(mode: Mode, bind: &str) -> std::io::Result<Self> {
        let l = TcpListener::bind(bind)?;
        let addr = l.local_addr()?.to_string();
        let shared = Arc::new(Shared {
            mode: Mutex::new(mode),
            generations: AtomicUsize::new(0),
            aborted: AtomicUsize::new(0),
            salts: Mutex::new(Vec::new()),
            bodies: Mutex::new(Vec::new()),
            raw: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        crate::http::accept_loop(l, shared.clone(), |s| &s.stop, serve);
        Ok(Self { shared, addr })
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Changes the mode.
    pub fn set_mode(&self, m: Mode) {
        *self.shared.mode.lock().expect("lock") = m;
    }

    /// Generation requests received.
    pub fn generations(&self) -> usize {
        self.shared.generations.load(Ordering::Acquire)
    }

    /// Endless streams that ended because the connection failed (the gateway closed it).
    pub fn aborted(&self) -> usize {
        self.shared.aborted.load(Ordering::Acquire)
    }

    /// Cache salts seen on generation requests.
    pub fn salts(&self) -> Vec<String> {
        self.shared.salts.lock().expect("lock").clone()
    }

    /// The bytes of each generation request as they arrived: head, the body as read by its
    /// `Content-Length`, and whatever else had arrived on the connection by then.
    pub fn raw_requests(&self) -> Vec<Vec<u8>> {
        self.shared.raw.lock().expect("lock").clone()
    }

    /// Bodies of the generation requests, as read by their `Content-Length` (the mock reads
    /// no other framing: a chunked body reads as empty).
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.shared.bodies.lock().expect("lock").clone()
    }
}

impl Drop for MockReplica {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(&self.addr);
    }
}

fn info() -> ReplicaInfo {
    ReplicaInfo {
        model: "mock".into(),
        checkpoint: CheckpointId::new("mock@1"),
        block_size: BlockSize(16),
        hash_scheme: warmpath_core::SCHEME_VERSION,
        capacity_blocks: 4096,
        max_context: 8192,
        region: None,
        device: "cpu".into(),
        role: Default::default(),
        kv_store_region: None,
    }
}

fn write_json(s: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    write_json_with(s, status, "", body)
}

/// A JSON answer with `extra` header lines (each ending in CRLF).
fn write_json_with(s: &mut TcpStream, status: u16, extra: &str, body: &str) -> std::io::Result<()> {
    write!(
        s,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
}

fn chunk(s: &mut TcpStream, data: &str) -> std::io::Result<()> {
    write!(s, "{:x}\r\n{data}\r\n", data.len())?;
    s.flush()
}

fn serve(mut s: TcpStream, sh: &Shared) -> std::io::Result<()> {
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    let mut salt = None;
    let mut raw = line.clone().into_bytes();
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        raw.extend_from_slice(h.as_bytes());
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
            if k.eq_ignore_ascii_case(HEADER_CACHE_SALT) {
                salt = Some(v.trim().to_string());
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    raw.extend_from_slice(&body);
    raw.extend_from_slice(r.buffer());
    let path_only = path.split('?').next().unwrap_or("");
    match (method.as_str(), path_only) {
        ("GET", "/v1/replica/info") => write_json(&mut s, 200, &serde_json::to_string(&info())?),
        ("GET", "/v1/replica/tokenizer") => write_json(
            &mut s,
            200,
            &serde_json::to_string(&warmpath_text::bytelevel::chatml_bpe_spec())?,
        ),
        ("GET", "/v1/replica/load") => write_json(
            &mut s,
            200,
            &serde_json::to_string(&ReplicaLoad::default())?,
        ),
        ("GET", "/v1/kv/events") => {
            write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")?;
            let snap = KvStreamMessage::Snapshot {
                epoch: warmpath_core::Epoch(1),
                seq: warmpath_core::SeqNo(0),
                hashes: vec![],
            };
            chunk(&mut s, &format!("{}\n", serde_json::to_string(&snap)?))?;
            while !sh.stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(())
        }
        ("POST", "/v1/completions" | "/v1/chat/completions") => {
            let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let is_probe = req["max_tokens"] == 1 && req["prompt"] == "ping";
            if !is_probe {
                sh.generations.fetch_add(1, Ordering::AcqRel);
                sh.salts
                    .lock()
                    .expect("lock")
                    .push(salt.unwrap_or_default());
                sh.bodies.lock().expect("lock").push(body.clone());
                sh.raw.lock().expect("lock").push(raw);
            }
            let mut mode = sh.mode.lock().expect("lock").clone();
            if is_probe && matches!(mode, Mode::Status(_) | Mode::StatusRetryAfter(..)) {
                mode = Mode::Ok;
            }
            if let Mode::SlowStream { delay_ms } = mode {
                let tokens = req["max_tokens"].as_u64().map_or(3, |n| n as u32);
                return slow(
                    &mut s,
                    tokens,
                    delay_ms,
                    req["stream"].as_bool().unwrap_or(false),
                );
            }
            generate(&mut s, sh, &mode, req["stream"].as_bool().unwrap_or(false))
        }
        _ => write_json(&mut s, 404, "{\"error\":{\"message\":\"not found\"}}"),
    }
}

fn generate(s: &mut TcpStream, sh: &Shared, mode: &Mode, stream: bool) -> std::io::Result<()> {
    let usage = r#"{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":0}}"#;
    match mode {
        Mode::Hang => {
            while !sh.stop.load(Ordering::Acquire) && *sh.mode.lock().expect("lock") == Mode::Hang {
                std::thread::sleep(Duration::from_millis(50));
            }
            let now = sh.mode.lock().expect("lock").clone();
            if now == Mode::Hang {
                return Ok(());
            }
            generate(s, sh, &now, stream)
        }
        Mode::Status(code) => write_json(s, *code, "{\"error\":{\"message\":\"busy\"}}"),
        Mode::StatusRetryAfter(code, secs) => write_json_with(
            s,
            *code,
            &format!("Retry-After: {secs}\r\n"),
            "{\"error\":{\"message\":\"busy\"}}",
        ),
        Mode::Endless if stream => {
            write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
            let ev = format!(
                "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
                "a".repeat(16 * 1024)
            );
            loop {
                if sh.stop.load(Ordering::Acquire) {
                    return Ok(());
                }
                if chunk(s, &ev).is_err() {
                    sh.aborted.fetch_add(1, Ordering::AcqRel);
                    return Ok(());
                }
            }
        }
        Mode::SlowStream { delay_ms } => slow(s, 3, *delay_ms, stream),
        Mode::Ok | Mode::CrashMidStream if stream => {
            write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
            let ev = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n";
            chunk(s, ev)?;
            chunk(s, ev)?;
            if *mode == Mode::CrashMidStream {
                std::thread::sleep(Duration::from_millis(100));
                return s.shutdown(std::net::Shutdown::Both);
            }
            chunk(s, ev)?;
            chunk(s, &format!("data: {{\"id\":\"x\",\"choices\":[],\"usage\":{usage}}}\n\n"))?;
            chunk(s, "data: [DONE]\n\n")?;
            write!(s, "0\r\n\r\n")
        }
        Mode::Ok | Mode::CrashMidStream | Mode::Endless => write_json(
            s,
            200,
            &format!(
                "{{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"aaa\"}},\"finish_reason\":\"length\"}}],\"usage\":{usage}}}"
            ),
        ),
    }
}

/// [`Mode::SlowStream`].
fn slow(s: &mut TcpStream, tokens: u32, delay_ms: u64, stream: bool) -> std::io::Result<()> {
    let pause = || std::thread::sleep(Duration::from_millis(delay_ms));
    if !stream {
        (0..tokens).for_each(|_| pause());
        return generate(s, &IDLE, &Mode::Ok, false);
    }
    write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
    for i in 0..tokens {
        pause();
        chunk(
            s,
            &format!("data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i} \"}}}}]}}\n\n"),
        )?;
    }
    let usage = format!(
        r#"{{"prompt_tokens":10,"completion_tokens":{tokens},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":0}}}}"#,
        10 + tokens
    );
    chunk(
        s,
        &format!("data: {{\"id\":\"x\",\"choices\":[],\"usage\":{usage}}}\n\n"),
    )?;
    chunk(s, "data: [DONE]\n\n")?;
    write!(s, "0\r\n\r\n")
}

/// Shared state for answers that need none.
static IDLE: Shared = Shared {
    mode: Mutex::new(Mode::Ok),
    generations: AtomicUsize::new(0),
    aborted: AtomicUsize::new(0),
    salts: Mutex::new(Vec::new()),
    bodies: Mutex::new(Vec::new()),
    raw: Mutex::new(Vec::new()),
    stop: AtomicBool::new(false),
};
