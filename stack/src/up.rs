//! `warmpath up`: start N replicas and the gateway on loopback, wait until all are
//! healthy, print how to use them, then supervise: a replica that exits is restarted
//! ([`crate::replicas`]); the gateway's exit, Ctrl-C, SIGTERM or SIGHUP stop everything.
//!
//! Exit status: 0 after a stop signal, 1 when the stack could not start, 2 on a
//! command-line usage error, 3 when the gateway exited while serving ([`EXIT_CODES`]).

use crate::config::{generate_admin_key, generate_api_key, random_hex, StackConfig, DEV_TENANT};
use crate::console::{out, say};
use crate::error::{log_tail, StackError};
use crate::probe;
use crate::procs::Proc;
use crate::replicas::{ReplicaSpec, Replicas};
use crate::signals::{stopped, Stops};
use crate::supervise::RestartArgs;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The exit statuses of `warmpath up`, as `--help` shows them.
pub const EXIT_CODES: &str = "\
Replicas that exit are restarted on the same port (see --restart-*); only the gateway's \
exit or a stop signal stops the stack. Replica health: the dashboard, \
http://127.0.0.1:<admin port>/dashboard.

Exit status:
  0  stopped by Ctrl-C, SIGTERM or SIGHUP
  1  could not start (bad flag value, missing binary, port in use, a process failed to start)
  2  command-line usage error
  3  the gateway exited while serving";

/// First replica start: may include fetching the default model.
const FIRST_REPLICA_TIMEOUT: Duration = Duration::from_secs(600);
/// Further replicas (model already on disk).
const REPLICA_TIMEOUT: Duration = Duration::from_secs(180);
/// Gateway: listening, replicas registered and healthy.
pub(crate) const GATEWAY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopping process may take before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often the serving loop checks the processes.
pub(crate) const SUPERVISE_EVERY: Duration = Duration::from_millis(250);

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
    /// The admin key (dashboard login, `/metrics`, `/admin/*`); generated when not given.
    #[arg(long)]
    pub admin_key: Option<String>,
    /// Routing policy (warm, kv_cost, cache_aware, least_loaded, round_robin, ...).
    #[arg(long, default_value = "warm")]
    pub policy: String,
    /// Compute threads per replica (0 = the machine's cores divided among the replicas).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Front servers someone already runs instead of starting replicas: an upstream's base
    /// URL (repeat for more), e.g. a vLLM, SGLang or llama.cpp server.
    #[arg(long = "upstream", value_name = "URL")]
    pub upstreams: Vec<String>,
    /// The engine the `--upstream` servers run: vllm, sglang, llamacpp, openai (any other
    /// OpenAI-compatible server) or warmpath.
    #[arg(long, default_value = "openai", requires = "upstreams")]
    pub engine: String,
    /// The upstreams' tokenizer: a GGUF file, a HF `tokenizer.json`, or a directory holding
    /// `tokenizer.json` and `tokenizer_config.json`. Without it prompts are hashed as text.
    #[arg(long, value_name = "PATH", requires = "upstreams")]
    pub tokenizer: Option<PathBuf>,
    /// When to restart a replica that exited.
    #[command(flatten)]
    pub restart: RestartArgs,
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

pub(crate) fn check_port(
    port: u16,
    what: &'static str,
    flag: &'static str,
) -> Result<(), StackError> {
    std::net::TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .map_err(|_| StackError::PortInUse { port, what, flag })
}

