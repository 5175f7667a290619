//! Serving: radix cache, scheduler, HTTP API, KV events. (owner: serving)
//!
//! `replica serve` = [`run`]: load the model on the engine-loop thread ([`worker`]), then
//! serve the OpenAI-compatible API and the control plane ([`http`]) with axum.
//!
//! # Layout
//! - [`args`]: [`ServeArgs`] (the `serve` flags).
//! - [`kv`]: the KV subsystem: page pool, radix prefix cache (block-hash keyed, LRU,
//!   locking; the `warmpath-kv-cache` crate), and every way blocks arrive or leave: KV sources (a prefill replica, the
//!   shared tier in Redis, `--kv-store`) behind one loader, and the tier's writer.
//! - [`sched`]: continuous-batching scheduler (token budget, chunked prefill, preemption).
//! - [`worker`]: the engine loop thread.
//! - [`events`]: KV event log (snapshot, ring, epochs).
//! - [`state`]: [`AppState`], what the handlers share.
//! - [`http`]: handlers (including `POST /v1/kv/prefill`); [`error`]: errors and their
//!   HTTP mapping; [`metrics`]: Prometheus; [`fault`]: test hooks.

pub mod args;
pub mod error;
pub mod events;
pub mod fault;
pub mod http;
pub mod kv;
pub mod metrics;
pub mod sched;
pub mod state;
pub mod worker;

pub use args::{ByteSize, ServeArgs};
pub use error::{ApiError, ServerError};

use events::{random_epoch, EventLog, DEFAULT_RING};
use kv::link::KvLink;
use kv::record::record_layout;
use kv::tier::conn::TierConn;
use kv::tier::mac::TierMac;
use kv::tier::rate::TierRate;
use kv::tier::read::Tier;
use kv::tier::write::{run_writer, TierSink};
use metrics::Metrics;
use state::{unix_now, AppInner, AppState};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use warmpath_core::{BlockSize, Epoch, SCHEME_VERSION};
use warmpath_engine::ModelSource;
use warmpath_protocol::replica_api::ReplicaInfo;
use worker::WorkerConfig;

/// A running server (in-process): its address and a way to stop it.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    epoch: Epoch,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The KV event epoch this server started with.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Stops accepting, waits up to `grace` for open requests, then stops.
    pub async fn shutdown(mut self, grace: Duration) -> Result<(), ServerError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match tokio::time::timeout(grace, &mut self.task).await {
            Ok(Ok(r)) => r.map_err(ServerError::Io),
            Ok(Err(_)) => Err(ServerError::EngineStopped),
            Err(_) => {
                self.task.abort();
                Ok(())
            }
        }
    }

    /// Waits until the server stops by itself.
    pub async fn wait(&mut self) -> Result<(), ServerError> {
        match (&mut self.task).await {
            Ok(r) => r.map_err(ServerError::Io),
            Err(_) => Err(ServerError::EngineStopped),
        }
    }
}

