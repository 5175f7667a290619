//! `warmpath up`: start N replicas and the gateway on loopback, wait until all are
//! healthy, print how to use them, and stop everything on Ctrl-C / SIGTERM / SIGHUP.

use crate::config::{generate_api_key, random_hex, StackConfig, DEV_TENANT};
use crate::error::StackError;
use crate::probe;
use crate::procs::Proc;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;

/// First replica start: may include fetching the default model.
const FIRST_REPLICA_TIMEOUT: Duration = Duration::from_secs(600);
/// Further replicas (model already on disk).
const REPLICA_TIMEOUT: Duration = Duration::from_secs(180);
/// Gateway: listening, replicas registered and healthy.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopping process may take before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Flags of `warmpath up`.
#[derive(Args, Clone, Debug)]
pub struct UpArgs {
    /// Gateway port on 127.0.0.1 (the OpenAI-compatible endpoint).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Admin port (dashboard, metrics); defaults to `--port` + 1.
    #[arg(long)]
    pub admin_port: Option<u16>,
    /// Number of CPU replicas.
    #[arg(long, default_value_t = 2)]
    pub replicas: usize,
    /// Model: a GGUF file, a HF checkpoint directory or `dummy:NAME`; default
    /// SmolLM2-135M-Instruct Q4_1, fetched into ~/.cache/warmpath/models on first use.
    #[arg(long)]
    pub model: Option<String>,
    /// The dev tenant's API key; generated when not given.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Routing policy (warm, kv_cost, cache_aware, least_loaded, round_robin, ...).
    #[arg(long, default_value = "warm")]
    pub policy: String,
    /// Compute threads per replica (0 = the machine's cores divided among the replicas).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Where the sibling binaries are: next to the running executable.
pub fn sibling(name: &'static str) -> Result<PathBuf, StackError> {
    let exe = std::env::current_exe().map_err(|e| StackError::io("locate warmpath", e))?;
    let path = exe.with_file_name(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(StackError::MissingBinary { name, path })
    }
}

/// The default model's path, as `replica` computes it.
fn default_model_path() -> PathBuf {
    let dir = std::env::var_os("WARMPATH_MODEL_DIR").map_or_else(
        || {
            std::env::var_os("HOME")
                .map_or_else(|| PathBuf::from("."), PathBuf::from)
                .join(".cache/warmpath/models")
        },
        PathBuf::from,
    );
    dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn check_port(port: u16, what: &'static str, flag: &'static str) -> Result<(), StackError> {
    std::net::TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .map_err(|_| StackError::PortInUse { port, what, flag })
}

/// Prints a progress line on stdout, flushed. Errors are ignored: a closed stdout (the
/// reader of a pipe went away) must not panic `warmpath` before it stops its children.
fn say(msg: impl std::fmt::Display) {
    out(&format!("warmpath: {msg}"));
}

/// Writes `text` and a newline to stdout and flushes, ignoring errors (see [`say`]).
fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{text}");
    let _ = o.flush();
}

fn spawn_replica(
    bin: &Path,
    index: usize,
    model: &str,
    threads: usize,
    dir: &Path,
) -> Result<(Proc, oneshot::Receiver<String>), StackError> {
    let mut args = vec!["serve".to_string()];
    if !model.is_empty() {
        args.extend(["--model".to_string(), model.to_string()]);
    }
    args.extend(["--port", "0", "--threads"].map(String::from));
    args.push(threads.to_string());
    let log = dir.join(format!("replica-{index}.log"));
    let (p, rx) = Proc::spawn(&format!("replica {index}"), bin, &args, log, true)?;
    let rx = rx.ok_or_else(|| StackError::Http("replica stdout not captured".into()))?;
    Ok((p, rx))
}

/// Waits for the replica's `listening on ADDR` line; returns ADDR.
async fn wait_listening(
    p: &mut Proc,
    rx: oneshot::Receiver<String>,
    timeout: Duration,
) -> Result<String, StackError> {
    let started = Instant::now();
    let mut rx = Box::pin(rx);
    loop {
        tokio::select! {
            addr = &mut rx => return match addr {
                Ok(a) => Ok(a),
                Err(_) => {
                    let status = p.wait().await.map_err(|e| StackError::io("wait replica", e))?;
                    Err(p.exited(status))
                }
            },
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                if let Some(s) = p.try_exited() {
                    return Err(p.exited(s));
                }
                if started.elapsed() > timeout {
                    return Err(p.not_ready(timeout));
                }
            }
        }
    }
}

