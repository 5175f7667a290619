//! Assembling and running the gateway: the control-plane runtime, initial replica
//! registration, SIGHUP reload, and the Pingora server with the proxy and admin services.

use crate::admin::Admin;
use crate::config::{Config, ConfigError};
use crate::conn_cap::ConnectionCap;
use crate::connection::{self, Guards};
use crate::proxy::Gateway;
use crate::state::AppState;
use crate::upstream;
use pingora_core::apps::http_app::HttpServer;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::{RunArgs, Server};
use pingora_core::services::listening::Service;
use pingora_proxy::ProxyServiceBuilder;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Command-line overrides applied on top of the config file (at start and on reload).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--admin-listen`.
    pub admin_listen: Option<String>,
    /// `--replica` (replaces the file's list when non-empty).
    pub replicas: Vec<String>,
    /// `--policy`.
    pub policy: Option<String>,
    /// `--no-auth`.
    pub no_auth: bool,
}

/// Loads the file (or defaults), applies `overrides`, validates.
pub fn load(path: Option<&PathBuf>, o: &Overrides) -> Result<Config, ConfigError> {
    let mut cfg = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.display().to_string(),
                source,
            })?;
            Config::from_yaml(&text)?
        }
        None => Config::default(),
    };
    if let Some(l) = &o.listen {
        cfg.listen = l.clone();
    }
    if let Some(l) = &o.admin_listen {
        cfg.admin_listen = l.clone();
    }
    if !o.replicas.is_empty() {
        cfg.replicas = o.replicas.clone();
    }
    if let Some(p) = &o.policy {
        cfg.policy =
            router_policy::PolicyConfig::from_name(p).map_err(|e| ConfigError::Invalid {
                key: "policy".into(),
                reason: e.to_string(),
            })?;
    }
    if o.no_auth {
        cfg.auth.enabled = false;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Registers `url`, retrying in the background until it succeeds or leaves the config.
fn register_with_retry(state: Arc<AppState>, url: String) {
    let control = state.control.clone();
    control.spawn(async move {
        let mut delay = Duration::from_millis(200);
        loop {
            match state.add_replica(&url).await {
                Ok(_) => return,
                Err(crate::replicas::RegisterError::Duplicate(_)) => return,
                Err(e) => tracing::warn!(%url, error = %e, "replica registration failed; retrying"),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
            if !state.config().replicas.iter().any(|u| u == &url) {
                return;
            }
        }
    });
}

async fn reload_on_sighup(state: Arc<AppState>, path: Option<PathBuf>, o: Overrides) {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::warn!("cannot install the SIGHUP handler; reload disabled");
        return;
    };
    while hup.recv().await.is_some() {
        match load(path.as_ref(), &o) {
            Ok(cfg) => state.reload(cfg).await,
            Err(e) => tracing::error!(error = %e, "reload rejected; keeping the running config"),
        }
    }
}

/// Runs the gateway until a shutdown signal (SIGTERM drains in-flight requests for up to
/// `shutdown_grace_s`).
pub fn run(cfg: Config, path: Option<PathBuf>, overrides: Overrides) -> anyhow::Result<()> {
    let control = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("warmpath-control")
        .enable_all()
        .build()?;
    let state = AppState::new(cfg.clone(), control.handle().clone());
    for url in &cfg.replicas {
        register_with_retry(state.clone(), url.clone());
    }
    control.spawn(reload_on_sighup(state.clone(), path, overrides));

    let conf = ServerConf {
        threads: cfg.threads,
        grace_period_seconds: Some(cfg.shutdown_grace_s),
        graceful_shutdown_timeout_seconds: Some(5),
        // One extra try for a stale pooled upstream connection.
        max_retries: cfg.retry.max_attempts as usize + 1,
        upstream_keepalive_pool_size: 1024,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    // Outermost first: the per-IP cap, then the header deadline, then the proxy
    // (`crate::connection`); upstream connections send each request in one write
    // (`crate::upstream`).
    let guards = Arc::new(Guards {
        cap: ConnectionCap::new(
            {
                let state = state.clone();
                Box::new(move || state.config().limits.max_connections_per_ip)
            },
            {
                let state = state.clone();
                Box::new(move || state.metrics.connections_refused.inc())
            },
        ),
        header_limit: {
            let state = state.clone();
            Box::new(move || Duration::from_millis(state.config().timeouts.client_read_ms))
        },
    });
    let mut proxy = ProxyServiceBuilder::new(&server.configuration, Gateway::new(state.clone()))
        .name("warmpath-gateway")
        .custom(upstream::Connector::new(), connection::handler(guards))
        .server_options(connection::server_options(
            cfg.limits.max_requests_per_connection,
        ))
        .build();
    proxy.add_tcp(&cfg.listen);
    let mut admin = Service::new(
        "warmpath-admin".to_string(),
        HttpServer::new_app(Admin::new(state.clone())),
    );
    admin.add_tcp(&cfg.admin_listen);
    server.add_service(proxy);
    server.add_service(admin);
    println!("listening on {} (admin {})", cfg.listen, cfg.admin_listen);
    crate::logging::serving(true);
    // `run` returns once Pingora has stopped (either signal), so batched log lines are
    // written before the process exits; `run_forever` would exit inside Pingora.
    server.run(RunArgs::default());
    crate::logging::serving(false);
    std::process::exit(0)
}
