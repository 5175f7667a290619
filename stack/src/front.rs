//! `warmpath up --upstream URL [--upstream URL]... [--engine E] [--tokenizer PATH]`: a
//! gateway with a development tenant and the dashboard in front of servers someone already
//! runs (vLLM, SGLang, llama.cpp, any OpenAI-compatible server), started and stopped like
//! the local stack, without replicas of its own.

use crate::args::UpArgs;
use crate::config::{generate_admin_key, generate_api_key, random_hex, FrontPool, StackConfig};
use crate::console::{out, say};
use crate::error::StackError;
use crate::launch::{
    banner, check_port, gateway_exited, sibling, wait_gateway, STOP_GRACE, SUPERVISE_EVERY,
};
use crate::probe;
use crate::procs::Proc;
use crate::signals::{stopped, Stops};
use std::time::Duration;

const ENGINES: [&str; 5] = ["vllm", "sglang", "llamacpp", "openai", "warmpath"];

/// Runs the gateway in front of `args.upstreams` until a stop signal or its exit.
pub async fn run(args: UpArgs) -> Result<(), StackError> {
    if !ENGINES.contains(&args.engine.as_str()) {
        return Err(StackError::Args(format!(
            "--engine {}: expected one of {}",
            args.engine,
            ENGINES.join(", ")
        )));
    }
    if let Some(t) = &args.tokenizer {
        if !t.exists() {
            return Err(StackError::Args(format!(
                "--tokenizer {}: no such file or directory",
                t.display()
            )));
        }
    }
    let admin_port = args.admin_port.unwrap_or(args.port.saturating_add(1));
    if admin_port == args.port {
        return Err(StackError::Args(
            "--admin-port must differ from --port".into(),
        ));
    }
    let gateway_bin = sibling("gateway")?;
    check_port(args.port, "gateway", "--port")?;
    check_port(admin_port, "gateway admin", "--admin-port")?;
    let dir = std::env::temp_dir().join(format!("warmpath-up-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| StackError::io(format!("create {}", dir.display()), e))?;
    let cfg = StackConfig {
        port: args.port,
        admin_port,
        replicas: Vec::new(),
        api_key: args.api_key.clone().unwrap_or_else(generate_api_key),
        admin_key: args.admin_key.clone().unwrap_or_else(generate_admin_key),
        salt_secret: random_hex(16),
        policy: args.policy.clone(),
        pool: Some(FrontPool {
            engine: args.engine.clone(),
            upstreams: args.upstreams.clone(),
            tokenizer: FrontPool::tokenizer_source(args.tokenizer.as_deref()),
        }),
    };
    let cfg_path = dir.join("gateway.yaml");
    std::fs::write(&cfg_path, cfg.to_yaml()?)
        .map_err(|e| StackError::io("write gateway config", e))?;
    let mut stop = Stops::install()?;
    say(format!(
        "starting the gateway in front of {} {} server(s)",
        args.upstreams.len(),
        args.engine
    ));
    let cfg_arg = vec!["--config".to_string(), cfg_path.display().to_string()];
    let (mut gw, _) = Proc::spawn(
        "gateway",
        &gateway_bin,
        &cfg_arg,
        dir.join("gateway.log"),
        false,
    )?;
    let addr = format!("127.0.0.1:{}", args.port);
    let admin = format!("127.0.0.1:{admin_port}");
    let result = async {
        tokio::select! {
            r = wait_gateway(&mut gw, &addr, &admin, &cfg.admin_key, args.upstreams.len()) => r?,
            sig = stop.recv() => return stopped(sig),
        }
        let auth = format!("Bearer {}", cfg.api_key);
        let models = probe::request(
            &addr,
            "GET",
            "/v1/models",
            &[("authorization", &auth)],
            None,
            Duration::from_secs(5),
        )
        .await?
        .json()?;
        let model = models["data"][0]["id"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        out(&banner(&cfg, &model, args.upstreams.len(), &dir));
        loop {
            tokio::select! {
                sig = stop.recv() => return stopped(sig),
                _ = tokio::time::sleep(SUPERVISE_EVERY) => {
                    if let Some(e) = gateway_exited(&mut gw) {
                        return Err(e);
                    }
                }
            }
        }
    }
    .await;
    if let Err(e) = &result {
        say(format!("error: {e}"));
    }
    say("stopping");
    let how = gw.stop(STOP_GRACE).await;
    say(format!("{}: {how}", gw.name));
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        say(format!("logs kept in {}", dir.display()));
    }
    result
}
