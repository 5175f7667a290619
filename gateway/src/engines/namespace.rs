//! The namespace an engine pool's requests are hashed in, so the gateway's block hashes
//! equal the ones the engine's KV events are re-hashed into (`kv_events::rehash`):
//!
//! - **Tenant salt.** With `cache_salt: per_tenant` (the default for `vllm`) the gateway
//!   sends the tenant's salt as vLLM's request field `cache_salt`
//!   ([`crate::proxy::salt`]); vLLM puts it in the first block's extra keys and reports it
//!   in `BlockStored.extra_keys`, which the mapper turns into the same salted namespace.
//!   Without a salt an engine that publishes events shares its blocks across tenants, so
//!   its requests are hashed unsalted (the namespace the events describe). A pool without
//!   events keeps per-tenant hashes in its routing history either way.
//! - **LoRA adapter.** A request whose model is one of the pool's `lora_adapters` is
//!   hashed with that adapter ([`warmpath_core::HashNamespace::with_adapter`]), as vLLM's
//!   events name it (`lora_name`): base-model blocks never predict hits for it.

use crate::config::{PoolConfig, SaltMode};
use std::sync::Arc;
use warmpath_core::{CacheSalt, CheckpointId, HashNamespace, RootSeed};

/// What a pool's requests add to the checkpoint's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EngineNamespace {
    /// Whether each request carries its tenant's salt as `cache_salt`.
    pub salt: bool,
    /// Model names that are LoRA adapters of the pool's base model.
    pub adapters: Arc<[String]>,
}

impl EngineNamespace {
    /// The pool's settings, defaults applied.
    pub(crate) fn of(pool: &PoolConfig) -> Self {
        Self {
            salt: pool.salt_mode() == SaltMode::PerTenant,
            adapters: pool.lora_adapters.clone().into(),
        }
    }

    /// The adapter `model` names, when it is one of the pool's.
    pub(crate) fn adapter(&self, model: &str) -> Option<&str> {
        self.adapters
            .iter()
            .find(|a| a.as_str() == model)
            .map(String::as_str)
    }

    /// The root seed of a request for `model` on `checkpoint` from the tenant whose salt is
    /// `salt`; `tenant_seed` gives that tenant's own (cached) seed of the checkpoint, the
    /// answer when neither an adapter nor an unsalted engine changes it. `events`: the
    /// engine publishes KV events (its blocks are salted only when the salt is sent).
    pub(crate) fn seed(
        &self,
        checkpoint: &CheckpointId,
        model: &str,
        events: bool,
        (salt, tenant_seed): (&CacheSalt, impl FnOnce() -> RootSeed),
    ) -> RootSeed {
        let adapter = self.adapter(model);
        if adapter.is_none() && (self.salt || !events) {
            return tenant_seed();
        }
        let salt = (self.salt || !events).then(|| salt.clone());
        HashNamespace::new(checkpoint.clone())
            .with_adapter(adapter.map(str::to_string))
            .with_salt(salt)
            .root_seed()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vllm_tests;
