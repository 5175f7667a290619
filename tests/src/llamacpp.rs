//! llama.cpp's `llama-server`, the real third-party engine of the engine tests: the binary
//! comes from `scripts/llama-server.sh` (a pinned build from source, cached under
//! `~/.cache/warmpath/`; the first call builds it), and each server is started on a free
//! loopback port and stopped when dropped.

use crate::http;
use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `llama-server` binary, built by `scripts/llama-server.sh` when it is not cached yet.
/// Panics with what to install when the build fails (never skips).
pub fn llama_server_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/llama-server.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/llama-server.sh");
        assert!(
            out.status.success(),
            "scripts/llama-server.sh failed (it needs cmake, a C++ compiler and pip; see its output above)"
        );
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert!(path.is_file(), "scripts/llama-server.sh printed {path:?}, not a file");
        path
    })
    .clone()
}

/// A running `llama-server`.
pub struct LlamaServer {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    log: PathBuf,
    /// Killed already ([`LlamaServer::kill`]).
    killed: bool,
}

impl LlamaServer {
    /// Starts `llama-server -m MODEL --alias ALIAS --port P --metrics EXTRA...` on 127.0.0.1
    /// and waits until `/health` answers 200 (the model is loaded).
    pub fn spawn(model: &str, alias: &str, extra: &[&str]) -> Result<Self> {
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "warmpath-e2e-llama-{}-{port}.log",
            std::process::id()
        ));
        let child = Command::new(llama_server_bin())
            .args(["-m", model, "--alias", alias, "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "--metrics"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("spawn llama-server")?;
        let mut s = Self {
            child,
            addr: format!("127.0.0.1:{port}"),
            log,
            killed: false,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = s.child.try_wait() {
                bail!("llama-server exited ({status}): {}", s.log());
            }
            if http::get(&s.addr, "/health", &[]).is_ok_and(|r| r.status == 200) {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = s.child.kill();
        bail!("llama-server not healthy after 120 s: {}", s.log())
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGSTOP: it hangs, holding whatever it was sent.
    pub fn pause(&self) {
        crate::procs::signal(&self.child, "STOP");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        crate::procs::signal(&self.child, "CONT");
    }

    /// SIGKILL: it dies mid-answer, closing its connections.
    pub fn kill(&mut self) {
        self.killed = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        if self.killed {
            return;
        }
        crate::procs::signal(&self.child, "CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
