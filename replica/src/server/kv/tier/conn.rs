//! The tier's connection to Redis: opened in the background (a request never waits for a
//! connect), multiplexed and reconnecting once open (redis' `ConnectionManager`), and a
//! failure log that speaks once per interval however many calls fail. A failed connect
//! has a log of its own, so its reason (a refused password, a certificate Redis or this
//! replica does not trust) is not hidden behind the calls it left unconnected.

use crate::server::error::ServerError;
use crate::server::metrics::Metrics;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::IntoConnectionInfo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a failing tier is logged.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// How soon a failed connect is tried again.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// A shared, lazily opened connection to the tier's Redis.
#[derive(Clone)]
pub struct TierConn {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    timeout: Duration,
    state: Mutex<State>,
    started: Instant,
    /// Milliseconds after `started` of the last failure log (0 = never).
    last_log_ms: AtomicU64,
    /// The same for failed connects.
    last_connect_log_ms: AtomicU64,
    metrics: Metrics,
}

#[derive(Default)]
struct State {
    conn: Option<ConnectionManager>,
    connecting: bool,
    retry_at: Option<Instant>,
}

impl TierConn {
    /// Parses `url` (with `password`, when given, in place of the URL's, and `tls`, the CA
    /// and client certificate of a `rediss://` URL); connects in the background on first use.
    pub fn new(
        url: &str,
        password: Option<String>,
        tls: Option<redis::TlsCertificates>,
        timeout: Duration,
        metrics: Metrics,
    ) -> redis::RedisResult<Self> {
        let mut info = url.into_connection_info()?;
        if let Some(p) = password {
            let settings = info.redis_settings().clone().set_password(p);
            info = info.set_redis_settings(settings);
        }
        let client = match tls {
            Some(certs) => redis::Client::build_with_tls(info, certs)?,
            None => redis::Client::open(info)?,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                timeout,
                state: Mutex::new(State::default()),
                started: Instant::now(),
                last_log_ms: AtomicU64::new(0),
                last_connect_log_ms: AtomicU64::new(0),
                metrics,
            }),
        })
    }

    /// The open connection, or `None` (and a connect started, at most once per
    /// [`RETRY_EVERY`]) when there is none yet. Must run inside a tokio runtime.
    pub fn get(&self) -> Option<ConnectionManager> {
        let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = &st.conn {
            return Some(c.clone());
        }
        let due = st.retry_at.is_none_or(|t| Instant::now() >= t);
        if !st.connecting && due {
            st.connecting = true;
            let me = self.clone();
            tokio::spawn(async move { me.connect().await });
        }
        None
    }

    async fn connect(self) {
        let t = self.inner.timeout;
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(t.max(Duration::from_millis(500))))
            .set_response_timeout(Some(t))
            .set_number_of_retries(1);
        let got = ConnectionManager::new_with_config(self.inner.client.clone(), cfg).await;
        let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        st.connecting = false;
        match got {
            Ok(c) => {
                st.conn = Some(c);
                st.retry_at = None;
                drop(st);
                tracing::info!("KV tier connected");
            }
            Err(e) => {
                st.retry_at = Some(Instant::now() + RETRY_EVERY);
                drop(st);
                self.count("connect");
                if self.due(&self.inner.last_connect_log_ms) {
                    tracing::warn!(
                        error = %e,
                        "KV tier: cannot connect to Redis (retried every second, logged once \
                         per 10 s)"
                    );
                }
            }
        }
    }

    fn count(&self, op: &'static str) {
        self.inner
            .metrics
            .kv_tier_errors
            .with_label_values(&[op])
            .inc();
    }

    /// Whether a log limited by `last` (milliseconds after `started`) may speak now; if so
    /// it is marked as spoken.
    fn due(&self, last_ms: &AtomicU64) -> bool {
        let now = self.inner.started.elapsed().as_millis() as u64 + 1;
        let last = last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= LOG_EVERY.as_millis() as u64;
        due && last_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Records a failed call: counted, and logged at most once per [`LOG_EVERY`].
    pub fn failed(&self, op: &'static str, err: &dyn std::fmt::Display) {
        self.count(op);
        if self.due(&self.inner.last_log_ms) {
            tracing::warn!(
                op,
                error = %err,
                "KV tier unavailable: serving without it (logged once per 10 s; \
                 warmpath_replica_kv_tier_errors_total counts every failure)"
            );
        }
    }
}

/// Reads `--kv-store-password-file` (one trailing newline ignored).
pub fn read_password(path: &std::path::Path) -> Result<String, ServerError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ServerError::Config(format!("--kv-store-password-file {}: {e}", path.display()))
    })?;
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_string())
}
