//! [`AppState`]: what the HTTP handlers share (the engine loop's channel, model facts,
//! events, metrics, the KV subsystem's handles).

use crate::server::events::EventLog;
use crate::server::kv::link::KvLink;
use crate::server::kv::tier::read::Tier;
use crate::server::metrics::Metrics;
use crate::server::worker::{ModelFacts, WorkerMsg, WorkerShared};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use warmpath_protocol::replica_api::ReplicaInfo;

/// Everything a handler needs.
#[derive(Debug)]
pub struct AppInner {
    /// Facts about the loaded model.
    pub facts: ModelFacts,
    /// Replica info document.
    pub info: ReplicaInfo,
    /// Tokens per block.
    pub block_size: usize,
    /// Channel into the engine loop.
    pub submit: Sender<WorkerMsg>,
    /// KV event log.
    pub events: Arc<EventLog>,
    /// Metrics.
    pub metrics: Metrics,
    /// Engine loop liveness and load.
    pub shared: Arc<WorkerShared>,
    /// Unix seconds at start.
    pub started: u64,
    /// Role in a prefill/decode split.
    pub role: warmpath_core::ReplicaRole,
    /// How long a KV fetch may take (`--kv-transfer-timeout-ms`).
    pub kv_transfer_timeout_ms: u64,
    /// Test hook: cut every KV stream after this many blocks.
    pub fault_kv_cut_after_blocks: Option<u32>,
    /// The KV subsystem's handle on the engine loop (for loads from a KV source).
    pub kv: KvLink,
    /// The shared KV tier (`--kv-store`), when on.
    pub tier: Option<Tier>,
    /// Who may start a KV transfer (`--kv-transfer-key-file`).
    pub trust: crate::server::kv::TransferTrust,
}

/// Shared handler state.
pub type AppState = Arc<AppInner>;

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
