//! Rollouts shared by a fleet: the admin API of any gateway writes a model's rollout into
//! Redis, and every gateway follows the store by polling one counter (as the key store).
//!
//! # In Redis
//! Under one hash tag (one Cluster slot; every write is one Lua script):
//! - `<prefix>:{rollouts}:all`: hash, model -> the rollout record (JSON, written and read by
//!   `crate::rollout::record`; opaque here);
//! - `<prefix>:{rollouts}:gen`: hash, model -> generation, bumped by every change of the
//!   record (set, pause, resume, abort, end) and kept when the record is deleted: a write
//!   that names an older generation changes nothing (`rollout_write.lua`);
//! - `<prefix>:{rollouts}:rev`: hash, model -> the id of the setting in force;
//! - `<prefix>:{rollouts}:progress`: hash, model -> `"<seq> <JSON>"`, the owner's pre-warm
//!   progress, written only for the setting in force and only forward
//!   (`rollout_progress.lua`);
//! - `<prefix>:{rollouts}:epoch`: counter bumped by every write;
//! - `<prefix>:{rollouts}:store`: the store's random id, set by the first write: a Redis
//!   that lost its data has none (then a new one), so its generations restarting at 1 are
//!   never compared with the old store's (`crate::rollout::resync`).

use super::Fleet;
use std::collections::HashMap;
use std::sync::Arc;

/// What a compare-and-set write of a record did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Written {
    /// Written; the new generation.
    Done(u64),
    /// Not written: the store is at another generation (this one).
    Stale(u64),
    /// Not written: no record to change (the generation now).
    Missing(u64),
}

/// Which store, and how far it is: (the store's id, `None` when it has none; its epoch).
pub(crate) type Stamp = (Option<u64>, u64);

/// Everything the store holds about rollouts, read atomically.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The store's id (`None`: a new store, or one that lost its data).
    pub store: Option<u64>,
    /// Model -> record JSON.
    pub records: HashMap<String, String>,
    /// Model -> generation (ended rollouts included).
    pub gens: HashMap<String, u64>,
    /// Model -> progress JSON.
    pub progress: HashMap<String, String>,
}

impl Fleet {
    fn rollouts_key(&self, what: &str) -> String {
        format!("{}:{{rollouts}}:{what}", self.cfg.key_prefix)
    }

    /// This gateway's tag (16 hex digits), unique in the fleet.
    pub(crate) fn tag(&self) -> &str {
        &self.tag
    }

    fn rollouts_conn(&self) -> Result<super::conn::Conn, String> {
        self.live_conn()
            .ok_or_else(|| "not connected (gateway degraded)".to_string())
    }

    async fn rollouts_call<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<T, String> {
        let conn = self.rollouts_conn()?;
        match super::within(self.background_timeout(1000), conn.invoke(call)).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.failed(&e);
                Err(e)
            }
        }
    }

    /// Writes `model`'s record: `mode` `put` (a new setting `rev`, whatever the generation),
    /// `restore` (a put into a store that lost it), `change` or `delete` (only at
    /// generation `gen`).
    pub(crate) async fn write_rollout(
        self: &Arc<Self>,
        model: &str,
        mode: &str,
        gen: u64,
        rev: u64,
        record: &str,
    ) -> Result<Written, String> {
        let mut call = self.scripts.rollout_write.prepare_invoke();
        call.key(self.rollouts_key("all"))
            .key(self.rollouts_key("gen"))
            .key(self.rollouts_key("rev"))
            .key(self.rollouts_key("progress"))
            .key(self.rollouts_key("epoch"))
            .key(self.rollouts_key("store"))
            .arg(model)
            .arg(mode)
            .arg(gen)
            .arg(rev.to_string())
            .arg(record)
            .arg(rand::random::<u64>().max(1).to_string());
        let (ok, n): (i64, u64) = self.rollouts_call(&call).await?;
        Ok(match ok {
            1 => Written::Done(n),
            0 => Written::Stale(n),
            _ => Written::Missing(n),
        })
    }

    /// Writes the pre-warm progress of setting `rev` of `model`, numbered `seq` by its
    /// owner; false when the setting is no longer in force or a newer progress is stored.
    pub(crate) async fn write_progress(
        self: &Arc<Self>,
        model: &str,
        rev: u64,
        seq: u64,
        progress: &str,
    ) -> Result<bool, String> {
        let mut call = self.scripts.rollout_progress.prepare_invoke();
        call.key(self.rollouts_key("rev"))
            .key(self.rollouts_key("progress"))
            .key(self.rollouts_key("epoch"))
            .arg(model)
            .arg(rev.to_string())
            .arg(seq)
            .arg(progress);
        let n: i64 = self.rollouts_call(&call).await?;
        Ok(n == 1)
    }

    async fn rollouts_pipe<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        pipe: &redis::Pipeline,
    ) -> Result<T, String> {
        let conn = self.rollouts_conn()?;
        match super::within(self.background_timeout(1000), conn.pipeline(pipe)).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.failed(&e);
                Err(e)
            }
        }
    }

    /// Gives a store without an id one (a new store, or one that lost its data and had
    /// nothing to restore).
    pub(crate) async fn ensure_rollout_store(self: &Arc<Self>) -> Result<(), String> {
        let mut pipe = redis::pipe();
        pipe.set_nx(
            self.rollouts_key("store"),
            rand::random::<u64>().max(1).to_string(),
        )
        .ignore();
        self.rollouts_pipe::<()>(&pipe).await
    }

    /// The store when its id or epoch moved past `seen` (with the new stamp); `None` when
    /// neither did, or Redis did not answer.
    pub(crate) async fn read_rollouts(
        self: &Arc<Self>,
        seen: Option<Stamp>,
    ) -> Option<(Stamp, Snapshot)> {
        let mut pipe = redis::pipe();
        pipe.get(self.rollouts_key("store"))
            .get(self.rollouts_key("epoch"));
        let (store, epoch): (Option<u64>, Option<u64>) = self.rollouts_pipe(&pipe).await.ok()?;
        if store.is_some() && seen == Some((store, epoch.unwrap_or(0))) {
            return None;
        }
        let mut pipe = redis::pipe();
        pipe.atomic()
            .get(self.rollouts_key("store"))
            .get(self.rollouts_key("epoch"))
            .hgetall(self.rollouts_key("all"))
            .hgetall(self.rollouts_key("gen"))
            .hgetall(self.rollouts_key("progress"));
        type Read = (
            Option<u64>,
            Option<u64>,
            HashMap<String, String>,
            HashMap<String, u64>,
            HashMap<String, String>,
        );
        let (store, epoch, records, gens, progress): Read = self.rollouts_pipe(&pipe).await.ok()?;
        Some((
            (store, epoch.unwrap_or(0)),
            Snapshot {
                store,
                records,
                gens,
                progress,
            },
        ))
    }
}
