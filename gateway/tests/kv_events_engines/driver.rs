//! An engine's own KV event publisher in a Python process: `scripts/engine_kv_publisher.py`
//! running vLLM's or SGLang's `ZmqEventPublisher` from its published wheel (fetched and
//! cached by `scripts/engine-kv-events.sh`), driven one JSON line at a time.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::time::Duration;

/// The longest the driver may take to answer one command (Python start-up included).
const ANSWER: Duration = Duration::from_secs(60);

fn repo() -> String {
    format!("{}/..", env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The cache folder holding each engine version's extracted module: runs
/// `scripts/engine-kv-events.sh` once per test binary (it downloads only what is missing).
fn modules_dir() -> &'static str {
    static DIR: OnceLock<String> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("bash")
            .arg(format!("{}/scripts/engine-kv-events.sh", repo()))
            .output()
            .expect("bash runs scripts/engine-kv-events.sh");
        assert!(
            out.status.success(),
            "scripts/engine-kv-events.sh failed (it needs python3 with msgspec, pyzmq and \
             pydantic: run scripts/ci-deps.sh, or pip install msgspec pyzmq pydantic; and \
             network access on its first run):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("dir="))
            .expect("engine-kv-events.sh prints dir=")
            .to_string()
    })
}

/// One engine version's publisher process.
pub(crate) struct Driver {
    label: String,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// Where the gateway subscribes: `tcp://127.0.0.1:PORT`.
    pub(crate) endpoint: String,
    pub(crate) replay_endpoint: String,
}

fn port(endpoint: &str) -> u16 {
    endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("tcp://host:port")
}

impl Driver {
    /// Starts `engine` `version`'s publisher, on `ports` (PUB, replay) or on free ones.
    pub(crate) fn start(engine: &str, version: &str, ports: Option<(u16, u16)>) -> Self {
        let label = format!("{engine} {version}");
        let mut cmd = Command::new(python());
        cmd.arg(format!("{}/scripts/engine_kv_publisher.py", repo()))
            .args(["--engine", engine, "--version", version, "--dir"])
            .arg(modules_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some((p, r)) = ports {
            cmd.args([
                "--pub-port",
                &p.to_string(),
                "--replay-port",
                &r.to_string(),
            ]);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} (install python3): {e}", python()));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut driver = Self {
            label,
            child,
            stdin,
            lines,
            endpoint: String::new(),
            replay_endpoint: String::new(),
        };
        let hello = driver.answer();
        driver.endpoint = hello["endpoint"].as_str().expect("endpoint").into();
        driver.replay_endpoint = hello["replay_endpoint"].as_str().expect("replay").into();
        driver
    }

    /// The (PUB, replay) ports, for a restart on the same ones.
    pub(crate) fn ports(&self) -> (u16, u16) {
        (port(&self.endpoint), port(&self.replay_endpoint))
    }

    fn answer(&mut self) -> Value {
        let label = &self.label;
        let line = tokio::task::block_in_place(|| self.lines.recv_timeout(ANSWER))
            .unwrap_or_else(|e| panic!("{label}: no answer from the publisher driver ({e})"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{label}: bad line {line:?}: {e}"))
    }

    fn call(&mut self, cmd: Value) -> u64 {
        writeln!(self.stdin, "{cmd}").expect("driver stdin");
        self.stdin.flush().expect("driver stdin");
        self.answer()["seq"].as_u64().expect("seq")
    }

    /// Publishes the full blocks `tokens` cached after the blocks `prefix`; the batch's
    /// sequence number. `lose`: buffered for replay but never sent.
    pub(crate) fn store(&mut self, prefix: &[u32], tokens: &[u32], lose: bool) -> u64 {
        self.call(json!({"op": "store", "prefix": prefix, "tokens": tokens, "lose": lose}))
    }

    /// Publishes the removal of the blocks `tokens` that follow `prefix`.
    pub(crate) fn remove(&mut self, prefix: &[u32], tokens: &[u32]) -> u64 {
        self.call(json!({"op": "remove", "prefix": prefix, "tokens": tokens}))
    }

    pub(crate) fn clear(&mut self) -> u64 {
        self.call(json!({"op": "clear"}))
    }

    pub(crate) fn empty(&mut self) -> u64 {
        self.call(json!({"op": "empty"}))
    }

    /// Shuts the publisher down and waits for the process to exit (its ports are free then).
    pub(crate) fn quit(mut self) {
        writeln!(self.stdin, "{}", json!({"op": "quit"})).expect("driver stdin");
        self.stdin.flush().expect("driver stdin");
        assert_eq!(self.answer()["quit"], json!(true), "{}", self.label);
        let status = tokio::task::block_in_place(|| self.child.wait()).expect("driver exits");
        assert!(
            status.success(),
            "{}: driver exited with {status}",
            self.label
        );
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
