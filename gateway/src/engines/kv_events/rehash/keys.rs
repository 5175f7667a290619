//! What an engine block's placement and extra keys say about the namespace it is hashed in:
//! the tier its `medium` names, the adapter its `lora_name` names, and the tenant salt its
//! first block's `extra_keys` carry.
//!
//! vLLM (`vllm/v1/core/kv_cache_utils.py`, `generate_block_hash_extra_keys`) hashes each
//! block as `hash((parent, tokens, extra_keys))` with `extra_keys = lora + mm + salt +
//! prompt_embeds`: the adapter's name on every block of an adapter request, multimodal
//! `(identifier, offset)` pairs on the blocks an input overlaps, the request's `cache_salt`
//! on the first block only (the chain carries it on), a prompt embedding's digest. It
//! reports them per block in `BlockStored.extra_keys`. The adapter and the salt map onto
//! Warmpath's [`warmpath_core::HashNamespace`] exactly (the adapter and the salt are in the
//! root seed, so every later block differs too); anything else is skipped.

use crate::engines::kv_events::skip::SkipReason;
use crate::engines::kv_events::wire::{EngineLora, ExtraKey};
use warmpath_core::{CacheSalt, KvTier};

/// The tier a `medium` names: the GPU (or none said) is the device, anything else (`CPU`,
/// `DISK`, LMCache's) the replica's offload tier.
pub(super) fn tier(medium: Option<&str>) -> KvTier {
    match medium {
        Some(m) if !m.eq_ignore_ascii_case("gpu") => KvTier::Offload,
        _ => KvTier::Device,
    }
}

/// Only the first KV cache group stands for the request (hybrid models have more).
pub(super) fn check_group(group: Option<u32>) -> Result<(), SkipReason> {
    match group {
        Some(g) if g != 0 => Err(SkipReason::OtherGroup),
        _ => Ok(()),
    }
}

/// The adapter of a stored block, by name: an adapter known only by its id (the oldest
/// events) cannot be matched to a model name, so it is skipped.
pub(super) fn adapter(lora: Option<&EngineLora>) -> Result<Option<&str>, SkipReason> {
    match lora {
        None => Ok(None),
        Some(EngineLora { name: Some(n), .. }) => Ok(Some(n)),
        Some(_) => Err(SkipReason::Lora),
    }
}

/// The cache salt in one block's extra keys, once the adapter's own key (its name, or an
/// older vLLM's id) is set aside. A salt is a lone string on a chain's first block (`root`);
/// any other key (multimodal, embeddings, a salt deeper in the chain) is
/// [`SkipReason::ExtraKeys`].
pub(super) fn salt(
    keys: &[ExtraKey],
    lora: Option<&EngineLora>,
    root: bool,
) -> Result<Option<CacheSalt>, SkipReason> {
    let is_lora = |k: &ExtraKey| match (k, lora) {
        (ExtraKey::Text(s), Some(l)) => l.name.as_deref() == Some(s.as_str()),
        (ExtraKey::Int(i), Some(l)) => l.id == Some(*i),
        _ => false,
    };
    let mut rest = keys.iter().filter(|k| !is_lora(k));
    match (rest.next(), rest.next()) {
        (None, _) => Ok(None),
        (Some(ExtraKey::Text(s)), None) if root => Ok(Some(CacheSalt::new(s.clone()))),
        _ => Err(SkipReason::ExtraKeys),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> ExtraKey {
        ExtraKey::Text(s.into())
    }

    #[test]
    fn salts_adapters_and_other_keys() {
        let lora = EngineLora {
            id: Some(3),
            name: Some("sql".into()),
        };
        assert_eq!(salt(&[], None, true), Ok(None));
        assert_eq!(
            salt(&[text("t-a")], None, true),
            Ok(Some(CacheSalt::new("t-a")))
        );
        // The adapter's name comes first on an adapter request's blocks.
        assert_eq!(
            salt(&[text("sql"), text("t-a")], Some(&lora), true),
            Ok(Some(CacheSalt::new("t-a")))
        );
        assert_eq!(salt(&[text("sql")], Some(&lora), false), Ok(None));
        assert_eq!(salt(&[ExtraKey::Int(3)], Some(&lora), false), Ok(None));
        // A salt past the first block, a multimodal key, two strings: not the contract.
        for (keys, root) in [
            (vec![text("t-a")], false),
            (vec![ExtraKey::Other], true),
            (vec![text("t-a"), text("t-b")], true),
            (vec![ExtraKey::Int(9)], true),
        ] {
            assert_eq!(
                salt(&keys, Some(&lora), root),
                Err(SkipReason::ExtraKeys),
                "{keys:?}"
            );
        }
        assert_eq!(adapter(Some(&lora)), Ok(Some("sql")));
        let id_only = EngineLora {
            id: Some(3),
            name: None,
        };
        assert_eq!(adapter(Some(&id_only)), Err(SkipReason::Lora));
        assert_eq!(tier(Some("CPU")), KvTier::Offload);
        assert_eq!(tier(Some("LMCache")), KvTier::Offload);
        assert_eq!(tier(Some("gpu")), KvTier::Device);
        assert_eq!(tier(None), KvTier::Device);
    }
}
