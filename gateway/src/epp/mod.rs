//! The Endpoint Picker mode (`gateway epp`): Warmpath's router behind Envoy Gateway,
//! kgateway, Istio or any data plane that speaks the Gateway API Inference Extension's
//! Endpoint Picker protocol over Envoy's external processing (ext_proc) gRPC service.
//!
//! The same process as the gateway minus its proxy: the same config file, control plane
//! (registration, KV event followers, load polling, health probes, SIGHUP reload), tenants
//! and limits, tokenizer, block hashing, policy and prefix index, decision log, metrics and
//! dashboard on the admin listener. Where the gateway forwards a request itself, the picker
//! answers Envoy with the endpoints in try order (`x-gateway-destination-endpoint` and the
//! `envoy.lb` metadata), and follows the response Envoy relays back to settle the tenant's
//! tokens and learn the cached tokens the engine reported.
//!
//! - [`wire`]: the protocol's names and messages.
//! - [`pick`]: one decision, through the gateway's own phases.
//! - [`stream`]: one ext_proc stream as a state machine per body mode.
//! - [`follow`]: the response side and the settlement.

pub(crate) mod follow;
pub(crate) mod pick;
pub(crate) mod stream;
pub(crate) mod wire;

use crate::admin::Admin;
use crate::config::{Config, Overrides};
use crate::state::AppState;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use pingora_core::apps::http_app::HttpServer;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::{RunArgs, Server};
use pingora_core::services::listening::Service;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// The ext_proc service over the shared state.
#[derive(Debug, Clone)]
pub(crate) struct Picker {
    state: Arc<AppState>,
}

type Answers = Pin<Box<dyn tokio_stream::Stream<Item = Result<ProcessingResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalProcessor for Picker {
    type ProcessStream = Answers;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        // Envoy answers one message at a time on the request path; a few answers queued
        // (the headers', then a body's chunks) is all a stream ever holds.
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(stream::run(self.state.clone(), request.into_inner(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Serves the ext_proc service and the gRPC health service on `listener` until the
/// process ends.
async fn serve_grpc(state: Arc<AppState>, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    for name in [
        "liveness",
        "readiness",
        "envoy.service.ext_proc.v3.ExternalProcessor",
    ] {
        reporter
            .set_service_status(name, tonic_health::ServingStatus::Serving)
            .await;
    }
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(ExternalProcessorServer::new(Picker { state }))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await?;
    Ok(())
}

/// Runs the Endpoint Picker until a shutdown signal: the control plane, the ext_proc
/// server on `epp.listen`, the admin listener (dashboard, metrics, decision log).
pub fn run(cfg: Config, path: Option<PathBuf>, overrides: Overrides) -> anyhow::Result<()> {
    let (control, state) = crate::server::start_control(&cfg, path, overrides)?;
    let grpc = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .thread_name("warmpath-epp")
        .enable_all()
        .build()?;
    let listener = grpc.block_on(tokio::net::TcpListener::bind(&cfg.epp.listen))?;
    let grpc_state = state.clone();
    grpc.spawn(async move {
        if let Err(e) = serve_grpc(grpc_state, listener).await {
            tracing::error!("ext_proc server stopped: {e}");
        }
    });
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut admin = Service::new(
        "warmpath-admin".to_string(),
        HttpServer::new_app(Admin::new(state.clone())),
    );
    admin.add_tcp(&cfg.admin_listen);
    server.add_service(admin);
    println!(
        "epp listening on {} (admin {})",
        cfg.epp.listen, cfg.admin_listen
    );
    crate::logging::serving(true);
    server.run(RunArgs::default());
    crate::logging::serving(false);
    drop(grpc);
    drop(control);
    std::process::exit(0)
}
