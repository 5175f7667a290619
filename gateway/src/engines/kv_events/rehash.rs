//! [`EventMapper`]: engine KV events rehashed under Warmpath's hashing contract, so the
//! gateway's prefix index can match them against the hashes it computes for requests.
//!
//! An engine names blocks with its own hashes (vLLM: a digest of the tokens, its parent and
//! extra keys; SGLang: its own chain). The mapper keeps a map from engine hash to Warmpath
//! [`BlockHash`]: a `BlockStored` is rehashed block by block from its tokens with
//! [`block_hash`], chained from the parent's Warmpath hash (the namespace's [`RootSeed`]
//! when the parent is `None`), and each engine hash is recorded; `BlockRemoved` translates
//! through the map and forgets the entries; `AllBlocksCleared` clears it.
//!
//! Namespaces: a chain's first block is hashed from the root seed of the pool's namespace
//! with the block's adapter (`lora_name`) and the cache salt its `extra_keys` carry
//! (vLLM's `cache_salt`; [`keys`]), exactly as the gateway hashes a request for that
//! adapter from that tenant, so tenants and adapters never share a predicted block.
//!
//! Only blocks the gateway's own requests could reach are kept; everything else is skipped
//! with a [`SkipReason`] (block size unlike the gateway's, parent never seen, a partial page,
//! an adapter without a name, other extra keys, another KV cache group, an unknown event
//! type, a full map). Removals of engine hashes the map does not know are dropped silently:
//! they are the skipped blocks.
//!
//! Tiers: vLLM's `medium` (`"GPU"`, `"CPU"`, ...) names where the engine itself keeps a
//! block. GPU blocks (or no medium) are [`KvTier::Device`]; any other medium is the
//! replica's own [`KvTier::Offload`] tier (cheaper than a recompute, loadable by that
//! replica only). An engine hash is mapped while either tier holds it; a removal names its
//! tier and removes the block from that tier only. An offload store without tokens (vLLM's
//! CPU offloading reports only hashes) is translated through the map.
//!
//! The map is bounded by `max_blocks`: at the bound a `BlockStored` that would add entries
//! is skipped ([`SkipReason::MapFull`]) until removals make room. Entries already mapped stay
//! true, so the index never hears of a block the engine does not hold; new blocks are just
//! not routable. Size the bound above the engine's number of KV blocks (vLLM logs it as
//! `# GPU blocks`), and the bound is never reached while removals arrive.

mod keys;

use super::skip::SkipReason;

use super::wire::{EngineEvent, EngineHash};
use std::collections::HashMap;
use warmpath_core::hash::block_hash;
use warmpath_core::{
    BlockHash, BlockSize, CacheSalt, HashNamespace, KvEvent, KvTier, RootSeed, TokenId,
};

/// What the map knows of one engine block: its Warmpath hash and the tiers that hold it.
#[derive(Clone, Copy, Debug)]
struct Entry {
    hash: BlockHash,
    device: bool,
    offload: bool,
}

impl Entry {
    fn holds(&mut self, tier: KvTier) -> &mut bool {
        match tier {
            KvTier::Offload => &mut self.offload,
            _ => &mut self.device,
        }
    }
}

/// Turns one engine's events into Warmpath [`KvEvent`]s. Pure: no I/O, no clock.
#[derive(Debug)]
pub struct EventMapper {
    base: HashNamespace,
    seed: RootSeed,
    block_size: BlockSize,
    max_blocks: usize,
    map: HashMap<EngineHash, Entry>,
}

impl EventMapper {
    /// A mapper for blocks of the pool's namespace `base` (its checkpoint, no adapter, no
    /// salt: a chain's first block is hashed from its root seed, or from the seed of `base`
    /// with the block's adapter and cache salt) in blocks of `block_size`, tracking at most
    /// `max_blocks` engine blocks (at least 1). A zero block size is raised to 1.
    pub(crate) fn new(base: HashNamespace, block_size: BlockSize, max_blocks: usize) -> Self {
        Self {
            seed: base.root_seed(),
            base,
            block_size: BlockSize(block_size.0.max(1)),
            max_blocks: max_blocks.max(1),
            map: HashMap::new(),
        }
    }

    /// Engine blocks currently mapped.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is mapped.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The Warmpath hash an engine block was mapped to.
    #[cfg(test)]
    pub(crate) fn get(&self, engine: &EngineHash) -> Option<BlockHash> {
        self.map.get(engine).map(|e| e.hash)
    }

