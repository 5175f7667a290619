//! Rollouts shared by a fleet: the admin API of any gateway writes a model's rollout into
//! Redis, and every gateway follows the store by polling one counter (as the key store).
//!
//! # In Redis
//! Under one hash tag (one Cluster slot, atomic pipelines):
//! - `<prefix>:{rollouts}:all`: hash, model -> the rollout record (JSON, written and read by
//!   `crate::rollout::fleet`; opaque here);
//! - `<prefix>:{rollouts}:epoch`: counter bumped by every change.

use super::Fleet;
use std::collections::HashMap;
use std::sync::Arc;

impl Fleet {
    fn rollouts_key(&self, what: &str) -> String {
        format!("{}:{{rollouts}}:{what}", self.cfg.key_prefix)
    }

    /// This gateway's tag (16 hex digits), unique in the fleet.
    pub(crate) fn tag(&self) -> &str {
        &self.tag
    }

    async fn rollouts_pipe<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        pipe: &redis::Pipeline,
    ) -> Result<T, String> {
        let conn = self
            .live_conn()
            .ok_or_else(|| "not connected (gateway degraded)".to_string())?;
        match super::within(self.background_timeout(1000), conn.pipeline(pipe)).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.failed(&e);
                Err(e)
            }
        }
    }

    /// Writes `model`'s rollout record and bumps the epoch, atomically.
    pub(crate) async fn put_rollout(
        self: &Arc<Self>,
        model: &str,
        record: &str,
    ) -> Result<(), String> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(self.rollouts_key("all"), model, record)
            .ignore()
            .incr(self.rollouts_key("epoch"), 1)
            .ignore();
        self.rollouts_pipe(&pipe).await
    }

    /// Deletes `model`'s rollout record and bumps the epoch.
    pub(crate) async fn delete_rollout(self: &Arc<Self>, model: &str) -> Result<(), String> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(self.rollouts_key("all"), model)
            .ignore()
            .incr(self.rollouts_key("epoch"), 1)
            .ignore();
        self.rollouts_pipe(&pipe).await
    }

    /// The records when the epoch moved past `seen` (with the new epoch); `None` when it
    /// did not, or Redis did not answer.
    pub(crate) async fn read_rollouts(
        self: &Arc<Self>,
        seen: Option<u64>,
    ) -> Option<(u64, HashMap<String, String>)> {
        let mut pipe = redis::pipe();
        pipe.get(self.rollouts_key("epoch"));
        let (epoch,): (Option<u64>,) = self.rollouts_pipe(&pipe).await.ok()?;
        let epoch = epoch.unwrap_or(0);
        if seen == Some(epoch) {
            return None;
        }
        let mut pipe = redis::pipe();
        pipe.atomic()
            .get(self.rollouts_key("epoch"))
            .hgetall(self.rollouts_key("all"));
        let (epoch, all): (Option<u64>, HashMap<String, String>) =
            self.rollouts_pipe(&pipe).await.ok()?;
        Some((epoch.unwrap_or(0), all))
    }
}
