//! A plain OpenAI-compatible server for the engine tests: it serves only `GET /v1/models`,
//! `POST /v1/chat/completions` and `POST /v1/completions` (JSON or SSE), and answers
//! anything else 404, the least a third-party upstream promises. Its answers are a
//! deterministic function of the request body (an echo of the prompt with an id hashed
//! from it), carrying fields the gateway has no reason to know, so a test can compare what
//! came through the gateway with what the server sends directly, byte for byte. A chat
//! that offers `tools` is answered with a call of the first one, its arguments
//! `{"echo": <the answer's text>}` (streamed in two pieces), as an engine with tool
//! calling answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct Shared {
    model: String,
    generations: AtomicUsize,
    other_paths: Mutex<Vec<String>>,
    stop: AtomicBool,
    /// Generation requests with a body of at least this many bytes are refused with 503
    /// before any byte of an answer (the gateway's small health probes still pass).
    refuse_from: AtomicUsize,
    /// Pause before answering a generation request, ms.
    delay_ms: AtomicU64,
    /// Body length of each generation request.
    body_lens: Mutex<Vec<usize>>,
}

/// A running plain OpenAI-compatible server.
pub struct OpenAiUpstream {
    shared: Arc<Shared>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl OpenAiUpstream {
    /// Starts a server for `model` on a free loopback port.
    pub fn start(model: &str) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let shared = Arc::new(Shared {
            model: model.to_string(),
            generations: AtomicUsize::new(0),
            other_paths: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            refuse_from: AtomicUsize::new(usize::MAX),
            delay_ms: AtomicU64::new(0),
            body_lens: Mutex::new(Vec::new()),
        });
        crate::http::accept_loop(l, shared.clone(), |s| &s.stop, serve);
        Self { shared, addr }
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Generation requests answered (the gateway's health probes included).
    pub fn generations(&self) -> usize {
        self.shared.generations.load(Ordering::Acquire)
    }

    /// Refuses (503, before any answer byte) every generation request whose body has at
    /// least `bytes` bytes; `usize::MAX`: none.
    pub fn refuse_from(&self, bytes: usize) {
        self.shared.refuse_from.store(bytes, Ordering::Release);
    }

    /// Waits `ms` before answering each generation request.
    pub fn set_delay_ms(&self, ms: u64) {
        self.shared.delay_ms.store(ms, Ordering::Release);
    }

    /// The body length of each generation request received, in order.
    pub fn body_lens(&self) -> Vec<usize> {
        self.shared.body_lens.lock().expect("lock").clone()
    }

    /// Requests for paths the server does not serve, as `METHOD PATH`.
    pub fn other_paths(&self) -> Vec<String> {
        self.shared.other_paths.lock().expect("lock").clone()
    }
}

impl Drop for OpenAiUpstream {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(&self.addr);
    }
}

/// The answer for one generation request body: `(content, id)`.
fn answer(body: &serde_json::Value) -> (String, String) {
    let prompt = match body.get("messages").and_then(|m| m.as_array()) {
        Some(msgs) => msgs
            .iter()
            .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
            .collect::<Vec<_>>()
            .join("|"),
        None => body
            .get("prompt")
            .and_then(|p| p.as_str())
            .unwrap_or_default()
            .to_string(),
    };
    let digest = xxhash_rust::xxh3::xxh3_64(prompt.as_bytes());
    let tail: String = prompt
        .chars()
        .rev()
        .take(24)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (format!("echo {tail}"), format!("plain-{digest:016x}"))
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
                let j = serde_json::json!({"object": "list", "data": [
                    {"id": s.model, "object": "model", "created": 1700000000, "owned_by": "plain"}
                ]});
                write_json(&mut w, 200, &j.to_string())?;
            }
            ("POST", "/v1/chat/completions") | ("POST", "/v1/completions") => {
                s.generations.fetch_add(1, Ordering::AcqRel);
                s.body_lens.lock().expect("lock").push(body.len());
                if body.len() >= s.refuse_from.load(Ordering::Acquire) {
                    let j = r#"{"error":{"message":"overloaded","type":"server_error"}}"#;
                    write_json(&mut w, 503, j)?;
                    continue;
                }
                std::thread::sleep(std::time::Duration::from_millis(
                    s.delay_ms.load(Ordering::Acquire),
                ));
                let chat = path.ends_with("chat/completions");
                let req: serde_json::Value = match serde_json::from_slice(&body) {
                    Ok(v) => v,
                    Err(e) => {
                        let j = serde_json::json!({"error": {"message": e.to_string(), "type": "invalid_request_error"}});
                        write_json(&mut w, 400, &j.to_string())?;
                        continue;
                    }
                };
                let (content, id) = answer(&req);
                let tool = req
                    .pointer("/tools/0/function/name")
                    .and_then(|n| n.as_str())
                    .filter(|_| chat);
                if req.get("stream").and_then(|v| v.as_bool()) == Some(true) {
                    if let Some(tool) = tool {
                        return write_tool_stream(&mut w, &s.model, tool, &content, &id);
                    }
                    return write_stream(&mut w, &s.model, chat, &content, &id);
                }
                let choice = if let Some(tool) = tool {
                    let args = serde_json::json!({"echo": content}).to_string();
                    serde_json::json!({"index": 0, "message": {"role": "assistant", "content": null,
                        "tool_calls": [{"id": format!("call_{id}"), "type": "function",
                            "function": {"name": tool, "arguments": args}}]},
                        "finish_reason": "tool_calls", "logprobs": null})
                } else if chat {
                    serde_json::json!({"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", "logprobs": null})
                } else {
                    serde_json::json!({"index": 0, "text": content, "finish_reason": "stop", "logprobs": null})
                };
                let j = serde_json::json!({
                    "id": id, "object": if chat { "chat.completion" } else { "text_completion" },
                    "created": 1700000001, "model": s.model, "system_fingerprint": "fp_plain",
                    "choices": [choice],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
                    "plain_extension": {"note": "unknown to the gateway", "n": [1, 2, 3]}
                });
                write_json(&mut w, 200, &j.to_string())?;
            }
            _ => {
                s.other_paths
                    .lock()
                    .expect("lock")
                    .push(format!("{method} {path}"));
                write_json(
                    &mut w,
                    404,
                    r#"{"error":{"message":"not found","type":"not_found"}}"#,
                )?;
            }
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

/// An SSE answer: the content in two chunks, a usage chunk, `[DONE]`; then the connection
/// closes (no length framing).
fn write_stream(
    w: &mut TcpStream,
    model: &str,
    chat: bool,
    content: &str,
    id: &str,
) -> std::io::Result<()> {
    write!(
        w,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    )?;
    let mut mid = content.len() / 2;
    while !content.is_char_boundary(mid) {
        mid += 1;
    }
    let (a, b) = content.split_at(mid);
    for piece in [a, b] {
        let choice = if chat {
            serde_json::json!({"index": 0, "delta": {"content": piece}, "finish_reason": null})
        } else {
            serde_json::json!({"index": 0, "text": piece, "finish_reason": null})
        };
        let j = serde_json::json!({"id": id, "object": if chat { "chat.completion.chunk" } else { "text_completion" },
            "created": 1700000001, "model": model, "choices": [choice]});
        write!(w, "data: {j}\n\n")?;
        w.flush()?;
    }
    let j = serde_json::json!({"id": id, "object": "chat.completion.chunk", "created": 1700000001, "model": model,
        "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}});
    write!(w, "data: {j}\n\ndata: [DONE]\n\n")?;
    w.flush()
}

/// A streamed tool call of `tool`: its id and name, its arguments in two pieces, the
/// `tool_calls` finish, a usage chunk, `[DONE]`; then the connection closes.
fn write_tool_stream(
    w: &mut TcpStream,
    model: &str,
    tool: &str,
    content: &str,
    id: &str,
) -> std::io::Result<()> {
    write!(
        w,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    )?;
    let args = serde_json::json!({"echo": content}).to_string();
    let (a, b) = args.split_at(args.len() / 2);
    let call = |delta: serde_json::Value, finish: Option<&str>| {
        serde_json::json!({"id": id, "object": "chat.completion.chunk", "created": 1700000001,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let first = serde_json::json!({"role": "assistant", "tool_calls": [{"index": 0,
        "id": format!("call_{id}"), "type": "function", "function": {"name": tool, "arguments": ""}}]});
    let piece =
        |p: &str| serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]});
    for j in [
        call(first, None),
        call(piece(a), None),
        call(piece(b), Some("tool_calls")),
    ] {
        write!(w, "data: {j}\n\n")?;
        w.flush()?;
    }
    let j = serde_json::json!({"id": id, "object": "chat.completion.chunk", "created": 1700000001, "model": model,
        "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}});
    write!(w, "data: {j}\n\ndata: [DONE]\n\n")?;
    w.flush()
}
