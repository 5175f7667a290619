//! Responses API records in Redis (`{key_prefix}:{tenant}:resp:{id}`, with a TTL: a
//! tenant finds only its own), so a follow-up
//! naming a response (`previous_response_id`) is found by any gateway of the fleet, not
//! only the one that produced it. Off the request path when writing; a read is one `GET`
//! within `state.timeout_ms`, skipped while degraded (the follow-up then finds only what
//! this gateway keeps itself).

use super::{within, Fleet};
use std::sync::Arc;
use std::time::Duration;

impl Fleet {
    fn response_key(&self, tenant: &str, id: &str) -> String {
        self.key(tenant, &format!("resp:{id}"))
    }

    /// Writes a response's record in the background; a failure marks the gateway
    /// degraded as any other call does.
    pub(crate) fn put_response(
        self: &Arc<Self>,
        tenant: &str,
        id: &str,
        record: Vec<u8>,
        ttl: Duration,
    ) {
        let Some(conn) = self.live_conn() else {
            return;
        };
        let key = self.response_key(tenant, id);
        let fleet = self.clone();
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.handle.spawn(async move {
            let mut cmd = redis::cmd("SET");
            cmd.arg(&key).arg(record).arg("PX").arg(ms);
            let limit = fleet.background_timeout(1000);
            if let Err(e) = within(limit, conn.query::<()>(&cmd)).await {
                fleet.failed(&e);
            }
        });
    }

    /// A tenant's response record, when Redis has it.
    pub(crate) async fn get_response(self: &Arc<Self>, tenant: &str, id: &str) -> Option<Vec<u8>> {
        let conn = self.live_conn()?;
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.response_key(tenant, id));
        match within(self.timeout(), conn.query::<Option<Vec<u8>>>(&cmd)).await {
            Ok(v) => v,
            Err(e) => {
                self.failed(&e);
                None
            }
        }
    }
}
