//! A vLLM-style server for the engine tests: `POST /v1/completions` and
//! `/v1/chat/completions` over text units (`warmpath_core::text_units`, what a
//! `tokenizer: none` pool hashes), a prefix cache keyed as vLLM keys its blocks
//! (`hash((parent, tokens, extra_keys))`, the adapter's name on every block of an adapter
//! request and the request's `cache_salt` on the first: vLLM's
//! `generate_block_hash_extra_keys`), `usage.prompt_tokens_details.cached_tokens` from that
//! cache, and a `BlockStored` event (msgpack, vLLM's array encoding: `lora_id`, `medium`,
//! `lora_name`, `extra_keys`) for exactly the blocks each request stores, published on a
//! ZeroMQ PUB socket as `(topic, seq, payload)`.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use warmpath_core::text_units;
use zeromq::{PubSocket, Socket, SocketSend, ZmqMessage};

/// Tokens per block, as vLLM's `--block-size 16`.
pub const BLOCK: usize = 16;

/// One generation request as the mock saw it.
#[derive(Clone, Debug)]
pub struct Served {
    /// The body's `model`.
    pub model: String,
    /// The body's `cache_salt`, if any.
    pub salt: Option<String>,
    /// Cached tokens reported.
    pub cached: u32,
    /// Blocks it stored (and published).
    pub stored: usize,
}

struct Shared {
    base: String,
    adapters: Vec<String>,
    blocks: Mutex<HashSet<u64>>,
    served: Mutex<Vec<Served>>,
    events: Mutex<mpsc::Sender<Vec<u8>>>,
    stop: AtomicBool,
    /// Adapters its `/metrics` reports running (`vllm:lora_requests_info`), if any.
    running_adapters: Mutex<Option<Vec<String>>>,
    /// `GET /metrics` requests answered.
    scrapes: std::sync::atomic::AtomicUsize,
}

/// A running mock vLLM server.
pub struct MockVllm {
    shared: Arc<Shared>,
    /// `127.0.0.1:PORT` of its HTTP API.
    pub addr: String,
    /// Its PUB socket, `tcp://127.0.0.1:PORT`.
    pub events_endpoint: String,
}

impl MockVllm {
    /// Starts a server for `base` with LoRA adapters `adapters` on free loopback ports.
    pub fn start(base: &str, adapters: &[&str]) -> Self {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let (ep_tx, ep_rx) = mpsc::channel::<String>();
        std::thread::spawn(move || publish(rx, ep_tx));
        let events_endpoint = ep_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("PUB socket bound");
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let shared = Arc::new(Shared {
            base: base.to_string(),
            adapters: adapters.iter().map(|a| a.to_string()).collect(),
            blocks: Mutex::new(HashSet::new()),
            served: Mutex::new(Vec::new()),
            events: Mutex::new(tx),
            stop: AtomicBool::new(false),
            running_adapters: Mutex::new(None),
            scrapes: Default::default(),
        });
        crate::http::accept_loop(l, shared.clone(), |s| &s.stop, serve);
        Self {
            shared,
            addr,
            events_endpoint,
        }
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Generation requests served, in order.
    pub fn served(&self) -> Vec<Served> {
        self.shared.served.lock().expect("lock").clone()
    }

    /// Blocks in its cache.
    pub fn blocks(&self) -> usize {
        self.shared.blocks.lock().expect("lock").len()
    }

    /// Makes its `/metrics` report `adapters` as running, as vLLM does while it serves
    /// requests for them (for another gateway, say), with 4 adapter slots.
    pub fn report_running(&self, adapters: &[&str]) {
        *self.shared.running_adapters.lock().expect("lock") =
            Some(adapters.iter().map(|a| a.to_string()).collect());
    }

    /// `GET /metrics` requests answered so far.
    pub fn scrapes(&self) -> usize {
        self.shared.scrapes.load(Ordering::Acquire)
    }
}

/// A prompt of `blocks` full 16-unit blocks (64 bytes each, one block of text units),
/// seeded by `tag`.
pub fn prompt(tag: &str, blocks: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < blocks * 64 {
        s.push_str(&format!("<{tag}:{i:04}>"));
        i += 1;
    }
    s.truncate(blocks * 64);
    s
}

impl Drop for MockVllm {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(&self.addr);
    }
}

/// The publisher thread: binds the PUB socket, then sends every payload as vLLM's
/// `ZmqEventPublisher` does, numbered from 0. Ends when the server is dropped.
fn publish(rx: mpsc::Receiver<Vec<u8>>, endpoint: mpsc::Sender<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut socket = PubSocket::new();
        let bound = socket.bind("tcp://127.0.0.1:0").await.expect("bind PUB");
        let _ = endpoint.send(bound.to_string());
        let mut seq = 0u64;
        loop {
            let payload = match rx.try_recv() {
                Ok(p) => p,
                Err(mpsc::TryRecvError::Empty) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                Err(mpsc::TryRecvError::Disconnected) => return,
            };
            let frames: Vec<bytes::Bytes> = vec![
                bytes::Bytes::new(),
                bytes::Bytes::copy_from_slice(&seq.to_be_bytes()),
                payload.into(),
            ];
            let msg = ZmqMessage::try_from(frames).expect("frames");
            let _ = socket.send(msg).await;
            seq += 1;
        }
    });
}

