//! A pool's namespace settings: `cache_salt` (vLLM's per-request salt) and
//! `lora_adapters`, their defaults and checks. What they do to hashing is in
//! `crate::engines::namespace`.

use super::error::ConfigError;
use super::pools::{EngineKind, PoolConfig, SaltMode};

impl PoolConfig {
    /// The pool's salt mode, its engine's default when left out: `per_tenant` for vLLM
    /// (it takes `cache_salt`), `none` for every other engine.
    pub(crate) fn salt_mode(&self) -> SaltMode {
        self.cache_salt.unwrap_or(match self.engine {
            EngineKind::Vllm => SaltMode::PerTenant,
            _ => SaltMode::None,
        })
    }

    /// Checks `cache_salt` and `lora_adapters` of the pool at `key`.
    pub(crate) fn check_namespace(&self, key: &str) -> Result<(), ConfigError> {
        let invalid = |k: &str, reason: String| ConfigError::Invalid {
            key: format!("{key}.{k}"),
            reason,
        };
        if self.cache_salt == Some(SaltMode::PerTenant) && self.engine != EngineKind::Vllm {
            return Err(invalid(
                "cache_salt",
                format!(
                    "engine `{}` takes no `cache_salt` request field (only vllm does)",
                    self.engine.as_str()
                ),
            ));
        }
        if self.engine == EngineKind::Warmpath && !self.lora_adapters.is_empty() {
            return Err(invalid(
                "lora_adapters",
                "Warmpath's replica serves no LoRA adapters".into(),
            ));
        }
        for (i, a) in self.lora_adapters.iter().enumerate() {
            if a.trim().is_empty() {
                return Err(invalid(&format!("lora_adapters[{i}]"), "is empty".into()));
            }
            if self.models.as_ref().is_some_and(|m| !m.contains(a)) {
                return Err(invalid(
                    &format!("lora_adapters[{i}]"),
                    format!(
                        "`{a}` is not in the pool's `models`: list it there too, so requests \
                         for it reach the pool"
                    ),
                ));
            }
        }
        Ok(())
    }
}