/// Loads the model, binds and starts serving on the current tokio runtime.
pub async fn start(args: ServeArgs) -> Result<ServerHandle, ServerError> {
    args.validate()?;
    let Ok(model) = args.model.parse::<ModelSource>();
    let block_size = BlockSize(args.block_size);
    let epoch = random_epoch();
    let events = Arc::new(EventLog::new(epoch, DEFAULT_RING));
    let metrics = Metrics::new();
    // The shared tier: its write queue goes to the engine loop, its writer starts once the
    // model (and so the record layout) is known.
    let tier = match &args.kv_store {
        Some(url) => {
            let timeout = Duration::from_millis(args.kv_store_timeout_ms);
            let password = args
                .kv_store_password_file
                .as_deref()
                .map(kv::tier::conn::read_password)
                .transpose()?;
            let tls = kv::tier::tls::TlsFiles {
                ca: args.kv_store_ca_file.as_deref(),
                cert: args.kv_store_client_cert_file.as_deref(),
                key: args.kv_store_client_key_file.as_deref(),
            }
            .load()?;
            let conn = TierConn::new(url, password, tls, timeout, metrics.clone())
                .map_err(|e| ServerError::Config(format!("--kv-store {url:?}: {e}")))?;
            let mac = match &args.kv_store_key_file {
                Some(p) => Some(TierMac::load(p).map_err(|e| ServerError::Config(e.to_string()))?),
                None => {
                    tracing::warn!(
                        "KV tier values are unauthenticated: whoever can write to the tier's \
                         Redis can forge KV for any prompt; set --kv-store-key-file \
                         (docs/security.md)"
                    );
                    None
                }
            };
            let (sink, rx) = TierSink::new(args.kv_store_queue.0, metrics.clone());
            Some((conn, sink, rx, timeout, mac))
        }
        None => None,
    };
    let cfg = WorkerConfig {
        model,
        kv_memory: args.kv_memory.0,
        block_size,
        threads: args.threads,
        token_budget: args.token_budget,
        max_running: args.max_running,
        fairness_steps: args.fairness_steps,
        prefill_order: args.prefill_order(),
        step_target: args.step_target()?,
        device: args.device()?,
        fault_nan_logits_after: args.fault_nan_logits_after,
        checkpoint_id: args.checkpoint_id.clone(),
        tier: tier.as_ref().map(|t| t.1.clone()),
    };
    let (facts, submit, shared) = worker::spawn(cfg, events.clone(), metrics.clone()).await?;
    let tier = tier.map(|(conn, sink, rx, timeout, mac)| {
        let layout = record_layout(facts.kv_layout);
        conn.get(); // start connecting now
        let writer = run_writer(rx, conn.clone(), layout, mac.clone(), sink, events.clone());
        tokio::spawn(writer);
        Tier {
            conn,
            timeout,
            rate: TierRate::default(),
            mac,
        }
    });
    let info = ReplicaInfo {
        model: facts.model_name.clone(),
        checkpoint: facts.checkpoint.clone(),
        block_size,
        hash_scheme: SCHEME_VERSION,
        capacity_blocks: facts.kv_pages as u64,
        max_context: facts.max_context as u32,
        region: args.region.clone(),
        device: facts.device.clone(),
        role: args.role,
        kv_store_region: args
            .kv_store
            .as_ref()
            .and(args.kv_store_region.clone().or_else(|| args.region.clone())),
    };
    tracing::info!(
        model = %facts.model_name,
        checkpoint = %facts.checkpoint,
        kv_pages = facts.kv_pages,
        page_bytes = facts.page_bytes,
        role = %args.role,
        epoch = epoch.0,
        "model loaded"
    );
    let kv = KvLink::new(
        submit.clone(),
        facts.checkpoint.clone(),
        block_size.get(),
        facts.kv_layout,
        metrics.clone(),
        Arc::new(kv::LoadBudget::new(args.kv_load_memory.0)),
    );
    // The tier reads furthest ahead of the two sources.
    kv::load::check_budget(&kv, kv::tier::read::READ_AHEAD_BLOCKS).map_err(|need| {
        ServerError::Config(format!(
            "--kv-load-memory {} is less than one KV load of this model needs ({need} bytes)",
            args.kv_load_memory.0
        ))
    })?;
    let trust = kv::TransferTrust::from_file(args.kv_transfer_key_file.as_deref())?;
    if !trust.has_key() && args.role != warmpath_core::ReplicaRole::Both {
        tracing::warn!(
            role = %args.role,
            "no --kv-transfer-key-file: KV transfers only with prefill replicas on loopback, \
             and POST /v1/kv/prefill serves any caller"
        );
    }
    let state: AppState = Arc::new(AppInner {
        facts,
        info,
        block_size: block_size.get(),
        submit,
        events,
        metrics,
        shared,
        started: unix_now(),
        role: args.role,
        kv_transfer_timeout_ms: args.kv_transfer_timeout_ms,
        fault_kv_cut_after_blocks: args.fault_kv_cut_after_blocks,
        kv,
        tier,
        trust,
    });
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let app = http::router(state);
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    tracing::info!(%addr, "listening");
    Ok(ServerHandle {
        addr,
        epoch,
        stop: Some(stop),
        task,
    })
}

/// `replica serve`: builds a runtime, serves until Ctrl-C. Prints `listening on ADDR`.
pub fn run(args: ServeArgs) -> Result<(), ServerError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("http")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut handle = start(args).await?;
        println!("listening on {}", handle.addr());
        let ended = tokio::select! {
            r = handle.wait() => Some(r),
            _ = tokio::signal::ctrl_c() => None,
        };
        match ended {
            Some(r) => r,
            None => {
                tracing::info!("shutting down");
                handle.shutdown(Duration::from_secs(5)).await
            }
        }
    })
}