/// Waits until the gateway answers `/health` and lists `n` healthy replicas.
async fn wait_gateway(gw: &mut Proc, addr: &str, admin: &str, n: usize) -> Result<(), StackError> {
    let started = Instant::now();
    loop {
        if let Some(s) = gw.try_exited() {
            return Err(gw.exited(s));
        }
        let health = probe::get(addr, "/health")
            .await
            .is_ok_and(|r| r.status == 200);
        if health {
            if let Ok(r) = probe::get(admin, "/admin/replicas").await {
                let v = r.json()?;
                let healthy = v["replicas"].as_array().map_or(0, |a| {
                    a.iter()
                        .filter(|r| r["health"]["state"] == "healthy")
                        .count()
                });
                if healthy >= n {
                    return Ok(());
                }
            }
        }
        if started.elapsed() > GATEWAY_TIMEOUT {
            return Err(gw.not_ready(GATEWAY_TIMEOUT));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The banner printed once everything is healthy.
pub fn banner(cfg: &StackConfig, model: &str, n: usize, logs: &Path) -> String {
    let body = format!(
        r#"{{"model": {}, "max_tokens": 32, "temperature": 0, "messages": [{{"role": "system", "content": "You are a concise geography tutor. Answer in one sentence."}}, {{"role": "user", "content": "What is the capital of France?"}}]}}"#,
        serde_json::Value::from(model)
    );
    format!(
        "\nWarmpath is up: gateway + {n} replica{s} serving {model}, policy {policy}.\n\n\
         \x20 endpoint   http://127.0.0.1:{port}/v1   (OpenAI-compatible)\n\
         \x20 dashboard  http://127.0.0.1:{admin}/dashboard\n\
         \x20 metrics    http://127.0.0.1:{admin}/metrics\n\
         \x20 API key    {key}   (tenant \"{tenant}\")\n\
         \x20 logs       {logs}\n\n\
         Try it (run it twice: the second answer reports cached prompt tokens):\n\n\
         \x20 curl -s http://127.0.0.1:{port}/v1/chat/completions \\\n\
         \x20   -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \\\n\
         \x20   -d '{body}'\n\n\
         Press Ctrl-C to stop everything.\n",
        s = if n == 1 { "" } else { "s" },
        policy = cfg.policy,
        port = cfg.port,
        admin = cfg.admin_port,
        key = cfg.api_key,
        tenant = DEV_TENANT,
        logs = logs.display(),
    )
}

/// Runs `warmpath up` until a stop signal or a process failure.
pub async fn run(args: UpArgs) -> Result<(), StackError> {
    if args.replicas == 0 || args.replicas > 64 {
        return Err(StackError::Args("--replicas must be in 1..=64".into()));
    }
    let admin_port = match args.admin_port {
        Some(p) => p,
        None => args.port.checked_add(1).ok_or_else(|| {
            StackError::Args("--port 65535 leaves no room for the admin port".into())
        })?,
    };
    if admin_port == args.port {
        return Err(StackError::Args(
            "--admin-port must differ from --port".into(),
        ));
    }
    let (replica_bin, gateway_bin) = (sibling("replica")?, sibling("gateway")?);
    check_port(args.port, "gateway", "--port")?;
    check_port(admin_port, "gateway admin", "--admin-port")?;
    let dir = std::env::temp_dir().join(format!("warmpath-up-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| StackError::io(format!("create {}", dir.display()), e))?;
    let model = args.model.clone().unwrap_or_default();
    let threads = if args.threads > 0 {
        args.threads
    } else {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / args.replicas).max(1)
    };
    let mut procs: Vec<Proc> = Vec::new();
    let result = start_and_wait(
        &args,
        admin_port,
        &model,
        threads,
        &replica_bin,
        &gateway_bin,
        &dir,
        &mut procs,
    )
    .await;
    if let Err(e) = &result {
        say(format!("error: {e}"));
    }
    say("stopping");
    for p in procs.iter_mut().rev() {
        let how = p.stop(STOP_GRACE).await;
        say(format!("{}: {how}", p.name));
    }
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        say(format!("logs kept in {}", dir.display()));
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn start_and_wait(
    args: &UpArgs,
    admin_port: u16,
    model: &str,
    threads: usize,
    replica_bin: &Path,
    gateway_bin: &Path,
    dir: &Path,
    procs: &mut Vec<Proc>,
) -> Result<(), StackError> {
    let mut stop = Stops::install()?;
    if model.is_empty() && !default_model_path().is_file() {
        say(format!(
            "fetching SmolLM2-135M-Instruct (Q4_1, ~90 MB, first run only) into {}",
            default_model_path().display()
        ));
    }
    say(format!(
        "starting {} replica(s) ({} thread(s) each), logs in {}",
        args.replicas,
        threads,
        dir.display()
    ));
    // The first replica alone (it fetches the default model if needed), then the rest.
    let mut urls = Vec::new();
    let (p, rx) = spawn_replica(replica_bin, 0, model, threads, dir)?;
    procs.push(p);
    let first_addr = tokio::select! {
        r = wait_listening(&mut procs[0], rx, FIRST_REPLICA_TIMEOUT) => r?,
        sig = stop.recv() => return stopped(sig),
    };
    urls.push(format!("http://{first_addr}"));
    let mut pending = Vec::new();
    for i in 1..args.replicas {
        let (p, rx) = spawn_replica(replica_bin, i, model, threads, dir)?;
        procs.push(p);
        pending.push(rx);
    }
    for (i, rx) in pending.into_iter().enumerate() {
        let addr = tokio::select! {
            r = wait_listening(&mut procs[i + 1], rx, REPLICA_TIMEOUT) => r?,
            sig = stop.recv() => return stopped(sig),
        };
        urls.push(format!("http://{addr}"));
    }
    let info = probe::get(&first_addr, "/v1/replica/info").await?.json()?;
    let model_name = info["model"].as_str().unwrap_or("default").to_string();
    let cfg = StackConfig {
        port: args.port,
        admin_port,
        replicas: urls,
        api_key: args.api_key.clone().unwrap_or_else(generate_api_key),
        salt_secret: random_hex(16),
        policy: args.policy.clone(),
    };
    let cfg_path = dir.join("gateway.yaml");
    std::fs::write(&cfg_path, cfg.to_yaml())
        .map_err(|e| StackError::io("write gateway config", e))?;
    say("starting the gateway");
    let cfg_arg = vec!["--config".to_string(), cfg_path.display().to_string()];
    let (gw, _) = Proc::spawn(
        "gateway",
        gateway_bin,
        &cfg_arg,
        dir.join("gateway.log"),
        false,
    )?;
    procs.push(gw);
    let addr = format!("127.0.0.1:{}", args.port);
    let admin = format!("127.0.0.1:{admin_port}");
    let n = procs.len() - 1;
    let gw = procs
        .last_mut()
        .ok_or_else(|| StackError::Http("no gateway".into()))?;
    tokio::select! {
        r = wait_gateway(gw, &addr, &admin, n) => r?,
        sig = stop.recv() => return stopped(sig),
    }
    out(&banner(&cfg, &model_name, n, dir));
    loop {
        tokio::select! {
            sig = stop.recv() => return stopped(sig),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                for p in procs.iter_mut() {
                    if let Some(s) = p.try_exited() {
                        return Err(p.exited(s));
                    }
                }
            }
        }
    }
}

fn stopped(sig: &str) -> Result<(), StackError> {
    say(format!("{sig} received"));
    Ok(())
}

/// The stop signals: SIGINT (Ctrl-C), SIGTERM, SIGHUP (terminal closed).
struct Stops {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Stops {
    fn install() -> Result<Self, StackError> {
        let s = |k: SignalKind| signal(k).map_err(|e| StackError::io("install signal handler", e));
        Ok(Self {
            int: s(SignalKind::interrupt())?,
            term: s(SignalKind::terminate())?,
            hup: s(SignalKind::hangup())?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}
