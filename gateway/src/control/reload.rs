//! Reloading the configuration without dropping requests: on SIGHUP the file is read
//! again, the command line applied on top, and the result swapped in.

use super::register::add_target;
use crate::config::{load, Config, Overrides};
use crate::state::AppState;
use crate::tenants::TenantTable;
use std::path::PathBuf;
use std::sync::Arc;

/// Applies a new validated config without dropping requests: tenants (limiter state kept
/// where unchanged), policy, limits, and upstreams (new URLs of `replicas` and every pool
/// added, missing ones drained). An upstream that stays keeps what it registered with
/// (its pool's tokenizer, models and checkpoint): remove and re-add it to change those.
pub(crate) async fn reload(state: &Arc<AppState>, mut new: Config) {
    let old = state.config();
    if new.state != old.state {
        // The fleet's Redis connection is made once; tenants' fallback shares follow it.
        tracing::warn!("`state` cannot change on reload; restart to apply it (kept as it was)");
        new.state = old.state.clone();
    }
    if new.listen != old.listen
        || new.admin_listen != old.admin_listen
        || new.threads != old.threads
        || new.limits.max_requests_per_connection != old.limits.max_requests_per_connection
    {
        tracing::warn!(
            "listen addresses, threads and limits.max_requests_per_connection cannot change \
             on reload; restart to apply them"
        );
    }
    super::discovery::warn_on_reload(&old, &new);
    state.set_tenants(TenantTable::build(&new, Some(&state.tenants())));
    if new.policy != old.policy {
        state.router.set_policy(&new.policy);
    }
    let started = state.rollouts.apply_config(&new.rollouts, &old.rollouts);
    let targets = new.targets();
    let old_targets = old.targets();
    state.set_config(new);
    for m in started {
        crate::rollout::prewarm::start(state, m);
    }
    for t in &targets {
        let known = state
            .registry
            .all()
            .iter()
            .any(|r| r.addr.url() == t.normalized_url());
        if !known {
            if let Err(e) = add_target(state, t).await {
                tracing::warn!(url = %t.url, error = %e, "reload: cannot add replica");
            }
        }
    }
    for r in state.registry.all() {
        if !old_targets
            .iter()
            .any(|t| t.normalized_url() == r.addr.url())
        {
            continue; // added through the admin API: keep it
        }
        if !targets.iter().any(|t| t.normalized_url() == r.addr.url()) {
            tracing::info!(replica = %r.id, "reload: draining replica removed from config");
            state.registry.drain(r.id);
        }
    }
    tracing::info!("configuration reloaded");
}

/// Reloads on every SIGHUP; a config that does not validate is logged and ignored.
pub(crate) async fn reload_on_sighup(state: Arc<AppState>, path: Option<PathBuf>, o: Overrides) {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::warn!("cannot install the SIGHUP handler; reload disabled");
        return;
    };
    while hup.recv().await.is_some() {
        match load(path.as_ref(), &o) {
            Ok(cfg) => reload(&state, cfg).await,
            Err(e) => tracing::error!(error = %e, "reload rejected; keeping the running config"),
        }
    }
}
