//! `warmpath up`: start N replicas and the gateway on loopback, wait until all are
//! healthy, print how to use them, then supervise: a replica that exits is restarted
//! ([`crate::replicas`]); the gateway's exit, Ctrl-C, SIGTERM or SIGHUP stop everything.
//!
//! Exit status: 0 after a stop signal, 1 when the stack could not start, 2 on a
//! command-line usage error, 3 when the gateway exited while serving ([`EXIT_CODES`]).

use crate::config::{generate_admin_key, generate_api_key, random_hex, StackConfig};
use crate::console::{out, say};
use crate::error::StackError;
use crate::launch::{check_port, gateway_exited, wait_gateway, STOP_GRACE, SUPERVISE_EVERY};
use crate::probe;
use crate::procs::Proc;
use crate::replicas::{ReplicaSpec, Replicas};
use crate::signals::{stopped, Stops};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use crate::args::UpArgs;
pub use crate::launch::{banner, sibling};

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
    std::fs::write(&cfg_path, cfg.to_yaml()?)
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
