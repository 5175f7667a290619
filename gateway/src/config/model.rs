//! The configuration model: every key with its default, read from YAML, checked by
//! [`Config::validate`], whose errors name the offending key.

use router_policy::PolicyConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;

/// The largest `limits.max_body_bytes` (1 GiB). The gateway reads a body whole into its own
/// buffer before routing and replays it from there on a retry (not from Pingora's 64 KiB
/// retry buffer: `vendor/README.md`).
pub const MAX_BODY_BYTES_CEILING: usize = 1 << 30;

/// The default `limits.max_body_bytes`: 32 MiB, long documents and agent histories of
/// several hundred thousand tokens.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 << 20;

/// Pingora refuses a head of more than 256 header lines with its own bare 400.
pub const MAX_HEADERS_CEILING: usize = 256;

/// Pingora refuses a head of more than 1 MiB with its own bare 400.
pub const MAX_HEADER_BYTES_CEILING: usize = 1024 * 1024;

pub use super::error::ConfigError;

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

/// Top-level gateway configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Data-plane listen address.
    pub listen: String,
    /// Admin and metrics listen address (separate from the data plane).
    pub admin_listen: String,
    /// Who may use the admin listener.
    pub admin: AdminConfig,
    /// Pingora worker threads.
    pub threads: usize,
    /// Warmpath replica base URLs registered at start (shorthand for a `warmpath` pool).
    pub replicas: Vec<String>,
    /// Pools of upstream engines (vLLM, SGLang, llama.cpp, any OpenAI server, or more
    /// Warmpath replicas), each with its tokenizer source.
    pub pools: Vec<super::pools::PoolConfig>,
    /// Routing policy (router-policy's `PolicyConfig`).
    pub policy: PolicyConfig,
    /// Authentication.
    pub auth: AuthConfig,
    /// Tenants and their keys and limits.
    pub tenants: Vec<TenantConfig>,
    /// Where tenant limits and keys live: this gateway's memory, or Redis for a fleet.
    pub state: super::state::StateConfig,
    /// This gateway's region, the round trips to the others, and how it spills; omitted:
    /// regions are ignored (residency pins still apply).
    pub regions: Option<router_policy::Regions>,
    /// Checkpoint rollouts, one per model at most.
    pub rollouts: Vec<super::rollout::RolloutConfig>,
    /// The routing history rollouts pre-warm from.
    pub hot_prefixes: super::rollout::HotPrefixConfig,
    /// When a pool with `prefill` replicas splits a request between a prefill and a
    /// decode replica (router-policy's `DisaggConfig`).
    pub disaggregation: router_policy::DisaggConfig,
    /// The transfer key (at least 32 bytes; write `${ENV_VAR}`): the gateway signs the
    /// prefill replica it names, and decode replicas started with the same key
    /// (`--kv-transfer-key-file`) fetch only from a signed name.
    pub kv_transfer_key: Option<TransferKey>,
    /// Request size and connection bounds.
    pub limits: RequestLimits,
    /// Admission control / load shedding.
    pub admission: AdmissionConfig,
    /// Retry policy.
    pub retry: RetryConfig,
    /// Health checking and ejection.
    pub health: HealthConfig,
    /// Upstream timeouts.
    pub timeouts: TimeoutConfig,
    /// Response headers the gateway adds.
    pub headers: HeaderConfig,
    /// Tokenizer cache.
    pub tokenizer: TokenizerConfig,
    /// Responses API records (`previous_response_id`).
    pub responses: super::responses::ResponsesConfig,
    /// The Endpoint Picker mode (`gateway epp`): its gRPC listener.
    pub epp: super::epp::EppConfig,
    /// How often to poll each replica's load endpoint.
    pub load_poll_ms: u64,
    /// Recent routing decisions kept for the admin API.
    pub decision_log: usize,
    /// Grace period for in-flight requests on shutdown, seconds.
    pub shutdown_grace_s: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            admin_listen: "127.0.0.1:8081".into(),
            admin: AdminConfig::default(),
            threads: 2,
            replicas: Vec::new(),
            pools: Vec::new(),
            policy: PolicyConfig::default(),
            auth: AuthConfig::default(),
            tenants: Vec::new(),
            state: super::state::StateConfig::default(),
            regions: None,
            rollouts: Vec::new(),
            hot_prefixes: super::rollout::HotPrefixConfig::default(),
            disaggregation: router_policy::DisaggConfig::default(),
            kv_transfer_key: None,
            limits: RequestLimits::default(),
            admission: AdmissionConfig::default(),
            retry: RetryConfig::default(),
            health: HealthConfig::default(),
            timeouts: TimeoutConfig::default(),
            headers: HeaderConfig::default(),
            tokenizer: TokenizerConfig::default(),
            responses: super::responses::ResponsesConfig::default(),
            epp: super::epp::EppConfig::default(),
            load_poll_ms: 200,
            decision_log: 256,
            shutdown_grace_s: 30,
        }
    }
}