/// Waits until the gateway answers `/health` and lists `n` healthy replicas.
pub(crate) async fn wait_gateway(
    gw: &mut Proc,
    addr: &str,
    admin: &str,
    admin_key: &str,
    n: usize,
) -> Result<(), StackError> {
    let auth = format!("Bearer {admin_key}");
    let started = Instant::now();
    loop {
        if let Some(s) = gw.try_exited() {
            return Err(gw.exited(s));
        }
        let health = probe::get(addr, "/health")
            .await
            .is_ok_and(|r| r.status == 200);
        if health {
            let listed = probe::request(
                admin,
                "GET",
                "/admin/replicas",
                &[("authorization", &auth)],
                None,
                Duration::from_secs(5),
            )
            .await;
            if let Ok(r) = listed {
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

/// The error for a gateway that exited while serving, if it has.
pub(crate) fn gateway_exited(gw: &mut Proc) -> Option<StackError> {
    let status = gw.try_exited()?;
    Some(StackError::GatewayExited {
        status: status.to_string(),
        log: gw.log.clone(),
        tail: log_tail(&gw.log, 15),
    })
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
         \x20 admin key  {admin_key}   (dashboard login; `Authorization: Bearer` for /metrics and /admin)\n\
         \x20 logs       {logs}\n\n\
         Replicas that exit are restarted; watch their health on the dashboard.\n\n\
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
        admin_key = cfg.admin_key,
        tenant = DEV_TENANT,
        logs = logs.display(),
    )
}

/// Runs `warmpath up` until a stop signal, a startup failure or the gateway's exit. A
/// replica's exit is not among them: [`Replicas`] restarts it.
pub async fn run(args: UpArgs) -> Result<(), StackError> {
    if !args.upstreams.is_empty() {
        return crate::front::run(args).await;
    }
    if args.replicas == 0 || args.replicas > 64 {
        return Err(StackError::Args("--replicas must be in 1..=64".into()));
    }
    let policy = args.restart.policy().map_err(StackError::Args)?;
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
    let threads = if args.threads > 0 {
        args.threads
    } else {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / args.replicas).max(1)
    };
    let spec = ReplicaSpec {
        bin: replica_bin,
        model: args.model.clone().unwrap_or_default(),
        threads,
        dir: dir.clone(),
        ready_timeout: REPLICA_TIMEOUT,
    };
    let dashboard = format!("http://127.0.0.1:{admin_port}/dashboard");
    let mut replicas = Replicas::new(spec, policy, dashboard);
    let mut gateway = None;
    let result =
        start_and_serve(&args, admin_port, &gateway_bin, &mut replicas, &mut gateway).await;
    if let Err(e) = &result {
        say(format!("error: {e}"));
    }
    say("stopping");
    if let Some(gw) = gateway.as_mut() {
        let how = gw.stop(STOP_GRACE).await;
        say(format!("{}: {how}", gw.name));
    }
    replicas.stop_all(STOP_GRACE).await;
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        say(format!("logs kept in {}", dir.display()));
    }
    result
}

async fn start_and_serve(
    args: &UpArgs,
    admin_port: u16,
    gateway_bin: &Path,
    replicas: &mut Replicas,
    gateway: &mut Option<Proc>,
) -> Result<(), StackError> {
    let mut stop = Stops::install()?;
    let (model, dir) = (&replicas.spec().model, replicas.spec().dir.clone());
    if model.is_empty() && !default_model_path().is_file() {
        say(format!(
            "fetching SmolLM2-135M-Instruct (Q4_1, ~90 MB, first run only) into {}",
            default_model_path().display()
        ));
    }
    say(format!(
        "starting {} replica(s) ({} thread(s) each), logs in {}",
        args.replicas,
        replicas.spec().threads,
        dir.display()
    ));
    // The first replica alone (it fetches the default model if needed), then the rest.
    let mut urls = Vec::new();
    let rx = replicas.launch()?;
    let first_addr = tokio::select! {
        r = replicas.wait_ready(0, rx, FIRST_REPLICA_TIMEOUT) => r?,
        sig = stop.recv() => return stopped(sig),
    };
    urls.push(format!("http://{first_addr}"));
    let mut pending = Vec::new();
    for _ in 1..args.replicas {
        pending.push(replicas.launch()?);
    }
    for (i, rx) in pending.into_iter().enumerate() {
        let addr = tokio::select! {
            r = replicas.wait_ready(i + 1, rx, REPLICA_TIMEOUT) => r?,
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
        admin_key: args.admin_key.clone().unwrap_or_else(generate_admin_key),
        salt_secret: random_hex(16),
        policy: args.policy.clone(),
        pool: None,
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
    let gw = gateway.insert(gw);
    let addr = format!("127.0.0.1:{}", args.port);
    let admin = format!("127.0.0.1:{admin_port}");
    let n = args.replicas;
    tokio::select! {
        r = wait_gateway(gw, &addr, &admin, &cfg.admin_key, n) => r?,
        sig = stop.recv() => return stopped(sig),
    }
    out(&banner(&cfg, &model_name, n, &dir));
    loop {
        tokio::select! {
            sig = stop.recv() => return stopped(sig),
            _ = tokio::time::sleep(SUPERVISE_EVERY) => {
                if let Some(e) = gateway_exited(gw) {
                    return Err(e);
                }
                replicas.tick(Instant::now()).await;
            }
        }
    }
}
