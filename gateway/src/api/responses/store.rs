//! What the gateway keeps of each response it produced, so a follow-up naming it
//! (`previous_response_id`) can be expanded to the whole conversation and sent to the
//! replica that holds its prefix: the conversation as chat messages (earlier turns, the
//! input, the output; never `instructions`, which are not carried over), and the replica
//! that served it. Bounded (`responses.max_records` records and `responses.max_bytes` of
//! their JSON, least recently used evicted) and each record lives `responses.ttl_s`
//! ([`crate::config::ResponsesConfig`]). Records belong to the tenant whose
//! request made them: another tenant naming one finds nothing. With shared state, every record is also written to Redis (same
//! TTL) and read from there on a local miss, so any gateway of a fleet finds it
//! (`crate::fleet::responses`).

use crate::fleet::Fleet;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    local: Mutex<Local>,
    ttl: Duration,
    max_bytes: usize,
}

/// The records in memory: when each was kept, its size, and their total size.
struct Local {
    records: lru::LruCache<String, (Instant, usize, Arc<Record>)>,
    bytes: usize,
}

impl Local {
    /// Keeps `record`, then evicts the least recently used until within `max_bytes` (a
    /// record larger than that is not kept).
    fn put(&mut self, id: &str, size: usize, record: Arc<Record>, max_bytes: usize) {
        let entry = (Instant::now(), size, record);
        if let Some((_, old)) = self.records.push(id.to_string(), entry) {
            self.bytes -= old.1;
        }
        self.bytes += size;
        while self.bytes > max_bytes {
            match self.records.pop_lru() {
                Some((_, (_, n, _))) => self.bytes -= n,
                None => break,
            }
        }
    }

    fn pop(&mut self, id: &str) {
        if let Some((_, n, _)) = self.records.pop(id) {
            self.bytes -= n;
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("records", &self.local.lock().records.len())
            .finish()
    }
}

impl Store {
    /// A store of at most `capacity` records and `max_bytes` of their JSON, each kept
    /// `ttl`.
    pub(crate) fn new(capacity: usize, max_bytes: usize, ttl: Duration) -> Self {
        let cap = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            local: Mutex::new(Local {
                records: lru::LruCache::new(cap),
                bytes: 0,
            }),
            ttl,
            max_bytes,
        }
    }

    /// Keeps `tenant`'s `record` under `id` here, and in the fleet's Redis when there is
    /// one (in the background: the response is not held up).
    pub(crate) fn put(&self, tenant: &str, id: &str, record: Record, fleet: Option<&Arc<Fleet>>) {
        let Ok(json) = serde_json::to_vec(&record) else {
            return;
        };
        let size = json.len();
        if let Some(fleet) = fleet {
            fleet.put_response(tenant, id, json, self.ttl);
        }
        self.local
            .lock()
            .put(&scoped(tenant, id), size, Arc::new(record), self.max_bytes);
    }

    /// `tenant`'s record under `id`: this gateway's, else the fleet's; `None` when neither
    /// has it (or it expired).
    pub(crate) async fn get(
        &self,
        tenant: &str,
        id: &str,
        fleet: Option<&Arc<Fleet>>,
    ) -> Option<Arc<Record>> {
        let key = scoped(tenant, id);
        if let Some(r) = self.get_local(&key, Instant::now()) {
            return Some(r);
        }
        let json = fleet?.get_response(tenant, id).await?;
        let record = Arc::new(serde_json::from_slice::<Record>(&json).ok()?);
        self.local
            .lock()
            .put(&key, json.len(), record.clone(), self.max_bytes);
        Some(record)
    }

    fn get_local(&self, id: &str, now: Instant) -> Option<Arc<Record>> {
        let mut local = self.local.lock();
        match local.records.get(id) {
            Some((at, _, r)) if now.saturating_duration_since(*at) < self.ttl => Some(r.clone()),
            Some(_) => {
                local.pop(id);
                None
            }
            None => None,
        }
    }
}

/// The in-memory key of `tenant`'s response `id`.
fn scoped(tenant: &str, id: &str) -> String {
    format!("{tenant}\n{id}")
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
        let s = Store::new(2, 256 << 20, Duration::from_millis(50));
        for i in 0..3 {
            s.put("t", &format!("resp_{i}"), record(i), None);
        }
        let now = Instant::now();
        assert!(
            s.get_local("t\nresp_0", now).is_none(),
            "the oldest is evicted"
        );
        assert_eq!(*s.get_local("t\nresp_2", now).unwrap(), record(2));
        let later = now + Duration::from_millis(60);
        assert!(s.get_local("t\nresp_1", later).is_none(), "expired");
        assert!(s.get_local("t\nresp_1", now).is_none(), "and dropped");
        assert_eq!(s.local.lock().records.len(), 1);

        // By bytes: room for two records of this size, not three.
        let size = serde_json::to_vec(&record(1)).unwrap().len();
        let s = Store::new(100, 2 * size + size / 2, Duration::from_secs(3600));
        for i in 0..3 {
            s.put("t", &format!("resp_{i}"), record(i), None);
        }
        let now = Instant::now();
        assert!(s.get_local("t\nresp_0", now).is_none(), "evicted for bytes");
        assert!(s.get_local("t\nresp_1", now).is_some() && s.get_local("t\nresp_2", now).is_some());
        assert_eq!(s.local.lock().bytes, 2 * size);
        // A record larger than the whole budget is not kept, and evicts nothing it keeps.
        let big = Store::new(100, size - 1, Duration::from_secs(3600));
        big.put("t", "resp_big", record(1), None);
        assert!(big.get_local("t\nresp_big", now).is_none());
        assert_eq!(big.local.lock().bytes, 0);
    }

    #[test]
    fn a_record_survives_its_json_round_trip() {
        let r = record(7);
        let back: Record = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
