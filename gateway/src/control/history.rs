//! Following the fleet's shared routing history ([`crate::fleet::history`]): every
//! `state.history_poll_ms`, the other gateways' decisions go into this gateway's
//! approximate index, for the replicas it knows by the same URL.

use crate::state::AppState;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Starts the follower when state is shared and `state.share_routing` is on.
pub(crate) fn spawn(state: &Arc<AppState>) {
    let Some(fleet) = state.fleet.clone() else {
        return;
    };
    if !fleet.config().share_routing {
        return;
    }
    let state = state.clone();
    let every = Duration::from_millis(fleet.config().history_poll_ms);
    state.control.clone().spawn(async move {
        let mut cursor = crate::fleet::history::Cursor::default();
        loop {
            tokio::time::sleep(every).await;
            let Some(batch) = fleet.read_routes(&mut cursor).await else {
                continue;
            };
            if batch.is_empty() {
                continue;
            }
            let ids: HashMap<String, _> = state
                .registry
                .all()
                .iter()
                .map(|r| (r.addr.url(), r.id))
                .collect();
            let now = state.now_millis();
            for (url, hashes) in batch {
                if let Some(id) = ids.get(&url) {
                    state.router.record_routed(*id, &hashes, now);
                }
            }
        }
    });
}