/// Caches `tokens` as vLLM would for a request with `salt` and adapter `lora`: returns the
/// cached tokens and the event payload of the blocks stored (if any).
fn cache(
    s: &Shared,
    tokens: &[u32],
    salt: Option<&str>,
    lora: Option<&str>,
) -> (u32, usize, Option<Vec<u8>>) {
    use rmpv::Value;
    let mut blocks = s.blocks.lock().expect("lock");
    let (mut parent, mut cached, mut hit) = (0u64, 0u32, true);
    let (mut new, mut new_tokens, mut extra) = (Vec::new(), Vec::new(), Vec::new());
    let mut new_parent = Value::Nil;
    for (i, block) in tokens.chunks_exact(BLOCK).enumerate() {
        let keys: Vec<&str> = lora.into_iter().chain(salt.filter(|_| i == 0)).collect();
        let mut h = DefaultHasher::new();
        (parent, block, &keys).hash(&mut h);
        let hash = h.finish() >> 1;
        if hit && blocks.contains(&hash) {
            cached += BLOCK as u32;
        } else {
            if hit && i > 0 {
                new_parent = Value::from(parent);
            }
            hit = false;
            blocks.insert(hash);
            new.push(Value::from(hash));
            new_tokens.extend(block.iter().map(|&t| Value::from(t)));
            extra.push(if keys.is_empty() {
                Value::Nil
            } else {
                Value::Array(keys.iter().map(|&k| Value::from(k)).collect())
            });
        }
        parent = hash;
    }
    if new.is_empty() {
        return (cached, 0, None);
    }
    let stored = new.len();
    let event = Value::Array(vec![
        Value::from("BlockStored"),
        Value::Array(new),
        new_parent,
        Value::Array(new_tokens),
        Value::from(BLOCK as u32),
        lora.map_or(Value::Nil, |_| Value::from(1)),
        Value::from("GPU"),
        lora.map_or(Value::Nil, Value::from),
        Value::Array(extra),
    ]);
    let batch = Value::Array(vec![Value::from(1.5), Value::Array(vec![event])]);
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &batch).expect("encode");
    (cached, stored, Some(out))
}

fn tokens_of(req: &serde_json::Value) -> Vec<u32> {
    let bytes = match req.get("messages").and_then(|m| m.as_array()) {
        Some(msgs) => text_units::render_chat(msgs.iter().map(|m| {
            (
                m.get("role").and_then(|r| r.as_str()).unwrap_or_default(),
                m.get("content")
                    .and_then(|c| c.as_str())
                    .unwrap_or_default(),
            )
        })),
        None => req
            .get("prompt")
            .and_then(|p| p.as_str())
            .unwrap_or_default()
            .as_bytes()
            .to_vec(),
    };
    text_units::pack(&bytes).into_iter().map(|t| t.0).collect()
}

fn serve(conn: TcpStream, s: &Shared) -> std::io::Result<()> {
    let mut r = BufReader::new(conn.try_clone()?);
    let mut w = conn;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        match (method.as_str(), path.as_str()) {
            ("GET", "/v1/models") => {
                let data: Vec<serde_json::Value> = std::iter::once(&s.base)
                    .chain(&s.adapters)
                    .map(|m| serde_json::json!({"id": m, "object": "model", "owned_by": "vllm"}))
                    .collect();
                let j = serde_json::json!({"object": "list", "data": data});
                write_json(&mut w, 200, &j.to_string())?;
            }
            ("GET", "/health") => write_json(&mut w, 200, "{}")?,
            ("GET", "/metrics") => {
                let mut page = String::from(
                    "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0.0\n\
                     vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n",
                );
                if let Some(a) = &*s.running_adapters.lock().expect("lock") {
                    page.push_str(&format!(
                        "vllm:lora_requests_info{{max_lora=\"4\",running_lora_adapters=\"{}\",\
                         waiting_lora_adapters=\"\"}} 1.7e9\n",
                        a.join(",")
                    ));
                }
                s.scrapes.fetch_add(1, Ordering::AcqRel);
                write!(
                    w,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{page}",
                    page.len()
                )?;
                w.flush()?;
            }
            ("POST", "/v1/chat/completions") | ("POST", "/v1/completions") => {
                let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let model = req["model"].as_str().unwrap_or_default().to_string();
                let salt = req["cache_salt"].as_str().map(str::to_string);
                let lora = s.adapters.iter().find(|a| **a == model).map(String::as_str);
                let tokens = tokens_of(&req);
                let (cached, stored, event) = cache(s, &tokens, salt.as_deref(), lora);
                if let Some(p) = event {
                    let _ = s.events.lock().expect("lock").send(p);
                }
                s.served.lock().expect("lock").push(Served {
                    model: model.clone(),
                    salt,
                    cached,
                    stored,
                });
                let chat = path.ends_with("chat/completions");
                let choice = if chat {
                    serde_json::json!({"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"})
                } else {
                    serde_json::json!({"index": 0, "text": "ok", "finish_reason": "length"})
                };
                let j = serde_json::json!({
                    "id": "cmpl-mock", "object": if chat { "chat.completion" } else { "text_completion" },
                    "created": 1700000001, "model": model, "choices": [choice],
                    "usage": {"prompt_tokens": tokens.len(), "completion_tokens": 1,
                              "total_tokens": tokens.len() + 1,
                              "prompt_tokens_details": {"cached_tokens": cached}}});
                write_json(&mut w, 200, &j.to_string())?;
            }
            _ => write_json(&mut w, 404, r#"{"error":{"message":"not found"}}"#)?,
        }
    }
}

fn write_json(w: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = if status == 200 { "OK" } else { "Error" };
    write!(
        w,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    w.flush()
}
