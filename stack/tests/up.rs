#![allow(clippy::unwrap_used)]
//! `warmpath up` as a user runs it, with the real `replica` and `gateway` binaries and the
//! real SmolLM2-135M-Instruct model: the stack comes up, the banner names the endpoint,
//! dashboard and key, a chat completion through the gateway answers in English, its
//! identical repeat reports cached prompt tokens, and SIGTERM stops every process started.
//!
//! The stack runs as a [`Stack`] guard: its stdout and stderr are piped and drained by
//! threads (never inherited, so a failing test cannot leave a process holding the test's
//! output open), and on drop it stops `warmpath` and every child it had, SIGKILL last.
//!
//! Needs the model: `scripts/fetch-model.sh` downloads it.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use warmpath::probe;

const BANNER_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(|d| d.parent()).unwrap().join(name);
    assert!(
        p.is_file(),
        "{} not found: run `cargo build -p replica -p gateway -p warmpath` (same profile and target dir) first",
        p.display()
    );
    p
}

/// The default model, where `scripts/fetch-model.sh` puts it.
fn model_path() -> PathBuf {
    let dir = std::env::var_os("WARMPATH_MODEL_DIR").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/warmpath/models"),
        PathBuf::from,
    );
    let p = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        p.is_file(),
        "{} not found: run scripts/fetch-model.sh first (it downloads SmolLM2-135M-Instruct)",
        p.display()
    );
    p
}

/// A port `p` with `p + 1` free too (gateway and admin listener).
fn free_port_pair() -> u16 {
    for _ in 0..50 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 65000 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair");
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The direct children of `pid`, from procfs.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut kids: Vec<u32> = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    kids.sort_unstable();
    kids.dedup();
    kids
}

/// A process's identity: its start time in clock ticks (field 22 of `/proc/PID/stat`),
/// so a recycled pid is not mistaken for it. `None` once it is gone (or a zombie).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after_comm starts at field 3 (state); field 22 is index 19.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Reads `r` line by line into `tx` until EOF, so the child never blocks on a full pipe.
fn drain(r: impl Read + Send + 'static, tx: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
}

/// `warmpath up` running; stopped (with all its children) when dropped.
struct Stack {
    child: Child,
    /// stdout lines.
    out: mpsc::Receiver<String>,
    /// stderr lines.
    err: mpsc::Receiver<String>,
    /// Children seen while it ran: (pid, start time).
    kids: Vec<(u32, u64)>,
}

impl Stack {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(bin("warmpath"))
            .arg("up")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, out) = mpsc::channel();
        drain(child.stdout.take().unwrap(), tx);
        let (tx, err) = mpsc::channel();
        drain(child.stderr.take().unwrap(), tx);
        Stack {
            child,
            out,
            err,
            kids: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything on stderr so far.
    fn stderr(&self) -> String {
        self.err.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// Reads stdout until a line contains `marker`; returns all lines read.
    fn read_until(&mut self, marker: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut text = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(marker);
                    text.push_str(&line);
                    text.push('\n');
                    if done {
                        return text;
                    }
                }
                Err(_) => panic!(
                    "no {marker:?} from warmpath within {} s; stdout:\n{text}\nstderr:\n{}",
                    timeout.as_secs(),
                    self.stderr()
                ),
            }
        }
    }

    /// Notes the current children (replicas, gateway) so that they can be checked later.
    fn record_children(&mut self) {
        for pid in children_of(self.pid()) {
            if let Some(t) = start_time(pid) {
                if !self.kids.iter().any(|k| k.0 == pid) {
                    self.kids.push((pid, t));
                }
            }
        }
    }

    /// Children seen earlier that still run (same pid and start time).
    fn live_children(&self) -> Vec<u32> {
        self.kids
            .iter()
            .filter(|(pid, t)| start_time(*pid) == Some(*t))
            .map(|k| k.0)
            .collect()
    }

    /// Waits for `warmpath` to exit; `None` on timeout.
    fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.record_children();
            let _ = kill(Pid::from_raw(self.pid() as i32), Signal::SIGTERM);
            if self.wait(STOP_TIMEOUT).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        for pid in self.live_children() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

fn chat(addr: &str, key: &str, model: &str) -> probe::Reply {
    let body = serde_json::json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a concise geography tutor. Answer in one sentence."},
            {"role": "user", "content": "What is the capital of France?"}
        ],
        "max_tokens": 12, "temperature": 0
    })
    .to_string();
    let auth = format!("Bearer {key}");
    block_on(probe::request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("Authorization", &auth)],
        Some(&body),
        Duration::from_secs(60),
    ))
    .unwrap()
}