/// Access to the admin listener (`/admin/*`, `/metrics`, `/dashboard`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Hex SHA-256 of the admin key (the key is never stored in clear). Required when
    /// `admin_listen` is not a loopback address; without it a loopback admin listener is
    /// open to local processes (a warning is logged at start).
    pub key_sha256: Option<String>,
    /// Lifetime of a dashboard login (the session cookie), seconds.
    pub session_ttl_s: u64,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            key_sha256: None,
            session_ttl_s: 12 * 3600,
        }
    }
}

/// Authentication settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Require an API key (`--no-auth` turns this off for local use).
    pub enabled: bool,
    /// Secret key for the tenant cache-salt HMAC. Keep it private: it makes salts unguessable.
    pub salt_secret: String,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            salt_secret: String::new(),
        }
    }
}

/// One tenant.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Stable tenant id (metrics label, salt input).
    pub id: String,
    /// Hex SHA-256 of each API key of this tenant (keys are never stored in clear).
    pub api_key_sha256: Vec<String>,
    /// Models this tenant may use; `["*"]` for all.
    #[serde(default = "all_models")]
    pub models: Vec<String>,
    /// Rate limits.
    #[serde(default)]
    pub limits: TenantLimits,
    /// Data residency: the only regions this tenant's requests may be processed in (empty:
    /// any). Replicas without a region label are refused to a pinned tenant.
    #[serde(default)]
    pub regions: Vec<String>,
    /// Flow control: weight, queue bound, classes, default TTFT objective (issue 42).
    #[serde(default)]
    pub flow: super::flow::TenantFlow,
}

fn all_models() -> Vec<String> {
    vec!["*".into()]
}

/// Per-tenant limits; 0 means unlimited.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TenantLimits {
    /// Sustained requests per minute.
    pub requests_per_minute: u32,
    /// Requests admitted at once above the rate (GCRA burst); defaults to 1.
    pub request_burst: u32,
    /// Tokens per minute (prompt + completion), reserved at admission, settled at the end.
    pub tokens_per_minute: u64,
    /// Concurrent requests.
    pub max_concurrent: u32,
}

/// Request size and connection bounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestLimits {
    /// Largest accepted body, bytes (at most 1 GiB).
    pub max_body_bytes: usize,
    /// Request bodies held at once by the whole gateway, bytes (each request's counts from
    /// its `Content-Length`, or as it arrives, until the request ends): past it a request
    /// is refused with 503 before its body is read, so many large bodies never exhaust
    /// memory.
    pub max_inflight_body_bytes: usize,
    /// Largest accepted request head (request line and headers), bytes; bounded as it
    /// streams in, before Pingora buffers it.
    pub max_header_bytes: usize,
    /// Most header lines in one request (at most 256, Pingora's own bound).
    pub max_headers: usize,
    /// `max_tokens` assumed when the request has none (token reservation cap).
    pub default_max_tokens: u32,
    /// Open connections allowed per client IP; 0: no cap.
    pub max_connections_per_ip: u32,
    /// Open client connections allowed in all; 0: no cap.
    pub max_connections: u32,
    /// Requests served on one kept-alive connection before it is closed; 0: no limit.
    pub max_requests_per_connection: u32,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_inflight_body_bytes: 1 << 30,
            max_header_bytes: 16 * 1024,
            max_headers: 100,
            default_max_tokens: 256,
            max_connections_per_ip: 1024,
            max_connections: 10_000,
            max_requests_per_connection: 1000,
        }
    }
}

/// Admission and load shedding.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// In-flight requests allowed per replica.
    pub max_in_flight_per_replica: u32,
    /// Requests allowed to wait for a replica slot, gateway-wide.
    pub max_queue: u32,
    /// How long a queued request waits for a slot before 503.
    pub queue_timeout_ms: u64,
    /// How waiting requests are queued: per tenant, by weight and class (`crate::flow`).
    pub flow: super::flow::FlowSettings,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_in_flight_per_replica: 64,
            max_queue: 256,
            queue_timeout_ms: 2000,
            flow: Default::default(),
        }
    }
}