    /// Forgets every mapping (the stream lost its place).
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }

    /// Maps one event: `Ok(Some(_))` to publish, `Ok(None)` when it changes nothing the index
    /// knows (a removal of unmapped blocks), `Err` when skipped.
    pub(crate) fn map(&mut self, event: &EngineEvent) -> Result<Option<KvEvent>, SkipReason> {
        match event {
            EngineEvent::Stored {
                hashes,
                parent,
                token_ids,
                block_size,
                lora,
                medium,
                extra_keys,
                group,
            } => {
                keys::check_group(*group)?;
                let tier = keys::tier(medium.as_deref());
                let adapter = keys::adapter(lora.as_ref())?;
                if tier == KvTier::Offload && token_ids.is_empty() {
                    return self.offloaded(hashes);
                }
                let block = Block {
                    parent: parent.as_ref(),
                    token_ids,
                    block_size: *block_size,
                    tier,
                };
                // The namespace of a chain's root: the adapter, and the salt on its first block.
                let root = match parent {
                    Some(_) => None,
                    None => {
                        let first = extra_keys.first().map_or(&[][..], Vec::as_slice);
                        let salt = keys::salt(first, lora.as_ref(), true)?;
                        Some(self.root_seed(adapter, salt))
                    }
                };
                for (i, k) in extra_keys
                    .iter()
                    .enumerate()
                    .skip(usize::from(root.is_some()))
                {
                    if i < hashes.len() {
                        keys::salt(k, lora.as_ref(), false)?;
                    }
                }
                self.stored(hashes, block, root)
            }
            EngineEvent::Removed {
                hashes,
                medium,
                group,
            } => {
                keys::check_group(*group)?;
                let tier = keys::tier(medium.as_deref());
                let mut removed = Vec::new();
                for h in hashes {
                    let Some(e) = self.map.get_mut(h) else {
                        continue;
                    };
                    if std::mem::take(e.holds(tier)) {
                        removed.push(e.hash);
                    }
                    if !e.device && !e.offload {
                        self.map.remove(h);
                    }
                }
                Ok((!removed.is_empty()).then_some(KvEvent::Removed {
                    hashes: removed,
                    tier,
                }))
            }
            EngineEvent::Cleared => {
                self.map.clear();
                Ok(Some(KvEvent::Cleared))
            }
            EngineEvent::Unknown { .. } => Err(SkipReason::UnknownEvent),
        }
    }

    /// The root seed of a chain in the pool's namespace with `adapter` and `salt`.
    fn root_seed(&self, adapter: Option<&str>, salt: Option<CacheSalt>) -> RootSeed {
        if adapter.is_none() && salt.is_none() {
            return self.seed;
        }
        self.base
            .clone()
            .with_adapter(adapter.map(str::to_string))
            .with_salt(salt)
            .root_seed()
    }

    /// An offload store without tokens (vLLM's CPU offloading reports only the hashes):
    /// the blocks the map already knows, now also in the offload tier.
    fn offloaded(&mut self, hashes: &[EngineHash]) -> Result<Option<KvEvent>, SkipReason> {
        let mut out = Vec::new();
        for h in hashes {
            if let Some(e) = self.map.get_mut(h) {
                e.offload = true;
                out.push(e.hash);
            }
        }
        if out.is_empty() && !hashes.is_empty() {
            return Err(SkipReason::UnknownBlock);
        }
        Ok((!out.is_empty()).then_some(KvEvent::Stored {
            parent: None,
            hashes: out,
            tier: KvTier::Offload,
        }))
    }

    fn stored(
        &mut self,
        hashes: &[EngineHash],
        block: Block<'_>,
        root: Option<RootSeed>,
    ) -> Result<Option<KvEvent>, SkipReason> {
        let Block {
            parent,
            token_ids,
            block_size,
            tier,
        } = block;
        let bs = self.block_size.get();
        if block_size != self.block_size.0 {
            // SGLang reports a trailing partial page with its own length as block size.
            let partial = hashes.len() == 1
                && (block_size as usize) < bs
                && token_ids.len() == block_size as usize;
            return Err(if partial {
                SkipReason::PartialBlock
            } else {
                SkipReason::BlockSizeMismatch {
                    engine: block_size,
                    gateway: self.block_size.0,
                }
            });
        }
        if hashes.is_empty() {
            return Ok(None);
        }
        // All blocks full, or all but the last (some engines send its tokens too).
        let full = token_ids.len() / bs;
        if token_ids.len() > hashes.len() * bs || full + 1 < hashes.len() {
            return Err(SkipReason::TokenCountMismatch);
        }
        if full == 0 {
            return Err(SkipReason::PartialBlock);
        }
        let parent_hash = match parent {
            None => None,
            Some(p) => Some(self.map.get(p).ok_or(SkipReason::UnknownParent)?.hash),
        };
        let new = hashes[..full]
            .iter()
            .filter(|h| !self.map.contains_key(h))
            .count();
        if self.map.len() + new > self.max_blocks {
            return Err(SkipReason::MapFull);
        }
        let mut prev = parent_hash.map_or(root.unwrap_or(self.seed).0, |p| p.0);
        let mut out = Vec::with_capacity(full);
        let mut block = Vec::with_capacity(bs);
        for (engine, tokens) in hashes.iter().zip(token_ids.chunks_exact(bs)) {
            block.clear();
            block.extend(tokens.iter().map(|&t| TokenId(t)));
            let h = block_hash(prev, &block);
            prev = h.0;
            let e = self.map.entry(engine.clone()).or_insert(Entry {
                hash: h,
                device: false,
                offload: false,
            });
            e.hash = h;
            *e.holds(tier) = true;
            out.push(h);
        }
        Ok(Some(KvEvent::Stored {
            parent: parent_hash,
            hashes: out,
            tier,
        }))
    }
}

/// A `BlockStored`'s blocks: where they chain from, their tokens, size and tier.
struct Block<'a> {
    parent: Option<&'a EngineHash>,
    token_ids: &'a [u32],
    block_size: u32,
    tier: KvTier,
}

#[cfg(test)]
mod ns_tests;
#[cfg(test)]
mod tests;
