//! Spawning the real binaries.

use crate::http;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Path of a workspace binary built next to this test executable.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} not found: run `cargo build -p replica -p gateway` (same profile and target dir) first",
        p.display()
    );
    p
}

/// A free loopback port (bound and released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Sends `sig` (e.g. `"STOP"`, `"HUP"`) with kill(1), keeping the tests free of `unsafe`.
pub(crate) fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status();
}

/// A running `replica serve`.
pub struct ReplicaProc {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl ReplicaProc {
    /// Starts `replica serve --model MODEL --port 0` (or `port`) and waits for its address.
    pub fn spawn(model: &str) -> Result<Self> {
        Self::spawn_on(model, 0)
    }

    /// As [`ReplicaProc::spawn`] on a given port (0 = any).
    pub fn spawn_on(model: &str, port: u16) -> Result<Self> {
        Self::spawn_args(model, port, &[])
    }

    /// As [`ReplicaProc::spawn_on`] with extra `replica serve` arguments.
    pub fn spawn_args(model: &str, port: u16, extra: &[&str]) -> Result<Self> {
        let mut child = Command::new(bin("replica"))
            .args([
                "serve",
                "--model",
                model,
                "--port",
                &port.to_string(),
                "--threads",
                "1",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn replica")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                bail!("replica did not print its address");
            }
        };
        Ok(Self { child, addr })
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGSTOP (hang).
    pub fn pause(&self) {
        signal(&self.child, "STOP");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        signal(&self.child, "CONT");
    }
}

impl Drop for ReplicaProc {
    fn drop(&mut self) {
        signal(&self.child, "CONT");
        self.kill();
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A running `gateway`.
pub struct GatewayProc {
    child: Child,
    /// Data-plane `127.0.0.1:PORT`.
    pub addr: String,
    /// Admin `127.0.0.1:PORT`.
    pub admin: String,
    /// Config file.
    pub config_path: PathBuf,
    /// The admin key, when the config sets one (`admin.key_sha256`); the admin helpers
    /// below send it.
    pub admin_key: Option<String>,
}

impl GatewayProc {
    /// Starts the gateway with `yaml` (without `listen`/`admin_listen`, which are added) and
    /// extra CLI args; waits until it answers and has `replicas` replicas registered.
    pub fn spawn(yaml: &str, args: &[&str], replicas: usize) -> Result<Self> {
        Self::spawn_with(yaml, args, replicas, None, &[])
    }

    /// As [`GatewayProc::spawn`], with `admin_key` as the admin key (its hash is added to
    /// the config).
    pub fn spawn_with_admin_key(
        yaml: &str,
        args: &[&str],
        replicas: usize,
        admin_key: &str,
    ) -> Result<Self> {
        Self::spawn_with(yaml, args, replicas, Some(admin_key), &[])
    }

    /// As [`GatewayProc::spawn`], with an optional admin key and extra environment
    /// variables (e.g. `RUST_LOG`).
    pub fn spawn_with(
        yaml: &str,
        args: &[&str],
        replicas: usize,
        admin_key: Option<&str>,
        env: &[(&str, &str)],
    ) -> Result<Self> {
        let port = free_port();
        let admin_port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "warmpath-e2e-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir)?;
        let config_path = dir.join("gateway.yaml");
        let admin = admin_key.map_or(String::new(), |k| {
            format!("admin: {{key_sha256: {}}}\n", gateway::hash_key(k))
        });
        let full = format!(
            "listen: 127.0.0.1:{port}\nadmin_listen: 127.0.0.1:{admin_port}\n{admin}{yaml}"
        );
        std::fs::write(&config_path, full)?;
        let log = std::fs::File::create(dir.join("gateway.log"))?;
        let out = std::fs::File::create(dir.join("gateway.stdout"))?;
        let child = Command::new(bin("gateway"))
            .arg("--config")
            .arg(&config_path)
            .args(args)
            .envs(env.iter().copied())
            .stdout(out)
            .stderr(log)
            .spawn()
            .context("spawn gateway")?;
        let g = Self {
            child,
            addr: format!("127.0.0.1:{port}"),
            admin: format!("127.0.0.1:{admin_port}"),
            config_path,
            admin_key: admin_key.map(str::to_string),
        };
        g.wait_ready(replicas)?;
        Ok(g)
    }

    /// Waits for `/health` and `replicas` registered replicas.
    pub fn wait_ready(&self, replicas: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(r) = self.admin_get("/admin/replicas") {
                if r.status == 200 {
                    let n = r.json()?["replicas"].as_array().map_or(0, Vec::len);
                    if n >= replicas
                        && http::get(&self.addr, "/health", &[]).is_ok_and(|h| h.status == 200)
                    {
                        return Ok(());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("gateway not ready; log: {}", self.log())
    }

    /// The gateway's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.config_path.with_file_name("gateway.log")).unwrap_or_default()
    }

    /// `Authorization: Bearer <admin key>` when there is one.
    pub fn admin_auth(&self) -> Option<String> {
        self.admin_key.as_ref().map(|k| format!("Bearer {k}"))
    }

    /// `GET path` on the admin listener, with the admin key.
    pub fn admin_get(&self, path: &str) -> Result<http::HttpResponse> {
        match self.admin_auth() {
            Some(a) => http::get(&self.admin, path, &[("Authorization", &a)]),
            None => http::get(&self.admin, path, &[]),
        }
    }

    /// `method path` on the admin listener with an optional JSON body and the admin key:
    /// (status, JSON body, `Null` when it has none).
    pub fn admin_call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, serde_json::Value)> {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let auth = self.admin_auth();
        let mut headers = Vec::new();
        if bytes.is_some() {
            headers.push(("content-type", "application/json"));
        }
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        let r = http::request(&self.admin, method, path, &headers, bytes.as_deref())?;
        Ok((r.status, r.json().unwrap_or(serde_json::Value::Null)))
    }

    /// The metrics text, read with the admin key.
    pub fn metrics(&self) -> Result<String> {
        Ok(self.admin_get("/metrics")?.text())
    }

    /// The gateway's stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.config_path.with_file_name("gateway.stdout"))
            .unwrap_or_default()
    }

    /// The admin replica list.
    pub fn replicas(&self) -> Result<serde_json::Value> {
        Ok(self.admin_get("/admin/replicas")?.json()?["replicas"].clone())
    }

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (e.g. `"HUP"`, `"TERM"`).
    pub fn signal(&self, sig: &str) {
        signal(&self.child, sig);
    }

    /// Waits for the process to exit (after SIGTERM), up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for GatewayProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replica whose log (stderr, at `info`) is kept in a file, started with extra flags.
pub struct LoggedReplica {
    /// The replica.
    pub proc: ReplicaProc,
    log: PathBuf,
}

impl LoggedReplica {
    /// Starts `replica serve --model MODEL --port 0 --threads 1 EXTRA...` with its stderr
    /// written to a temporary file.
    pub fn spawn(model: &str, extra: &[&str]) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "warmpath-e2e-replica-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir)?;
        let log = dir.join("replica.log");
        let mut child = Command::new(bin("replica"))
            .args(["serve", "--model", model, "--port", "0", "--threads", "1"])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("spawn replica")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                bail!("replica did not print its address");
            }
        };
        Ok(Self {
            proc: ReplicaProc { child, addr },
            log,
        })
    }

    /// The replica's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