/// Retry policy: whole retries before the first response byte; after it, a stream's
/// migration to another replica (`max_migrations`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts per request, first included.
    pub max_attempts: u32,
    /// Times a stream whose replica fails after the first byte may continue on another
    /// replica (0: the stream ends with an error event).
    pub max_migrations: u32,
    /// Retries allowed as a share of requests.
    pub budget_ratio: f64,
    /// Retries always allowed per second.
    pub budget_floor_per_s: u32,
    /// Backoff base.
    pub backoff_base_ms: u64,
    /// Backoff cap.
    pub backoff_max_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            max_migrations: 1,
            budget_ratio: 0.2,
            budget_floor_per_s: 3,
            backoff_base_ms: 10,
            backoff_max_ms: 1000,
        }
    }
}

/// The most migrations `retry.max_migrations` may allow one stream.
pub const MAX_MIGRATIONS: u32 = 8;

/// Health checks and outlier ejection.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Interval between active probes (a one-token generation).
    pub probe_interval_ms: u64,
    /// Deadline of one probe.
    pub probe_timeout_ms: u64,
    /// Consecutive failures (probes or requests) before ejection.
    pub eject_after_failures: u32,
    /// How long an ejected replica stays out before a half-open trial.
    pub ejection_ms: u64,
    /// Share of replicas that may be ejected at once (at least one is always ejectable).
    pub max_ejected_ratio: f64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            probe_interval_ms: 2000,
            probe_timeout_ms: 2000,
            eject_after_failures: 3,
            ejection_ms: 5000,
            max_ejected_ratio: 0.5,
        }
    }
}

/// Upstream and downstream timeouts.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutConfig {
    /// TCP connect to a replica.
    pub connect_ms: u64,
    /// Replica's response header / first token.
    pub first_token_ms: u64,
    /// Longest silence between two chunks of a streaming response.
    pub idle_ms: u64,
    /// Reading the client's request (header and body).
    pub client_read_ms: u64,
    /// Longest a write to the client may make no progress (a client that stops reading)
    /// before the connection is cut, the replica slot freed and the upstream connection
    /// closed, which cancels the generation.
    pub client_write_ms: u64,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        Self {
            connect_ms: 1000,
            first_token_ms: 30_000,
            idle_ms: 30_000,
            client_read_ms: 10_000,
            client_write_ms: 30_000,
        }
    }
}

/// Response headers the gateway adds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderConfig {
    /// Add `x-warmpath-replica`.
    pub replica: bool,
    /// Add `x-warmpath-predicted-cached-tokens`.
    pub predicted_cached_tokens: bool,
}

impl Default for HeaderConfig {
    fn default() -> Self {
        Self {
            replica: true,
            predicted_cached_tokens: true,
        }
    }
}

/// Tokenizer cache.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenizerConfig {
    /// Token runs cached per checkpoint (LRU).
    pub cache_entries: usize,
    /// Shortest text segment worth caching, bytes.
    pub min_cached_bytes: usize,
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        Self {
            cache_entries: 4096,
            min_cached_bytes: 256,
        }
    }
}

