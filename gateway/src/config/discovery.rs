//! `pools[].discovery`: where a pool's upstreams come from when they are not listed: the
//! Kubernetes API (the EndpointSlices of a Service, or the pods an `InferencePool`
//! selects), or a DNS name that resolves to every upstream's address.
//!
//! ```yaml
//! pools:
//!   - name: replicas
//!     engine: warmpath
//!     discovery: {kubernetes: {service: replica, port: 9000}}
//!   - name: vllm
//!     engine: vllm
//!     discovery: {kubernetes: {namespace: llm, inference_pool: vllm-llama, port: 8000}}
//!   - name: local
//!     engine: openai
//!     discovery: {dns: {name: llm.internal, port: 8000, interval_ms: 5000}}
//! ```

use super::error::ConfigError;
use serde::{Deserialize, Serialize};

/// How a pool finds its upstreams. In YAML a map with one key, `kubernetes` or `dns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DiscoveryMap", into = "DiscoveryMap")]
pub enum DiscoveryConfig {
    /// From the Kubernetes API.
    Kubernetes(KubernetesDiscovery),
    /// From a DNS name's addresses, resolved again every `interval_ms`.
    Dns(DnsDiscovery),
}

/// The YAML shape of [`DiscoveryConfig`] (serde_yaml reads an enum only from a `!tag`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiscoveryMap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kubernetes: Option<KubernetesDiscovery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dns: Option<DnsDiscovery>,
}

impl TryFrom<DiscoveryMap> for DiscoveryConfig {
    type Error = &'static str;

    fn try_from(m: DiscoveryMap) -> Result<Self, Self::Error> {
        match (m.kubernetes, m.dns) {
            (Some(k), None) => Ok(DiscoveryConfig::Kubernetes(k)),
            (None, Some(d)) => Ok(DiscoveryConfig::Dns(d)),
            _ => Err("expected exactly one of `kubernetes: {...}` and `dns: {...}`"),
        }
    }
}

impl From<DiscoveryConfig> for DiscoveryMap {
    fn from(d: DiscoveryConfig) -> Self {
        match d {
            DiscoveryConfig::Kubernetes(k) => Self {
                kubernetes: Some(k),
                dns: None,
            },
            DiscoveryConfig::Dns(d) => Self {
                kubernetes: None,
                dns: Some(d),
            },
        }
    }
}

/// A Service's EndpointSlices, or an `InferencePool`'s pods, in one namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesDiscovery {
    /// The namespace; left out, the client's own (the pod's namespace in a cluster, the
    /// kubeconfig context's outside).
    #[serde(default)]
    pub namespace: Option<String>,
    /// A Service whose EndpointSlices list the upstreams.
    #[serde(default)]
    pub service: Option<String>,
    /// An `InferencePool` (`inference.networking.k8s.io/v1`) whose selector picks the
    /// upstreams' pods.
    #[serde(default)]
    pub inference_pool: Option<String>,
    /// The upstreams' port; left out, the EndpointSlice's (its only port, or the one named
    /// `http`) or the pool's first `targetPorts` entry.
    #[serde(default)]
    pub port: Option<u16>,
}

/// A DNS name resolving to every upstream's address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsDiscovery {
    /// The name (A and AAAA records; `localhost` works too).
    pub name: String,
    /// The upstreams' port.
    pub port: u16,
    /// How often the name is resolved again, milliseconds.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
}

fn default_interval_ms() -> u64 {
    5000
}

fn invalid(key: String, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// A DNS-1123 label or subdomain, as Kubernetes object and namespace names are.
fn is_k8s_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

impl DiscoveryConfig {
    /// Checks it (`key` is `pools[i].discovery`).
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        match self {
            DiscoveryConfig::Kubernetes(k) => {
                let key = format!("{key}.kubernetes");
                match (&k.service, &k.inference_pool) {
                    (Some(_), Some(_)) | (None, None) => {
                        return Err(invalid(
                            key,
                            "name exactly one of `service` and `inference_pool`",
                        ))
                    }
                    _ => {}
                }
                for (field, v) in [
                    ("namespace", &k.namespace),
                    ("service", &k.service),
                    ("inference_pool", &k.inference_pool),
                ] {
                    if let Some(v) = v {
                        if !is_k8s_name(v) {
                            return Err(invalid(
                                format!("{key}.{field}"),
                                format!("{v:?} is not a Kubernetes object name (DNS-1123)"),
                            ));
                        }
                    }
                }
                if k.port == Some(0) {
                    return Err(invalid(format!("{key}.port"), "must be in 1..=65535"));
                }
            }
            DiscoveryConfig::Dns(d) => {
                let key = format!("{key}.dns");
                if d.name.trim().is_empty() || d.name.contains([':', '/', ' ']) {
                    return Err(invalid(
                        format!("{key}.name"),
                        format!("{:?}: expected a host name, without port or scheme", d.name),
                    ));
                }
                if d.port == 0 {
                    return Err(invalid(format!("{key}.port"), "must be in 1..=65535"));
                }
                if !(100..=3_600_000).contains(&d.interval_ms) {
                    return Err(invalid(
                        format!("{key}.interval_ms"),
                        "must be in 100..=3600000",
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn load(pool: &str) -> Result<Config, String> {
        let yaml = format!("auth: {{enabled: false}}\npools:\n  - {pool}\n");
        let c = Config::from_yaml(&yaml).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn discovery_parses_and_is_refused_naming_the_key() {
        use super::DiscoveryConfig;
        let c = load(
            "{name: a, engine: warmpath, discovery: {kubernetes: {service: replica, port: 9000}}}",
        )
        .unwrap();
        match &c.pools[0].discovery {
            Some(DiscoveryConfig::Kubernetes(k)) => {
                assert_eq!(
                    (k.service.as_deref(), k.port),
                    (Some("replica"), Some(9000))
                );
                assert!(k.namespace.is_none() && k.inference_pool.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(c.targets().is_empty(), "a discovered pool lists no target");
        let c = load("{name: a, engine: openai, discovery: {dns: {name: localhost, port: 8000}}}")
            .unwrap();
        assert!(
            matches!(&c.pools[0].discovery, Some(DiscoveryConfig::Dns(d)) if d.interval_ms == 5000)
        );
        let cases = [
            ("{name: a, engine: openai}", "pools[0].upstreams"),
            (
                "{name: a, engine: openai, discovery: {kubernetes: {}}}",
                "pools[0].discovery.kubernetes",
            ),
            (
                "{name: a, engine: openai, discovery: {kubernetes: {service: s, inference_pool: p}}}",
                "pools[0].discovery.kubernetes",
            ),
            (
                "{name: a, engine: openai, discovery: {kubernetes: {service: Bad_Name}}}",
                "pools[0].discovery.kubernetes.service",
            ),
            (
                "{name: a, engine: openai, discovery: {kubernetes: {service: s, prot: 1}}}",
                "unknown field `prot`",
            ),
            (
                "{name: a, engine: openai, discovery: {dns: {name: 'h:1', port: 1}}}",
                "pools[0].discovery.dns.name",
            ),
            (
                "{name: a, engine: openai, discovery: {dns: {name: h, port: 1, interval_ms: 5}}}",
                "pools[0].discovery.dns.interval_ms",
            ),
            (
                "{name: a, engine: openai, discovery: {}}",
                "exactly one of `kubernetes",
            ),
            (
                "{name: a, engine: openai, discovery: {consul: {name: h}}}",
                "unknown field `consul`",
            ),
        ];
        for (pool, want) in cases {
            let err = load(pool).unwrap_err();
            assert!(err.contains(want), "{pool}: {err}");
        }
    }
}
