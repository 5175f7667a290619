//! The gateway configuration `warmpath up` writes: loopback listeners, the replicas it
//! started, one development tenant holding the API key, and the admin key that guards the
//! admin listener (dashboard, metrics, admin API).

use rand::RngCore;
use sha2::{Digest, Sha256};

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
    /// The tokenizer source as a YAML flow value (`none`, `{gguf: "..."}`, `{hf: {...}}`).
    pub tokenizer_yaml: String,
}

impl FrontPool {
    /// The tokenizer source for `path`: a `.gguf` file, a `tokenizer.json` (with the
    /// `tokenizer_config.json` beside it, if any, for the chat template), or a directory
    /// holding them; `None` hashes prompts as text.
    pub fn tokenizer_yaml(path: Option<&std::path::Path>) -> String {
        let q = |p: &std::path::Path| serde_json::Value::from(p.display().to_string()).to_string();
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

impl StackConfig {
    /// The YAML text (see configs/gateway.example.yaml for every key).
    pub fn to_yaml(&self) -> String {
        let replicas: String = match &self.pool {
            None => self.replicas.iter().map(|u| format!("  - {u}\n")).collect(),
            Some(p) => {
                let ups: String = p
                    .upstreams
                    .iter()
                    .map(|u| format!("      - {u}\n"))
                    .collect();
                format!(
                    "  []\npools:\n  - name: upstream\n    engine: {}\n    tokenizer: {}\n    upstreams:\n{ups}",
                    p.engine, p.tokenizer_yaml
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
            port = self.port,
            admin = self.admin_port,
            policy = self.policy,
            salt = self.salt_secret,
            tenant = DEV_TENANT,
            hash = key_sha256(&self.api_key),
            admin_hash = key_sha256(&self.admin_key),
        )
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
        let cfg = gateway::Config::from_yaml(&c.to_yaml()).expect("parses");
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
                tokenizer_yaml: FrontPool::tokenizer_yaml(None),
            }),
        };
        let cfg = gateway::Config::from_yaml(&c.to_yaml()).expect("parses");
        cfg.validate().expect("valid");
        assert!(cfg.replicas.is_empty());
        assert_eq!(cfg.pools.len(), 1);
        assert_eq!(cfg.pools[0].engine, gateway::config::EngineKind::Vllm);
        assert_eq!(cfg.targets().len(), 2);
        assert_eq!(
            FrontPool::tokenizer_yaml(Some(std::path::Path::new("/m/x.gguf"))),
            r#"{gguf: "/m/x.gguf"}"#
        );
    }
}