impl Config {
    /// Reads and validates a YAML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let cfg = Self::from_yaml(&text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses YAML (no validation), with `${NAME}` in string values taken from the
    /// environment ([`super::env`]).
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let parse = |e: serde_yaml::Error| ConfigError::Parse(e.to_string());
        if !text.contains("${") {
            // Parsed straight from the text, errors keep their line and column.
            return serde_yaml::from_str(text).map_err(parse);
        }
        let mut v: serde_yaml::Value = serde_yaml::from_str(text).map_err(parse)?;
        super::env::expand(&mut v, &|name| std::env::var(name).ok())?;
        serde_yaml::from_value(v).map_err(parse)
    }

    /// Checks ranges and cross-field rules; errors name the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, addr) in [
            ("listen", &self.listen),
            ("admin_listen", &self.admin_listen),
        ] {
            addr.parse::<SocketAddr>()
                .map_err(|e| invalid(key, format!("{addr:?}: {e}")))?;
        }
        if self.listen == self.admin_listen {
            return Err(invalid("admin_listen", "must differ from `listen`"));
        }
        self.validate_admin()?;
        if self.threads == 0 {
            return Err(invalid("threads", "must be at least 1"));
        }
        for (i, r) in self.replicas.iter().enumerate() {
            crate::replicas::addr::ReplicaAddr::parse(r)
                .map_err(|e| invalid(format!("replicas[{i}]"), e))?;
        }
        super::pools::validate_pools(&self.pools, &self.replicas)?;
        super::serves::validate_pools(&self.pools)?;
        self.policy
            .validate()
            .map_err(|e| invalid("policy", e.to_string()))?;
        if self.auth.enabled && self.auth.salt_secret.len() < 16 {
            return Err(invalid(
                "auth.salt_secret",
                "must be at least 16 characters",
            ));
        }
        if self.auth.enabled && self.tenants.is_empty() {
            return Err(invalid(
                "tenants",
                "auth is enabled but no tenant is configured",
            ));
        }
        self.state.validate()?;
        self.responses.validate()?;
        self.epp.validate()?;
        self.admission.flow.validate()?;
        super::rollout::validate_regions(self.regions.as_ref())?;
        super::rollout::validate_rollouts(&self.rollouts, &self.hot_prefixes)?;
        if let Some(k) = &self.kv_transfer_key {
            if k.0.len() < warmpath_protocol::transfer_auth::MIN_KEY_BYTES {
                return Err(invalid(
                    "kv_transfer_key",
                    format!(
                        "has {} bytes, at least {} are needed",
                        k.0.len(),
                        warmpath_protocol::transfer_auth::MIN_KEY_BYTES
                    ),
                ));
            }
        }
        if self.disaggregation.min_prompt_tokens == 0 {
            return Err(invalid(
                "disaggregation.min_prompt_tokens",
                "must be at least 1 (every request would be split, even one-token prompts)",
            ));
        }
        let mut ids = std::collections::HashSet::new();
        for (i, t) in self.tenants.iter().enumerate() {
            let key = format!("tenants[{i}]");
            if t.id.is_empty() || !ids.insert(t.id.as_str()) {
                return Err(invalid(format!("{key}.id"), "must be non-empty and unique"));
            }
            if t.api_key_sha256.is_empty() {
                return Err(invalid(
                    format!("{key}.api_key_sha256"),
                    "needs at least one key hash",
                ));
            }
            for (j, h) in t.api_key_sha256.iter().enumerate() {
                if h.len() != 64 || hex::decode(h).is_err() {
                    return Err(invalid(
                        format!("{key}.api_key_sha256[{j}]"),
                        "must be 64 hex digits",
                    ));
                }
            }
            if let Some(j) = t.regions.iter().position(String::is_empty) {
                return Err(invalid(
                    format!("{key}.regions[{j}]"),
                    "must be a non-empty region label",
                ));
            }
            if t.models.is_empty() {
                return Err(invalid(
                    format!("{key}.models"),
                    "must list at least one model or \"*\"",
                ));
            }
            t.flow.validate(&key)?;
        }
        let l = &self.limits;
        if l.max_body_bytes == 0 || l.max_body_bytes > MAX_BODY_BYTES_CEILING {
            return Err(invalid(
                "limits.max_body_bytes",
                format!("must be in 1..={MAX_BODY_BYTES_CEILING}"),
            ));
        }
        if l.max_inflight_body_bytes < l.max_body_bytes {
            return Err(invalid(
                "limits.max_inflight_body_bytes",
                format!(
                    "must be at least limits.max_body_bytes ({}): one largest body must fit",
                    l.max_body_bytes
                ),
            ));
        }
        if l.max_header_bytes < 1024 {
            return Err(invalid("limits.max_header_bytes", "must be at least 1024"));
        }
        if l.max_header_bytes > MAX_HEADER_BYTES_CEILING {
            return Err(invalid(
                "limits.max_header_bytes",
                format!("must be at most {MAX_HEADER_BYTES_CEILING}"),
            ));
        }
        if l.max_headers == 0 || l.max_headers > MAX_HEADERS_CEILING {
            return Err(invalid(
                "limits.max_headers",
                format!("must be in 1..={MAX_HEADERS_CEILING}"),
            ));
        }
        if l.default_max_tokens == 0 {
            return Err(invalid("limits.default_max_tokens", "must be positive"));
        }
        if self.admission.max_in_flight_per_replica == 0 {
            return Err(invalid(
                "admission.max_in_flight_per_replica",
                "must be positive",
            ));
        }
        let r = &self.retry;
        if r.max_attempts == 0 {
            return Err(invalid("retry.max_attempts", "must be at least 1"));
        }
        if r.max_migrations > MAX_MIGRATIONS {
            return Err(invalid(
                "retry.max_migrations",
                format!("must be at most {MAX_MIGRATIONS}"),
            ));
        }
        if !(0.0..=1.0).contains(&r.budget_ratio) {
            return Err(invalid("retry.budget_ratio", "must be within 0..=1"));
        }
        if r.backoff_max_ms < r.backoff_base_ms {
            return Err(invalid(
                "retry.backoff_max_ms",
                "must be >= retry.backoff_base_ms",
            ));
        }
        let h = &self.health;
        if h.eject_after_failures == 0 {
            return Err(invalid("health.eject_after_failures", "must be positive"));
        }
        if !(0.0..=1.0).contains(&h.max_ejected_ratio) {
            return Err(invalid("health.max_ejected_ratio", "must be within 0..=1"));
        }
        if h.probe_interval_ms == 0 || h.probe_timeout_ms == 0 {
            return Err(invalid(
                "health.probe_interval_ms",
                "probe interval and timeout must be positive",
            ));
        }
        let t = &self.timeouts;
        for (key, v) in [
            ("timeouts.connect_ms", t.connect_ms),
            ("timeouts.first_token_ms", t.first_token_ms),
            ("timeouts.idle_ms", t.idle_ms),
            ("timeouts.client_read_ms", t.client_read_ms),
            ("timeouts.client_write_ms", t.client_write_ms),
        ] {
            if v == 0 {
                return Err(invalid(key, "must be positive"));
            }
        }
        if self.tokenizer.cache_entries == 0 {
            return Err(invalid("tokenizer.cache_entries", "must be positive"));
        }
        if self.load_poll_ms == 0 {
            return Err(invalid("load_poll_ms", "must be positive"));
        }
        Ok(())
    }

    /// The `admin` section: a well-formed key hash, and one whenever the admin listener is
    /// reachable from other machines.
    fn validate_admin(&self) -> Result<(), ConfigError> {
        match &self.admin.key_sha256 {
            Some(h) if h.len() != 64 || hex::decode(h).is_err() => {
                return Err(invalid("admin.key_sha256", "must be 64 hex digits"));
            }
            Some(_) => {}
            None => {
                let loopback = self
                    .admin_listen
                    .parse::<SocketAddr>()
                    .is_ok_and(|a| a.ip().is_loopback());
                if !loopback {
                    return Err(invalid(
                        "admin.key_sha256",
                        format!(
                            "required when admin_listen ({}) is not a loopback address: \
                             set it to the hex SHA-256 of an admin key",
                            self.admin_listen
                        ),
                    ));
                }
            }
        }
        if self.admin.session_ttl_s == 0 {
            return Err(invalid("admin.session_ttl_s", "must be positive"));
        }
        Ok(())
    }

    /// Every server the gateway registers: the `replicas` list, then each pool's upstreams.
    pub fn targets(&self) -> Vec<super::pools::Target> {
        super::pools::targets(&self.replicas, &self.pools)
    }

    /// Whether the admin listener is open without a key (loopback only, no key set).
    pub fn admin_open(&self) -> bool {
        self.admin.key_sha256.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Config::from_yaml("listen: 127.0.0.1:1\nbogus_key: 1\n").unwrap_err();
        assert!(err.to_string().contains("bogus_key"), "{err}");
    }

    #[test]
    fn validation_names_the_key() {
        let mut c = Config::default();
        c.auth.enabled = false;
        c.limits.max_body_bytes = 2 << 30;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("limits.max_body_bytes"), "{err}");
        // 256 MiB is allowed, given the in-flight budget to hold one.
        c.limits.max_body_bytes = 256 << 20;
        c.validate().unwrap();
        c.limits.max_inflight_body_bytes = 128 << 20;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("limits.max_inflight_body_bytes"), "{err}");
        let mut c = Config::default();
        c.auth.enabled = false;
        c.retry.budget_ratio = 3.0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("retry.budget_ratio"));
    }

    #[test]
    fn tenant_key_hash_must_be_hex() {
        let yaml = "auth: {enabled: true, salt_secret: 0123456789abcdef0}\n\
                    tenants: [{id: a, api_key_sha256: [nothex]}]\n";
        let c = Config::from_yaml(yaml).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("tenants[0].api_key_sha256[0]"), "{err}");
    }

    #[test]
    fn non_loopback_admin_needs_a_key() {
        let mut c = Config::default();
        c.auth.enabled = false;
        c.admin_listen = "0.0.0.0:8081".into();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("admin.key_sha256"), "{err}");
        c.admin.key_sha256 = Some(crate::tenants::hash_key("admin-key"));
        c.validate().unwrap();
        c.admin.key_sha256 = Some("short".into());
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("admin.key_sha256"), "{err}");
        // Loopback without a key: allowed (local development).
        let mut c = Config::default();
        c.auth.enabled = false;
        c.admin_listen = "[::1]:8081".into();
        c.validate().unwrap();
        assert!(c.admin_open());
    }

    #[test]
    fn example_config_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/gateway.example.yaml");
        Config::load(&path).unwrap();
    }
}

/// A secret string: serialized as itself (the stack writes configs), never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TransferKey(pub String);

impl std::fmt::Debug for TransferKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TransferKey(<redacted>)")
    }
}