/// Plain English text: mostly ASCII letters and spaces, several words of letters, and at
/// least one common English word (SmolLM2 garbage or a broken engine fails this).
fn assert_english(text: &str) {
    let chars = text.chars().count();
    let plain = text
        .chars()
        .filter(|c| c.is_ascii_alphabetic() || *c == ' ')
        .count();
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 2)
        .map(str::to_ascii_lowercase)
        .collect();
    let common = ["the", "is", "of", "a", "and", "in", "capital", "city"];
    assert!(
        chars > 0
            && plain * 10 >= chars * 8
            && words.len() >= 3
            && words.iter().any(|w| common.contains(&w.as_str())),
        "answer does not look like English: {text:?}"
    );
}

#[test]
fn up_serves_smollm2_caches_and_stops_cleanly() {
    let started = Instant::now();
    bin("replica");
    bin("gateway");
    let model_file = model_path();
    let port = free_port_pair();
    let key = "sk-warmpath-uptest";
    let mut stack = Stack::start(&[
        "--port",
        &port.to_string(),
        "--replicas",
        "2",
        "--threads",
        "1",
        "--model",
        model_file.to_str().unwrap(),
        "--api-key",
        key,
    ]);
    let banner = stack.read_until("Press Ctrl-C", BANNER_TIMEOUT);
    let up_after = started.elapsed();
    stack.record_children();
    assert_eq!(
        stack.kids.len(),
        3,
        "expected 2 replicas + gateway: {:?}",
        stack.kids
    );

    let addr = format!("127.0.0.1:{port}");
    let admin = format!("127.0.0.1:{}", port + 1);
    for want in [
        format!("http://{addr}/v1"),
        format!("http://{admin}/dashboard"),
        key.to_string(),
        "curl -s".to_string(),
        "2 replicas serving SmolLM2-135M-Instruct".to_string(),
    ] {
        assert!(banner.contains(&want), "banner lacks {want:?}:\n{banner}");
    }
    let model = "SmolLM2-135M-Instruct";

    let first = chat(&addr, key, model);
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let v = first.json().unwrap();
    let answer = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_english(answer);
    assert_eq!(v["model"], model, "{v}");

    let second = chat(&addr, key, model);
    assert_eq!(
        second.status,
        200,
        "{}",
        String::from_utf8_lossy(&second.body)
    );
    let v2 = second.json().unwrap();
    let cached = v2["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    if cached == 0 {
        let why = block_on(probe::get(&admin, "/dashboard/snapshot.json"))
            .and_then(|r| r.json())
            .map(|s| s["decisions"].to_string())
            .unwrap_or_default();
        panic!(
            "the identical repeat reported no cached tokens (first via {:?}, repeat via {:?}): {v2}\nrouting decisions: {why}",
            first.header("x-warmpath-replica"),
            second.header("x-warmpath-replica"),
        );
    }
    assert_eq!(
        v2["choices"][0]["message"]["content"], answer,
        "greedy answers differ"
    );
    assert_eq!(chat(&addr, "sk-wrong", model).status, 401);

    let snap = block_on(probe::get(&admin, "/dashboard/snapshot.json"))
        .unwrap()
        .json()
        .unwrap();
    let replica_addrs: Vec<String> = snap["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["url"]
                .as_str()
                .unwrap()
                .trim_start_matches("http://")
                .to_string()
        })
        .collect();
    assert_eq!(replica_addrs.len(), 2, "{snap}");

    let served_after = started.elapsed();
    kill(Pid::from_raw(stack.pid() as i32), Signal::SIGTERM).unwrap();
    let status = stack.wait(STOP_TIMEOUT).unwrap_or_else(|| {
        panic!(
            "warmpath did not exit within {} s of SIGTERM",
            STOP_TIMEOUT.as_secs()
        )
    });
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        stack.stderr()
    );
    let rest: Vec<String> = stack.out.try_iter().collect();
    assert!(
        rest.iter().any(|l| l.contains("SIGTERM received")),
        "{rest:?}"
    );
    // warmpath stops its children before it exits: none may still run.
    let live = stack.live_children();
    assert!(
        live.is_empty(),
        "children still running after warmpath exited: {live:?}"
    );
    for a in replica_addrs.iter().chain([&addr, &admin]) {
        assert!(
            std::net::TcpStream::connect(a).is_err(),
            "{a} still accepts connections after warmpath stopped"
        );
    }
    eprintln!(
        "warmpath up: banner after {:.1} s, served after {:.1} s, stopped after {:.1} s; answer {answer:?}, repeat cached {cached} tokens",
        up_after.as_secs_f64(),
        served_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
