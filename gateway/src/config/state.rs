//! `state:`: where tenant limits (and, with Redis, tenants' keys) live. `memory` keeps
//! them in this gateway alone; `redis` shares them across a fleet of gateways through one
//! Redis server or a Redis Cluster.

use super::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Which store holds the shared state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateBackend {
    /// This gateway's memory only (the default; `warmpath up` needs nothing else).
    #[default]
    Memory,
    /// Redis (`url`) or a Redis Cluster (`cluster`).
    Redis,
}

/// The `state:` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// `memory` or `redis`.
    pub backend: StateBackend,
    /// One Redis server, `redis://[:password@]host:port[/db]`, or `rediss://...` for TLS.
    pub url: Option<String>,
    /// A file holding the Redis user's password, used instead of one in the URL so it is
    /// in neither the config file nor a command line (read at every connect; one trailing
    /// newline ignored). The user comes from the URL (`redis://USER@host:port`).
    pub password_file: Option<String>,
    /// Seed nodes of a Redis Cluster (`redis://host:port` each, or all `rediss://`),
    /// instead of `url`.
    pub cluster: Vec<String>,
    /// With `rediss://`: a PEM bundle of the CA certificates that may sign Redis's
    /// certificate (default: the system's trust store). Redis's certificate must name the
    /// host of the URL (a DNS name or an IP address SAN).
    pub ca_file: Option<String>,
    /// With `rediss://`: this gateway's client certificate (PEM, chain first to last), for
    /// a Redis run with `tls-auth-clients yes`. Needs `client_key_file`.
    pub client_cert_file: Option<String>,
    /// The private key (PEM) of `client_cert_file`.
    pub client_key_file: Option<String>,
    /// Gateways in the fleet. While Redis is unreachable each gateway admits a tenant's
    /// limits divided by this, so the fleet together stays near the limit.
    pub gateway_count: u32,
    /// The longest any Redis call may hold a request, milliseconds; past it the gateway
    /// serves from its local fallback and says it is degraded.
    pub timeout_ms: u64,
    /// How often a degraded gateway tries Redis again, milliseconds.
    pub probe_ms: u64,
    /// Lifetime of a concurrency lease, seconds: a gateway that dies frees its tenants'
    /// concurrency slots after this. Keep it above the longest request.
    pub lease_ttl_s: u64,
    /// How often each gateway reads the key store's change counter, milliseconds: a key
    /// revoked on one gateway is refused by all within about this.
    pub keys_poll_ms: u64,
    /// Share routing decisions for engines without KV events with the other gateways
    /// (the shared routing history).
    pub share_routing: bool,
    /// How often each gateway reads the others' routing decisions, milliseconds.
    pub history_poll_ms: u64,
    /// Entries the routing history stream keeps (about; Redis trims it).
    pub history_cap: u64,
    /// Prefix of every key the gateway writes.
    pub key_prefix: String,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            backend: StateBackend::Memory,
            url: None,
            password_file: None,
            cluster: Vec::new(),
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
            gateway_count: 1,
            timeout_ms: 100,
            probe_ms: 250,
            lease_ttl_s: 900,
            keys_poll_ms: 250,
            share_routing: true,
            history_poll_ms: 50,
            history_cap: 100_000,
            key_prefix: "warmpath".into(),
        }
    }
}

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: format!("state.{key}"),
        reason: reason.into(),
    }
}

/// Checks one address; `Ok(true)` for `rediss://` (TLS).
fn check_url(key: &str, url: &str) -> Result<bool, ConfigError> {
    let tls = url.starts_with("rediss://");
    if !tls && !url.starts_with("redis://") {
        return Err(invalid(
            key,
            format!("{url:?}: must start with redis:// (or rediss:// for TLS)"),
        ));
    }
    let parsed = redis::parse_redis_url(url)
        .ok_or_else(|| invalid(key, format!("{url:?}: not a Redis URL")))?;
    if parsed.fragment() == Some("insecure") {
        return Err(invalid(
            key,
            format!(
                "{url:?}: #insecure (no certificate check) is not supported; set state.ca_file"
            ),
        ));
    }
    Ok(tls)
}

impl StateConfig {
    /// Whether Redis is addressed with `rediss://` (validated: every seed alike).
    pub fn uses_tls(&self) -> bool {
        let first = self
            .url
            .as_deref()
            .or(self.cluster.first().map(|s| s.as_str()));
        first.is_some_and(|u| u.starts_with("rediss://"))
    }

