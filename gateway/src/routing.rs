//! The gateway's side of routing: the prefix index and the policy behind one lock, and a
//! bounded log of recent decisions for the admin API.

use parking_lot::Mutex;
use router_policy::{
    ClusterView, Decision, Policy, PolicyConfig, PrefixIndex, RouteError, RouteRequest,
};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;
use warmpath_core::{BlockHash, Epoch, KvStreamMessage, Millis, Observation, ReplicaId, SeqNo};

struct Inner {
    policy: Box<dyn Policy>,
    index: PrefixIndex,
}

/// Index + policy + decision log.
pub struct Router {
    inner: Mutex<Inner>,
    log: Mutex<VecDeque<DecisionRecord>>,
    log_cap: usize,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("policy", &self.policy_name())
            .finish()
    }
}

/// One routing decision as the admin API shows it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DecisionRecord {
    /// Request id (the `x-request-id` value, shared with the request's headers).
    #[serde(serialize_with = "serialize_header")]
    pub request_id: http::HeaderValue,
    /// Unix time, milliseconds.
    pub unix_ms: u64,
    /// Tenant id.
    #[serde(serialize_with = "serialize_str")]
    pub tenant: Arc<str>,
    /// Model requested.
    #[serde(serialize_with = "serialize_str")]
    pub model: Arc<str>,
    /// The client's API: `chat`, `completions`, `responses`, `messages` (those two routed as
    /// the chat they are translated to), `embeddings`, `tokenize`, `detokenize`.
    pub endpoint: &'static str,
    /// Prompt length.
    pub prompt_tokens: u32,
    /// Full blocks hashed.
    pub blocks: usize,
    /// Time spent tokenizing + hashing, microseconds.
    pub prepare_us: u64,
    /// Time spent in the policy, microseconds.
    pub select_us: u64,
    /// The decision with its explanation (shared with the request's plan, not copied).
    #[serde(serialize_with = "serialize_shared")]
    pub decision: Arc<Decision>,
    /// Its flow control class (`interactive`, `batch`).
    pub class: &'static str,
    /// How long it waited in its tenant's flow queue for a slot, milliseconds (why it
    /// waited: every replica it could use was at `admission.max_in_flight_per_replica`).
    pub queued_ms: u64,
    /// Why it was refused after this decision, so it reached no replica: the error code
    /// (`deadline_unmeetable`, `tenant_queue_full`, `overloaded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shed: Option<&'static str>,
    /// The stream's seams: each time it moved to another replica mid-stream.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub migrations: Vec<Seam>,
}

/// One seam of a migrated stream, as the decision log shows it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Seam {
    /// The replica that failed (`r0`, ...).
    pub from: String,
    /// What failed (Pingora's error type).
    pub error: &'static str,
    /// Tokens the continuation carried.
    pub tokens: usize,
    /// Bytes of text the client held.
    pub text_bytes: u64,
}

fn serialize_header<S: serde::Serializer>(v: &http::HeaderValue, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.to_str().unwrap_or_default())
}

fn serialize_str<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

fn serialize_shared<S: serde::Serializer>(d: &Arc<Decision>, s: S) -> Result<S::Ok, S::Error> {
    d.as_ref().serialize(s)
}

impl Router {
    /// A router running `policy`, keeping `log_cap` recent decisions.
    pub fn new(policy: &PolicyConfig, log_cap: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                policy: policy.build(),
                index: PrefixIndex::default(),
            }),
            log: Mutex::new(VecDeque::with_capacity(log_cap.min(4096))),
            log_cap,
        }
    }

    /// Replaces the policy (config reload); the index is kept.
    pub(crate) fn set_policy(&self, policy: &PolicyConfig) {
        self.inner.lock().policy = policy.build();
    }

    /// The running policy's name.
    pub(crate) fn policy_name(&self) -> &'static str {
        self.inner.lock().policy.name()
    }

    /// Folds one KV stream message of `replica` into the index.
    pub fn apply_message(&self, replica: ReplicaId, msg: &KvStreamMessage) -> Observation {
        self.inner.lock().index.apply_message(replica, msg)
    }

    /// Where `replica`'s event stream should resume.
    pub(crate) fn cursor(&self, replica: ReplicaId) -> Option<(Epoch, SeqNo)> {
        self.inner.lock().index.cursor(replica)
    }

    /// Blocks the index believes `replica` holds (events only).
    pub(crate) fn precise_blocks(&self, replica: ReplicaId) -> usize {
        self.inner.lock().index.precise_blocks(replica)
    }

    /// Per replica, the leading blocks of `hashes` the index says it holds at `now`.
    pub(crate) fn match_prefix(
        &self,
        hashes: &[BlockHash],
        now: Millis,
    ) -> router_policy::PrefixMatches {
        self.inner.lock().index.match_prefix(hashes, now)
    }

    /// Drops everything known about a replica.
    pub(crate) fn forget_replica(&self, replica: ReplicaId) {
        self.inner.lock().index.remove_replica(replica);
    }

    /// Runs the policy.
    pub fn select(
        &self,
        req: &RouteRequest<'_>,
        view: &ClusterView,
    ) -> Result<Decision, RouteError> {
        let mut g = self.inner.lock();
        let Inner { policy, index } = &mut *g;
        policy.select(req, view, index)
    }

    /// Runs the policy for a pool that may split prefill and decode
    /// ([`router_policy::disagg::select`]; without `prefill` replicas it is [`Router::select`]).
    pub(crate) fn select_split(
        &self,
        cfg: &router_policy::DisaggConfig,
        req: &RouteRequest<'_>,
        view: &ClusterView,
    ) -> Result<Decision, RouteError> {
        let mut g = self.inner.lock();
        let Inner { policy, index } = &mut *g;
        router_policy::disagg::select(policy.as_mut(), cfg, req, view, index)
    }

    /// Takes back what the policy counted for `decision`, whose request was not sent
    /// ([`router_policy::Policy::withdraw`]).
    pub(crate) fn withdraw(&self, decision: &Decision, now: Millis) {
        self.inner.lock().policy.withdraw(decision, now);
    }

    /// Records the final choice in the approximate index.
    pub(crate) fn record_routed(&self, replica: ReplicaId, hashes: &[BlockHash], now: Millis) {
        self.inner.lock().index.record_routed(replica, hashes, now);
    }

    /// Appends to the decision log.
    pub(crate) fn log_decision(&self, rec: DecisionRecord) {
        if self.log_cap == 0 {
            return;
        }
        let mut log = self.log.lock();
        if log.len() >= self.log_cap {
            log.pop_front();
        }
        log.push_back(rec);
    }

    /// Adds a seam to a logged decision (found by request id, newest first).
    pub(crate) fn note_seam(&self, request_id: &http::HeaderValue, seam: Seam) {
        let mut log = self.log.lock();
        if let Some(rec) = log.iter_mut().rev().find(|r| r.request_id == request_id) {
            rec.migrations.push(seam);
        }
    }

    /// Recent decisions, newest last.
    pub(crate) fn recent(&self, limit: usize) -> Vec<DecisionRecord> {
        let log = self.log.lock();
        let skip = log.len().saturating_sub(limit);
        log.iter().skip(skip).cloned().collect()
    }

    /// Index statistics.
    pub(crate) fn index_stats(&self) -> router_policy::IndexStats {
        self.inner.lock().index.stats()
    }
}
