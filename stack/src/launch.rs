//! What both modes of `warmpath up` do with the gateway process: find the sibling
//! binaries, check ports, wait until the gateway is ready, notice its exit, print the
//! banner.

use crate::config::{StackConfig, DEV_TENANT};
use crate::error::{log_tail, StackError};
use crate::probe;
use crate::procs::Proc;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Gateway: listening, replicas registered and healthy.
pub(crate) const GATEWAY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopping process may take before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often the serving loop checks the processes.
pub(crate) const SUPERVISE_EVERY: Duration = Duration::from_millis(250);

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
