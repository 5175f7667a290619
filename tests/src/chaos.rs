//! A steady mixed load for the fleet's chaos test: client threads per tenant and gateway
//! send chats without pause between steps, and every request is recorded (when it was
//! sent, through which gateway, its status, the tokens its usage reports, whether it was
//! answered cleanly), so the test can check each step's admissions against the bound of
//! the fleet's state in that step, and that no admitted request was lost.

use crate::fixtures::chat;
use crate::http::{post_json, post_sse};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One tenant's clients: `threads` threads per gateway.
#[derive(Clone)]
pub struct Clients {
    /// The tenant's id (for the records).
    pub tenant: &'static str,
    /// The API key they send.
    pub key: String,
    /// Streaming requests with `include_usage` (their tokens are counted).
    pub stream: bool,
    /// Pause after each request.
    pub pause: Duration,
    /// `max_tokens` of each request.
    pub max_tokens: u32,
    /// Client threads per gateway.
    pub threads: usize,
}

/// One request as its client saw it.
#[derive(Clone, Debug)]
pub struct Record {
    /// The tenant.
    pub tenant: &'static str,
    /// Index of the gateway it went to.
    pub gateway: usize,
    /// When it was sent and when its answer ended.
    pub sent: Instant,
    /// When its answer ended.
    pub done: Instant,
    /// The HTTP status; 0 when no response came.
    pub status: u16,
    /// `usage.total_tokens` of an answered streaming request.
    pub tokens: u64,
    /// Why the answer was not clean (a transport error, a 200 without a whole answer, an
    /// error status without an OpenAI error body); `None` when clean.
    pub unclean: Option<String>,
}

/// The running load.
pub struct Load {
    records: Arc<Mutex<Vec<Record>>>,
    stop: Arc<AtomicBool>,
    hold: Arc<Vec<AtomicBool>>,
    in_flight: Arc<Vec<AtomicUsize>>,
    tenants: Vec<&'static str>,
    handles: Vec<JoinHandle<()>>,
}

/// Whether a 200 answer is whole: a chat completion with usage, or a stream that ended
/// with `[DONE]` after a usage chunk. Returns (why not, total tokens).
fn judge(status: u16, stream_events: Option<&[String]>, body: &str) -> (Option<String>, u64) {
    if status != 200 {
        let err: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let clean = err["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty());
        return (
            (!clean).then(|| format!("status {status} without an error body: {body}")),
            0,
        );
    }
    match stream_events {
        Some(events) => {
            let tokens = events
                .iter()
                .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
                .filter_map(|v| v["usage"]["total_tokens"].as_u64())
                .next_back();
            let done = events.last().is_some_and(|e| e == "[DONE]");
            match (done, tokens) {
                (true, Some(t)) => (None, t),
                _ => (Some(format!("a stream cut short: {events:?}")), 0),
            }
        }
        None => {
            let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
            let whole = v["choices"][0]["message"].is_object() && v["usage"].is_object();
            (
                (!whole).then(|| format!("a 200 without a whole answer: {body}")),
                v["usage"]["total_tokens"].as_u64().unwrap_or(0),
            )
        }
    }
}

/// Sends one request; its record.
fn one(addr: &str, model: &str, c: &Clients, gateway: usize, n: u64) -> Record {
    let auth = format!("Bearer {}", c.key);
    let mut body = chat(
        model,
        "Answer briefly.",
        &format!("{} g{gateway} n{n}: hi", c.tenant),
        c.max_tokens,
        c.stream,
    );
    if c.stream {
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    let sent = Instant::now();
    let headers = [("Authorization", auth.as_str())];
    let (status, unclean, tokens) = if c.stream {
        match post_sse(addr, "/v1/chat/completions", &headers, &body) {
            Ok(r) => {
                let (why, t) = judge(r.status, Some(&r.events), &r.raw);
                (r.status, why, t)
            }
            Err(e) => (0, Some(format!("no answer: {e:#}")), 0),
        }
    } else {
        match post_json(addr, "/v1/chat/completions", &headers, &body) {
            Ok(r) => {
                let (why, t) = judge(r.status, None, &r.text());
                (r.status, why, t)
            }
            Err(e) => (0, Some(format!("no answer: {e:#}")), 0),
        }
    };
    Record {
        tenant: c.tenant,
        gateway,
        sent,
        done: Instant::now(),
        status,
        tokens,
        unclean,
    }
}

impl Load {
    /// Starts every tenant's clients against every gateway in `addrs`.
    pub fn start(addrs: &[String], model: &str, tenants: &[Clients]) -> Self {
        let records = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let hold: Arc<Vec<AtomicBool>> =
            Arc::new(tenants.iter().map(|_| AtomicBool::new(false)).collect());
        let in_flight: Arc<Vec<AtomicUsize>> =
            Arc::new(tenants.iter().map(|_| AtomicUsize::new(0)).collect());
        let mut handles = Vec::new();
        for (t, c) in tenants.iter().enumerate() {
            for (g, addr) in addrs
                .iter()
                .flat_map(|a| std::iter::repeat_n(a, c.threads))
                .enumerate()
            {
                let g = g / c.threads;
                let (c, addr, model) = (c.clone(), addr.clone(), model.to_string());
                let (records, stop, hold, in_flight) = (
                    records.clone(),
                    stop.clone(),
                    hold.clone(),
                    in_flight.clone(),
                );
                handles.push(std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        if hold[t].load(Ordering::Acquire) {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                        in_flight[t].fetch_add(1, Ordering::AcqRel);
                        // Held after the count went up: the holder sees this one.
                        if hold[t].load(Ordering::Acquire) {
                            in_flight[t].fetch_sub(1, Ordering::AcqRel);
                            continue;
                        }
                        n += 1;
                        let r = one(&addr, &model, &c, g, n);
                        in_flight[t].fetch_sub(1, Ordering::AcqRel);
                        records.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                        std::thread::sleep(c.pause);
                    }
                }));
            }
        }
        Self {
            records,
            stop,
            hold,
            in_flight,
            tenants: tenants.iter().map(|c| c.tenant).collect(),
            handles,
        }
    }

    fn index(&self, tenant: &str) -> usize {
        self.tenants
            .iter()
            .position(|t| *t == tenant)
            .unwrap_or_else(|| panic!("no clients for tenant {tenant}"))
    }

    /// Holds `tenant`'s clients and waits until none of its requests is in flight.
    pub fn hold(&self, tenant: &str) {
        let t = self.index(tenant);
        self.hold[t].store(true, Ordering::Release);
        while self.in_flight[t].load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Lets `tenant`'s clients go on.
    pub fn release(&self, tenant: &str) {
        self.hold[self.index(tenant)].store(false, Ordering::Release);
    }

    /// The records of requests sent in `[from, to)`.
    pub fn sent_between(&self, from: Instant, to: Instant) -> Vec<Record> {
        let all = self.records.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter(|r| r.sent >= from && r.sent < to)
            .cloned()
            .collect()
    }

    /// Stops every client (each finishes its request) and returns all records.
    pub fn stop(self) -> Vec<Record> {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            let _ = h.join();
        }
        let all = self.records.lock().unwrap_or_else(|e| e.into_inner());
        all.clone()
    }
}