    /// The TLS files this section names.
    fn tls_files(&self) -> super::state_tls::TlsFiles<'_> {
        super::state_tls::TlsFiles {
            ca_file: self.ca_file.as_deref(),
            client_cert_file: self.client_cert_file.as_deref(),
            client_key_file: self.client_key_file.as_deref(),
        }
    }

    /// The CA and client certificate for `rediss://`, read now; `None` over plain text or
    /// when no file is set (then the system's trust store verifies Redis).
    pub fn tls_certificates(&self) -> redis::RedisResult<Option<redis::TlsCertificates>> {
        if !self.uses_tls() {
            return Ok(None);
        }
        super::state_tls::certificates(&self.tls_files())
    }

    /// The password in `password_file`, if set (read now: a rotated file is picked up at
    /// the next connect).
    pub fn password(&self) -> redis::RedisResult<Option<String>> {
        let Some(path) = &self.password_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "state.password_file unreadable",
                format!("{path}: {e}"),
            ))
        })?;
        Ok(Some(text.strip_suffix('\n').unwrap_or(&text).to_string()))
    }

    /// Checks the section; errors name the key under `state.`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.backend == StateBackend::Memory {
            let tls_keys = [&self.ca_file, &self.client_cert_file, &self.client_key_file];
            if self.url.is_some()
                || !self.cluster.is_empty()
                || self.password_file.is_some()
                || tls_keys.iter().any(|k| k.is_some())
            {
                return Err(invalid(
                    "backend",
                    "is `memory` but `url`, `cluster`, `password_file` or a TLS file is set: \
                     say `backend: redis`",
                ));
            }
            return Ok(());
        }
        let tls = match (&self.url, self.cluster.is_empty()) {
            (None, true) => {
                return Err(invalid(
                    "url",
                    "backend `redis` needs `url` (one server) or `cluster` (seed nodes)",
                ))
            }
            (Some(_), false) => return Err(invalid("cluster", "set `url` or `cluster`, not both")),
            (Some(u), true) => check_url("url", u)?,
            (None, false) => {
                let mut first = None;
                for (i, u) in self.cluster.iter().enumerate() {
                    let tls = check_url(&format!("cluster[{i}]"), u)?;
                    if *first.get_or_insert(tls) != tls {
                        return Err(invalid(
                            &format!("cluster[{i}]"),
                            "mixes redis:// and rediss:// seeds: a Cluster is all TLS or none",
                        ));
                    }
                }
                first.unwrap_or(false)
            }
        };
        super::state_tls::validate(&self.tls_files(), tls)?;
        if let Some(p) = &self.password_file {
            if p.is_empty() {
                return Err(invalid("password_file", "must be a path"));
            }
        }
        if self.gateway_count == 0 {
            return Err(invalid("gateway_count", "must be at least 1"));
        }
        if !(1..=10_000).contains(&self.timeout_ms) {
            return Err(invalid("timeout_ms", "must be in 1..=10000"));
        }
        if self.probe_ms == 0 {
            return Err(invalid("probe_ms", "must be positive"));
        }
        if !(10..=60_000).contains(&self.keys_poll_ms) {
            return Err(invalid("keys_poll_ms", "must be in 10..=60000"));
        }
        if !(5..=60_000).contains(&self.history_poll_ms) {
            return Err(invalid("history_poll_ms", "must be in 5..=60000"));
        }
        if self.history_cap < 1000 {
            return Err(invalid("history_cap", "must be at least 1000"));
        }
        if self.lease_ttl_s == 0 {
            return Err(invalid("lease_ttl_s", "must be positive"));
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}', ' ']) {
            return Err(invalid(
                "key_prefix",
                "must be non-empty, without braces or spaces",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<StateConfig, String> {
        let c: StateConfig = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn memory_is_the_default_and_redis_needs_an_address() {
        assert_eq!(parse("{}").unwrap().backend, StateBackend::Memory);
        let e = parse("{backend: redis}").unwrap_err();
        assert!(e.contains("state.url"), "{e}");
        let e = parse("{backend: redis, url: 'http://x:1'}").unwrap_err();
        assert!(e.contains("state.url") && e.contains("redis://"), "{e}");
        let e =
            parse("{backend: redis, url: 'redis://a:1', cluster: ['redis://b:2']}").unwrap_err();
        assert!(e.contains("state.cluster"), "{e}");
        assert!(parse("{backend: redis, url: 'rediss://a:1'}")
            .unwrap()
            .uses_tls());
        let e = parse("{backend: redis, url: 'rediss://a:1/#insecure'}").unwrap_err();
        assert!(e.contains("state.url") && e.contains("insecure"), "{e}");
        let e = parse("{backend: redis, cluster: ['rediss://a:1', 'redis://b:2']}").unwrap_err();
        assert!(
            e.contains("state.cluster[1]") && e.contains("rediss://"),
            "{e}"
        );
        let e = parse("{url: 'redis://a:1'}").unwrap_err();
        assert!(e.contains("state.backend"), "{e}");
        let e = parse("{backend: redis, cluster: ['redis://a:1', 'nope']}").unwrap_err();
        assert!(e.contains("state.cluster[1]"), "{e}");
        let e = parse("{backend: redis, url: 'redis://a:1', gateway_count: 0}").unwrap_err();
        assert!(e.contains("state.gateway_count"), "{e}");
        let e = parse("{backend: redis, url: 'redis://a:1', timeout: 5}").unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
        let ok = parse("{backend: redis, cluster: ['redis://a:1', 'redis://b:2']}").unwrap();
        assert_eq!(ok.cluster.len(), 2);
    }

    #[test]
    fn a_password_file_needs_redis_and_is_read_without_its_newline() {
        let e = parse("{password_file: /x}").unwrap_err();
        assert!(
            e.contains("state.backend") && e.contains("password_file"),
            "{e}"
        );
        let path = std::env::temp_dir().join(format!("wp-state-pw-{}", std::process::id()));
        std::fs::write(&path, "s3cret\n").unwrap();
        let yaml = format!(
            "{{backend: redis, url: 'redis://gw@a:1', password_file: '{}'}}",
            path.display()
        );
        assert_eq!(
            parse(&yaml).unwrap().password().unwrap().as_deref(),
            Some("s3cret")
        );
        std::fs::remove_file(&path).unwrap();
        let e = parse(&yaml).unwrap().password().unwrap_err().to_string();
        assert!(e.contains("state.password_file"), "{e}");
    }
}
