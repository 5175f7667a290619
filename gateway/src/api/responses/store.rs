//! What the gateway keeps of each response it produced, so a follow-up naming it
//! (`previous_response_id`) can be expanded to the whole conversation and sent to the
//! replica that holds its prefix: the conversation as chat messages (earlier turns, the
//! input, the output; never `instructions`, which are not carried over), and the replica
//! that served it. Bounded ([`CAPACITY`] records, least recently used evicted) and each
//! record lives [`TTL`]. With shared state, every record is also written to Redis (same
//! TTL) and read from there on a local miss, so any gateway of a fleet finds it
//! (`crate::fleet::responses`).

use crate::fleet::Fleet;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records kept in this gateway's memory.
pub(crate) const CAPACITY: usize = 10_000;
/// How long a record is kept (here and in Redis).
pub(crate) const TTL: Duration = Duration::from_secs(3600);

/// One response, as a follow-up needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Model that produced it.
    pub model: String,
    /// The whole conversation through this response, as chat messages (no system message
    /// from `instructions`).
    pub messages: Vec<serde_json::Value>,
    /// The replica that served it (its URL, the same on every gateway).
    pub replica: String,
}

/// The gateway's records, in memory and, with shared state, in Redis.
pub(crate) struct Store {
    local: Mutex<lru::LruCache<String, (Instant, Arc<Record>)>>,
    ttl: Duration,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("records", &self.local.lock().len())
            .finish()
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new(CAPACITY, TTL)
    }
}

impl Store {
    /// A store of at most `capacity` records, each kept `ttl`.
    pub(crate) fn new(capacity: usize, ttl: Duration) -> Self {
        let cap = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            local: Mutex::new(lru::LruCache::new(cap)),
            ttl,
        }
    }

    /// Keeps `record` under `id` here, and in the fleet's Redis when there is one (in the
    /// background: the response is not held up).
    pub(crate) fn put(&self, id: &str, record: Record, fleet: Option<&Arc<Fleet>>) {
        if let Some(fleet) = fleet {
            if let Ok(json) = serde_json::to_vec(&record) {
                fleet.put_response(id, json, self.ttl);
            }
        }
        self.local
            .lock()
            .put(id.to_string(), (Instant::now(), Arc::new(record)));
    }

    /// The record under `id`: this gateway's, else the fleet's; `None` when neither has it
    /// (or it expired).
    pub(crate) async fn get(&self, id: &str, fleet: Option<&Arc<Fleet>>) -> Option<Arc<Record>> {
        if let Some(r) = self.get_local(id, Instant::now()) {
            return Some(r);
        }
        let json = fleet?.get_response(id).await?;
        let record: Record = serde_json::from_slice(&json).ok()?;
        let record = Arc::new(record);
        self.local
            .lock()
            .put(id.to_string(), (Instant::now(), record.clone()));
        Some(record)
    }

    fn get_local(&self, id: &str, now: Instant) -> Option<Arc<Record>> {
        let mut local = self.local.lock();
        match local.get(id) {
            Some((at, r)) if now.saturating_duration_since(*at) < self.ttl => Some(r.clone()),
            Some(_) => {
                local.pop(id);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: usize) -> Record {
        Record {
            model: "m".into(),
            messages: vec![serde_json::json!({"role": "user", "content": n.to_string()})],
            replica: "http://127.0.0.1:1".into(),
        }
    }

    #[test]
    fn records_are_bounded_and_expire() {
        let s = Store::new(2, Duration::from_millis(50));
        for i in 0..3 {
            s.put(&format!("resp_{i}"), record(i), None);
        }
        let now = Instant::now();
        assert!(
            s.get_local("resp_0", now).is_none(),
            "the oldest is evicted"
        );
        assert_eq!(*s.get_local("resp_2", now).unwrap(), record(2));
        let later = now + Duration::from_millis(60);
        assert!(s.get_local("resp_1", later).is_none(), "expired");
        assert!(s.get_local("resp_1", now).is_none(), "and dropped");
    }

    #[test]
    fn a_record_survives_its_json_round_trip() {
        let r = record(7);
        let back: Record = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
