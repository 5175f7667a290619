//! Discovery: a pool's upstreams join and leave the replica set by themselves, from the
//! Kubernetes API or DNS (`pools[].discovery`, [`crate::config::DiscoveryConfig`]).
//!
//! A source publishes the whole set of addresses it knows, each ready or not, into a
//! `tokio::sync::watch` channel; the reconciler ([`members`]) applies each set to the
//! replica set through the paths the config and the admin API use (register, drain,
//! remove), so the prefix index, health checks, metrics and the dashboard see every join
//! and leave. The gateway starts it for each pool at start ([`start_all`]); another mode
//! that keeps an [`AppState`] (the EPP) calls [`start`] for the pools it serves.
//!
//! # Layout
//! - [`endpoints`]: the set a source publishes; EndpointSlices and pods to that set.
//! - [`kubernetes`]: the Kubernetes source (kube-runtime's watcher: list, watch, relist).
//! - [`dns`]: the DNS source (resolve again every interval), behind a resolver trait.
//! - [`members`]: the reconciler.

pub(crate) mod dns;
pub(crate) mod endpoints;
pub(crate) mod kubernetes;
pub(crate) mod members;

use crate::config::{Config, DiscoveryConfig, PoolConfig};
use crate::state::AppState;
use endpoints::EndpointSet;
use std::sync::Arc;
use tokio::sync::watch;

/// Starts following `pool`'s discovery source on the control-plane runtime, and the
/// reconciler that applies it to `state.registry`. Returns false when the pool has no
/// `discovery`. Both tasks run for the life of the process.
pub(crate) fn start(state: &Arc<AppState>, pool: &PoolConfig) -> bool {
    let Some(d) = &pool.discovery else {
        return false;
    };
    let (tx, rx) = watch::channel(EndpointSet::new());
    let name = pool.name.clone();
    match d {
        DiscoveryConfig::Kubernetes(k) => {
            tracing::info!(pool = %name, "discovery: following the Kubernetes API");
            state.control.spawn(kubernetes::follow(name, k.clone(), tx));
        }
        DiscoveryConfig::Dns(d) => {
            tracing::info!(pool = %name, dns = %d.name, "discovery: following DNS");
            let resolver = Arc::new(dns::SystemResolver);
            state
                .control
                .spawn(dns::follow(name, d.clone(), resolver, tx));
        }
    }
    state
        .control
        .spawn(members::reconcile(state.clone(), pool.clone(), rx));
    true
}

/// Starts discovery for every pool of the running config that has it.
pub(crate) fn start_all(state: &Arc<AppState>) {
    for pool in &state.config().pools {
        start(state, pool);
    }
}

/// A reload does not restart discovery: says so when the new config changes it.
pub(crate) fn warn_on_reload(old: &Config, new: &Config) {
    let of = |c: &Config| -> Vec<(String, Option<DiscoveryConfig>)> {
        c.pools
            .iter()
            .filter(|p| p.discovery.is_some())
            .map(|p| (p.name.clone(), p.discovery.clone()))
            .collect()
    };
    if of(old) != of(new) {
        tracing::warn!("pools[].discovery cannot change on reload; restart to apply it");
    }
}
