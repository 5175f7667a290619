//! Keeps the replica set in step with a discovery source: an address that is listed ready
//! is registered through the same path as a configured upstream ([`add_target`]: info or
//! models, tokenizer, then its KV event follower, load poller and health prober); one that
//! is listed but not ready is not registered, or, registered, drained (no new requests,
//! index entries kept) and un-drained when it is ready again; one that leaves is drained, and removed ([`remove_replica`]:
//! out of the index and the dashboard, its tasks stopped) once its in-flight requests
//! have finished.

use super::endpoints::{EndpointSet, Readiness};
use crate::config::{PoolConfig, Target};
use crate::control::register::{add_target, remove_replica, RegisterError};
use crate::replicas::Replica;
use crate::state::AppState;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the set is looked at again without a change from the source: failed
/// registrations are retried and leaving replicas whose last request finished removed.
const RECHECK: Duration = Duration::from_millis(200);
/// Backoff bounds of a registration that fails (a pod listed before its server answers).
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

type Joining = JoinHandle<Result<Arc<Replica>, RegisterError>>;

/// What the reconciler knows of one discovered address.
struct Member {
    /// A registration in progress.
    joining: Option<Joining>,
    /// When a failed registration may be tried again.
    next_try: Instant,
    retry: Duration,
    /// Its readiness the last time the source listed it.
    readiness: Readiness,
    /// The reconciler drained it (not ready, or gone): it may un-drain it again. A replica
    /// drained through the admin API stays drained.
    drained_by_us: bool,
}

impl Member {
    fn new(readiness: Readiness) -> Self {
        Self {
            joining: None,
            next_try: Instant::now(),
            retry: RETRY_MIN,
            readiness,
            drained_by_us: false,
        }
    }
}

/// Applies every set `rx` publishes to the replica set of `pool`, until the source ends.
pub(crate) async fn reconcile(
    state: Arc<AppState>,
    pool: PoolConfig,
    mut rx: watch::Receiver<EndpointSet>,
) {
    let mut members: HashMap<SocketAddr, Member> = HashMap::new();
    let mut tick = tokio::time::interval(RECHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
        let desired = rx.borrow_and_update().clone();
        apply(&state, &pool, &desired, &mut members).await;
    }
}

fn drain(r: &Replica, m: &mut Member, why: &str) {
    if !r.draining.swap(true, Ordering::AcqRel) {
        m.drained_by_us = true;
        tracing::info!(replica = %r.id, url = %r.addr.url(), "discovery: {why}: draining");
    }
}

/// One pass: finished registrations, then every listed address, then those that left.
async fn apply(
    state: &Arc<AppState>,
    pool: &PoolConfig,
    desired: &EndpointSet,
    members: &mut HashMap<SocketAddr, Member>,
) {
    let now = Instant::now();
    for (addr, m) in members.iter_mut() {
        let Some(j) = m.joining.take_if(|j| j.is_finished()) else {
            continue;
        };
        match j.await {
            Ok(Ok(r)) => {
                m.retry = RETRY_MIN;
                tracing::info!(pool = %pool.name, replica = %r.id, %addr, "discovery: joined");
                if m.readiness != Readiness::Ready {
                    drain(&r, m, "not ready since it was listed");
                }
            }
            Ok(Err(RegisterError::Duplicate(_))) => {}
            Ok(Err(e)) => {
                tracing::debug!(pool = %pool.name, %addr, error = %e, "discovery: registration failed; retrying");
                m.next_try = now + m.retry;
                m.retry = (m.retry * 2).min(RETRY_MAX);
            }
            Err(e) => tracing::warn!(%addr, error = %e, "discovery: registration task failed"),
        }
    }
    let registered: HashMap<String, Arc<Replica>> = state
        .registry
        .all()
        .into_iter()
        .map(|r| (r.addr.url(), r))
        .collect();
    let configured: Vec<Target> = state.config().targets();
    for (&addr, &readiness) in desired {
        let url = format!("http://{addr}");
        if configured.iter().any(|t| t.normalized_url() == url) {
            continue; // listed in the config: the config owns it
        }
        let m = members
            .entry(addr)
            .or_insert_with(|| Member::new(readiness));
        if readiness == Readiness::Ready && m.readiness != Readiness::Ready {
            // Became ready: a registration that kept failing while it started is due now.
            m.next_try = now;
            m.retry = RETRY_MIN;
        }
        m.readiness = readiness;
        match registered.get(&url) {
            Some(r) if readiness == Readiness::Ready => {
                if m.drained_by_us && r.draining.swap(false, Ordering::AcqRel) {
                    tracing::info!(replica = %r.id, %url, "discovery: ready again");
                }
                m.drained_by_us = false;
            }
            Some(r) => drain(r, m, "not ready"),
            // Registered only once ready: a starting pod gets no request meanwhile.
            None if readiness == Readiness::Ready && m.joining.is_none() && now >= m.next_try => {
                let target = Target {
                    url: url.clone(),
                    pool: Some(pool.clone()),
                    kv_events: None,
                };
                let st = state.clone();
                m.joining = Some(
                    state
                        .control
                        .spawn(async move { add_target(&st, &target).await }),
                );
            }
            None => {}
        }
    }
    members.retain(|addr, m| {
        if desired.contains_key(addr) {
            return true;
        }
        let url = format!("http://{addr}");
        match registered.get(&url) {
            Some(r) => {
                drain(r, m, "left the pool");
                if r.in_flight() == 0 && remove_replica(state, r.id) {
                    tracing::info!(replica = %r.id, %url, "discovery: left the pool: removed");
                    return m.joining.is_some();
                }
                true
            }
            // Not registered: forget it unless a registration is still under way (the
            // next pass drains and removes what it registers).
            None => m.joining.is_some(),
        }
    });
}
