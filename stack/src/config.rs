//! The gateway configuration `warmpath up` writes: loopback listeners, the replicas it
//! started, one development tenant holding the API key, and the admin key that guards the
//! admin listener (dashboard, metrics, admin API).

use crate::error::StackError;
use gateway::config::HfTokenizerFiles;
use gateway::config::{EngineKind, PoolConfig, TenantConfig, TenantLimits, TokenizerSource};
use gateway::Config;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::path::Path;

/// Tenant id of the development tenant.
pub const DEV_TENANT: &str = "dev";

/// A fresh API key: `sk-warmpath-` and 32 random hex digits.
pub fn generate_api_key() -> String {
    format!("sk-warmpath-{}", random_hex(16))
}

/// A fresh admin key: `wp-admin-` and 32 random hex digits.
pub fn generate_admin_key() -> String {
    format!("wp-admin-{}", random_hex(16))
}

/// `n` random bytes as hex.
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// Lowercase hex SHA-256 of `key` (the gateway stores only this).
pub fn key_sha256(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// What goes into the generated gateway config.
#[derive(Clone, Debug)]
pub struct StackConfig {
    /// Data-plane port on 127.0.0.1.
    pub port: u16,
    /// Admin port on 127.0.0.1.
    pub admin_port: u16,
    /// Replica base URLs.
    pub replicas: Vec<String>,
    /// The dev tenant's API key (hashed into the file).
    pub api_key: String,
    /// The admin key (hashed into the file).
    pub admin_key: String,
    /// Secret for tenant cache salts.
    pub salt_secret: String,
    /// Routing policy name, e.g. `warm`.
    pub policy: String,
    /// Existing servers to front instead of `replicas` (`warmpath up --upstream`).
    pub pool: Option<FrontPool>,
}

/// Servers someone already runs, fronted as one pool.
#[derive(Clone, Debug)]
pub struct FrontPool {
    /// `vllm`, `sglang`, `llamacpp`, `openai` or `warmpath`.
    pub engine: String,
    /// Base URLs.
    pub upstreams: Vec<String>,
    /// Where the pool's tokenizer comes from.
    pub tokenizer: TokenizerSource,
}

impl FrontPool {
    /// The tokenizer source for `path`: a `.gguf` file, a `tokenizer.json` (with the
    /// `tokenizer_config.json` beside it, if any, for the chat template), or a directory
    /// holding them; `None` hashes prompts as text.
    pub fn tokenizer_source(path: Option<&Path>) -> TokenizerSource {
        let Some(path) = path else {
            return TokenizerSource::None;
        };
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
        {
            return TokenizerSource::Gguf(path.to_path_buf());
        }
        let (tokenizer, dir) = if path.is_dir() {
            (path.join("tokenizer.json"), path.to_path_buf())
        } else {
            (
                path.to_path_buf(),
                path.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
            )
        };
        let config = dir.join("tokenizer_config.json");
        TokenizerSource::Hf(HfTokenizerFiles {
            tokenizer,
            template: config.is_file().then_some(config),
        })
    }
}

impl StackConfig {
    /// The gateway's configuration: its defaults, with the listeners, the upstreams, the
    /// policy, the development tenant and the admin key of this stack.
    pub fn to_config(&self) -> Result<Config, StackError> {
        // As the gateway reads `policy: {type: NAME}`: the named policy, default parameters.
        let policy = serde_json::from_value(serde_json::json!({ "type": self.policy }))
            .map_err(|e| StackError::Args(format!("--policy {}: {e}", self.policy)))?;
        let mut cfg = Config {
            listen: format!("127.0.0.1:{}", self.port),
            admin_listen: format!("127.0.0.1:{}", self.admin_port),
            threads: 2,
            policy,
            // A local stack stops at once on Ctrl-C.
            shutdown_grace_s: 1,
            ..Config::default()
        };
        cfg.admin.key_sha256 = Some(key_sha256(&self.admin_key));
        cfg.auth.enabled = true;
        cfg.auth.salt_secret = self.salt_secret.clone();
        cfg.tenants = vec![TenantConfig {
            id: DEV_TENANT.into(),
            api_key_sha256: vec![key_sha256(&self.api_key)],
            models: vec!["*".into()],
            limits: TenantLimits {
                requests_per_minute: 600,
                request_burst: 60,
                tokens_per_minute: 2_000_000,
                max_concurrent: 64,
            },
            regions: Vec::new(),
            flow: Default::default(),
        }];
        cfg.health.probe_interval_ms = 2000;
        match &self.pool {
            None => cfg.replicas = self.replicas.clone(),
            Some(p) => {
                let engine: EngineKind = serde_json::from_value(p.engine.clone().into())
                    .map_err(|e| StackError::Args(format!("--engine {}: {e}", p.engine)))?;
                // Every other key of the pool as the gateway defaults it.
                let mut pool: PoolConfig = serde_json::from_value(serde_json::json!({
                    "name": "upstream",
                    "engine": engine,
                    "upstreams": p.upstreams,
                }))
                .map_err(|e| StackError::Args(format!("--upstream: {e}")))?;
                pool.tokenizer = p.tokenizer.clone();
                cfg.pools = vec![pool];
            }
        }
        Ok(cfg)
    }

    /// The YAML text: [`StackConfig::to_config`] serialized, every key written (see
    /// configs/gateway.example.yaml for what each means).
    pub fn to_yaml(&self) -> Result<String, StackError> {
        let mut v = serde_yaml::to_value(self.to_config()?)
            .map_err(|e| StackError::Args(format!("gateway config: {e}")))?;
        untag(&mut v);
        let text = serde_yaml::to_string(&v)
            .map_err(|e| StackError::Args(format!("gateway config: {e}")))?;
        Ok(format!(
            "# Written by `warmpath up`; deleted when it stops.\n{text}"
        ))
    }
}

/// serde_yaml writes an enum's newtype variant as a tagged value (`!gguf PATH`); the
/// gateway reads the single-key mapping form (`{gguf: PATH}`), as in its example configs.
fn untag(v: &mut serde_yaml::Value) {
    use serde_yaml::Value;
    match v {
        Value::Tagged(t) => {
            let tag = t.tag.to_string();
            let mut inner = std::mem::replace(&mut t.value, Value::Null);
            untag(&mut inner);
            let mut m = serde_yaml::Mapping::new();
            m.insert(
                Value::String(tag.trim_start_matches('!').to_string()),
                inner,
            );
            *v = Value::Mapping(m);
        }
        Value::Sequence(s) => s.iter_mut().for_each(untag),
        Value::Mapping(m) => m.iter_mut().for_each(|(_, x)| untag(x)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_hash_is_hex_sha256() {
        let (a, b) = (generate_api_key(), generate_api_key());
        assert_ne!(a, b);
        assert!(a.starts_with("sk-warmpath-") && a.len() == 12 + 32, "{a}");
        // printf %s sk-dev-local | sha256sum (the example config's key)
        assert_eq!(
            key_sha256("sk-dev-local"),
            "c2ed58e590dac70908894812c7d38a9fbca1fc385edcc8fcc7d9cb7d967701b7"
        );
    }

    #[test]
    fn generated_config_is_accepted_by_the_gateway() {
        let c = StackConfig {
            port: 18080,
            admin_port: 18081,
            replicas: vec![
                "http://127.0.0.1:9001".into(),
                "http://127.0.0.1:9002".into(),
            ],
            api_key: "sk-warmpath-test".into(),
            admin_key: "wp-admin-test".into(),
            salt_secret: random_hex(16),
            policy: "warm".into(),
            pool: None,
        };
        let cfg = gateway::Config::from_yaml(&c.to_yaml().expect("writes")).expect("parses");
        cfg.validate().expect("valid");
        assert_eq!(cfg.listen, "127.0.0.1:18080");
        assert_eq!(cfg.replicas.len(), 2);
        assert_eq!(cfg.tenants[0].id, DEV_TENANT);
        assert_eq!(
            cfg.tenants[0].api_key_sha256,
            vec![key_sha256("sk-warmpath-test")]
        );
        assert_eq!(cfg.shutdown_grace_s, 1);
        assert_eq!(
            cfg.admin.key_sha256,
            Some(key_sha256("wp-admin-test")),
            "the admin listener needs the admin key"
        );
    }

    #[test]
    fn fronting_config_names_the_pool() {
        let c = StackConfig {
            port: 18080,
            admin_port: 18081,
            replicas: vec![],
            api_key: "sk-warmpath-test".into(),
            admin_key: "wp-admin-test".into(),
            salt_secret: random_hex(16),
            policy: "warm".into(),
            pool: Some(FrontPool {
                engine: "vllm".into(),
                upstreams: vec![
                    "http://127.0.0.1:9001".into(),
                    "http://127.0.0.1:9002".into(),
                ],
                tokenizer: FrontPool::tokenizer_source(None),
            }),
        };
        let cfg = gateway::Config::from_yaml(&c.to_yaml().expect("writes")).expect("parses");
        cfg.validate().expect("valid");
        assert!(cfg.replicas.is_empty());
        assert_eq!(cfg.pools.len(), 1);
        assert_eq!(cfg.pools[0].engine, gateway::config::EngineKind::Vllm);
        assert_eq!(cfg.targets().len(), 2);
        assert_eq!(
            FrontPool::tokenizer_yaml(Some(std::path::Path::new("/m/x.gguf"))),
            r#"{gguf: "/m/x.gguf"}"#
        );
        assert_eq!(
            FrontPool::tokenizer_source(Some(std::path::Path::new("/m/x.gguf"))),
            TokenizerSource::Gguf("/m/x.gguf".into())
        );
    }

    /// Every key of a parsed config, as the gateway serializes it.
    fn parsed(yaml: &str) -> serde_yaml::Value {
        let cfg = gateway::Config::from_yaml(yaml).expect("parses");
        serde_yaml::to_value(cfg).expect("serializes")
    }

    fn stack(policy: &str, pool: Option<(&str, Option<&Path>)>) -> StackConfig {
        StackConfig {
            port: 18080,
            admin_port: 18081,
            replicas: match pool {
                None => vec![
                    "http://127.0.0.1:9001".into(),
                    "http://127.0.0.1:9002".into(),
                ],
                Some(_) => vec![],
            },
            api_key: "sk-warmpath-test".into(),
            admin_key: "wp-admin-test".into(),
            salt_secret: random_hex(16),
            policy: policy.into(),
            pool: pool.map(|(engine, tokenizer)| FrontPool {
                engine: engine.into(),
                upstreams: vec![
                    "http://127.0.0.1:9001".into(),
                    "http://127.0.0.1:9002".into(),
                ],
                tokenizer: FrontPool::tokenizer_source(tokenizer),
            }),
        }
    }

    #[test]
    fn serialized_config_parses_as_the_format_text_did() {
        let dir = std::env::temp_dir().join(format!("warmpath-cfg-{}", random_hex(6)));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("tokenizer_config.json"), "{}").expect("write");
        let gguf = Path::new("/m/x.gguf");
        let json = Path::new("/m/tok/tokenizer.json");
        let mut shapes = vec![];
        for policy in ["warm", "round_robin", "random", "kv_cost", "cache_aware"] {
            shapes.push((stack(policy, None), None));
        }
        for engine in ["vllm", "sglang", "llamacpp", "openai", "warmpath"] {
            shapes.push((stack("warm", Some((engine, None))), None));
        }
        for tokenizer in [gguf, json, dir.as_path()] {
            let c = stack("least_loaded", Some(("vllm", Some(tokenizer))));
            shapes.push((c, Some(tokenizer)));
        }
        for (c, tokenizer) in shapes {
            let new = c.to_yaml().expect("writes");
            let old = legacy_yaml(&c, &FrontPool::tokenizer_yaml(tokenizer));
            assert_eq!(parsed(&new), parsed(&old), "{new}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_policy_or_engine_is_a_flag_error() {
        let mut c = stack("fastest", None);
        assert!(matches!(c.to_yaml(), Err(StackError::Args(m)) if m.contains("--policy")));
        c = stack("warm", Some(("tgi", None)));
        assert!(matches!(c.to_yaml(), Err(StackError::Args(m)) if m.contains("--engine")));
    }

    // The `format!` text `warmpath up` wrote before it serialized the gateway's own
    // types, kept as the oracle the serialized config must parse the same as.

    impl FrontPool {
        fn tokenizer_yaml(path: Option<&Path>) -> String {
            let q = |p: &Path| serde_json::Value::from(p.display().to_string()).to_string();
            let Some(path) = path else {
                return "none".into();
            };
            if path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
            {
                return format!("{{gguf: {}}}", q(path));
            }
            let (tokenizer, dir) = if path.is_dir() {
                (path.join("tokenizer.json"), path.to_path_buf())
            } else {
                (
                    path.to_path_buf(),
                    path.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
                )
            };
            let config = dir.join("tokenizer_config.json");
            if config.is_file() {
                format!(
                    "{{hf: {{tokenizer: {}, template: {}}}}}",
                    q(&tokenizer),
                    q(&config)
                )
            } else {
                format!("{{hf: {{tokenizer: {}}}}}", q(&tokenizer))
            }
        }
    }

    fn legacy_yaml(c: &StackConfig, tokenizer_yaml: &str) -> String {
        let replicas: String = match &c.pool {
            None => c.replicas.iter().map(|u| format!("  - {u}\n")).collect(),
            Some(p) => {
                let ups: String = p
                    .upstreams
                    .iter()
                    .map(|u| format!("      - {u}\n"))
                    .collect();
                format!(
                    "  []\npools:\n  - name: upstream\n    engine: {}\n    tokenizer: {}\n    upstreams:\n{ups}",
                    p.engine, tokenizer_yaml
                )
            }
        };
        format!(
            "# Written by `warmpath up`; deleted when it stops.\n\
             listen: 127.0.0.1:{port}\n\
             admin_listen: 127.0.0.1:{admin}\n\
             admin:\n  key_sha256: {admin_hash}\n\
             threads: 2\n\
             replicas:\n{replicas}\
             policy:\n  type: {policy}\n\
             auth:\n  enabled: true\n  salt_secret: {salt}\n\
             tenants:\n\
             \x20 - id: {tenant}\n\
             \x20   api_key_sha256: [{hash}]\n\
             \x20   models: [\"*\"]\n\
             \x20   limits: {{requests_per_minute: 600, request_burst: 60, tokens_per_minute: 2000000, max_concurrent: 64}}\n\
             health:\n  probe_interval_ms: 2000\n\
             # A local stack stops at once on Ctrl-C.\n\
             shutdown_grace_s: 1\n",
            port = c.port,
            admin = c.admin_port,
            policy = c.policy,
            salt = c.salt_secret,
            tenant = DEV_TENANT,
            hash = key_sha256(&c.api_key),
            admin_hash = key_sha256(&c.admin_key),
        )
    }
}
