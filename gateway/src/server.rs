//! Assembling and running the gateway: the control-plane runtime, initial replica
//! registration, SIGHUP reload, and the Pingora server with the proxy and admin services.

use crate::admin::Admin;
use crate::config::{Config, Overrides};
use crate::control::register::register_with_retry;
use crate::control::reload::reload_on_sighup;
use crate::proxy::accept::conn_cap::{Caps, ConnectionCap};
use crate::proxy::accept::connection::{self, Guards};
use crate::proxy::accept::deadline::Limits;
use crate::proxy::accept::head::HeadLimits;
use crate::proxy::drain;
use crate::proxy::service::Gateway;
use crate::proxy::upstream;
use crate::state::AppState;
use pingora_core::apps::http_app::HttpServer;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::{RunArgs, Server};
use pingora_core::services::listening::Service;
use pingora_proxy::ProxyServiceBuilder;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Runs the gateway until a shutdown signal (SIGTERM drains in-flight requests for up to
/// `shutdown_grace_s`, and exits as soon as none is left).
pub fn run(cfg: Config, path: Option<PathBuf>, overrides: Overrides) -> anyhow::Result<()> {
    let (control, state) = start_control(&cfg, path, overrides)?;

    let conf = ServerConf {
        threads: cfg.threads,
        grace_period_seconds: Some(cfg.shutdown_grace_s),
        // Streams still running have been ended at the grace period's end
        // (`crate::proxy::drain`): what is left is torn down at once.
        graceful_shutdown_timeout_seconds: Some(1),
        // One extra try for a stale pooled upstream connection; a stream's migrations are
        // tries too (a reload raising `retry.max_migrations` is bounded by the start's).
        max_retries: (cfg.retry.max_attempts + cfg.retry.max_migrations) as usize + 1,
        upstream_keepalive_pool_size: 1024,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    // Outermost first: the connection caps, then the header deadline and bounds, then the proxy
    // (`crate::proxy::accept`); upstream connections send each request in one write
    // (`crate::proxy::upstream`).
    let guards = Arc::new(Guards {
        cap: ConnectionCap::new(
            {
                let state = state.clone();
                Box::new(move || {
                    let l = &state.config().limits;
                    Caps {
                        per_ip: l.max_connections_per_ip,
                        total: l.max_connections,
                    }
                })
            },
            {
                let state = state.clone();
                Box::new(move || state.metrics.connections_refused.inc())
            },
        ),
        header_limits: {
            let state = state.clone();
            Box::new(move || {
                let cfg = state.config();
                Limits {
                    deadline: Duration::from_millis(cfg.timeouts.client_read_ms),
                    head: HeadLimits {
                        max_bytes: cfg.limits.max_header_bytes,
                        max_headers: cfg.limits.max_headers,
                    },
                }
            })
        },
    });
    control.spawn(drain::on_sigterm(
        Duration::from_secs(cfg.shutdown_grace_s),
        {
            let guards = guards.clone();
            move || guards.cap.open()
        },
    ));
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
    if cfg.admin_open() {
        // Config validation allows this only on a loopback address.
        tracing::warn!(
            admin_listen = %cfg.admin_listen,
            "no admin.key_sha256: the admin API, /metrics and the dashboard are open to \
             every local process; set an admin key before sharing this machine"
        );
    }
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

/// The control plane and the shared state, as both modes start them (the gateway and the
/// Endpoint Picker, [`crate::epp`]): its runtime, the fleet's state, replica registration,
/// rollouts, SIGHUP reload and the shared routing history.
pub(crate) fn start_control(
    cfg: &Config,
    path: Option<PathBuf>,
    overrides: Overrides,
) -> anyhow::Result<(tokio::runtime::Runtime, Arc<AppState>)> {
    let control = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("warmpath-control")
        .enable_all()
        .build()?;
    if cfg.state.backend == crate::config::StateBackend::Redis {
        crate::fleet::preflight::at_start(&cfg.state, control.handle())?;
    }
    let state = AppState::new(cfg.clone(), control.handle().clone());
    for target in cfg.targets() {
        register_with_retry(state.clone(), target);
    }
    crate::control::discovery::start_all(&state);
    for m in state.rollouts.all() {
        crate::rollout::prewarm::start(&state, m);
    }
    crate::rollout::fleet::follow(&state);
    control.spawn(reload_on_sighup(state.clone(), path, overrides));
    crate::control::history::spawn(&state);
    Ok((control, state))
}
