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
//! Only blocks the gateway's own requests could reach are kept; everything else is skipped
//! with a [`SkipReason`] (block size unlike the gateway's, parent never seen, a partial page,
//! LoRA, extra keys, another medium or KV cache group, an unknown event type, a full map).
//! Removals of engine hashes the map does not know are dropped silently: they are the
//! skipped blocks.
//!
//! Tiers: vLLM's `medium` (`"GPU"`, `"CPU"`, ...) names where the engine itself keeps a
//! block. Only GPU blocks are mapped, and always as [`KvTier::Device`]: a CPU or disk
//! offload tier belongs to that one engine (it is not the cluster's shared tier, which
//! only Warmpath replicas report as [`KvTier::Shared`]), so those events stay skipped.
//!
//! The map is bounded by `max_blocks`: at the bound a `BlockStored` that would add entries
//! is skipped ([`SkipReason::MapFull`]) until removals make room. Entries already mapped stay
//! true, so the index never hears of a block the engine does not hold; new blocks are just
//! not routable. Size the bound above the engine's number of KV blocks (vLLM logs it as
//! `# GPU blocks`), and the bound is never reached while removals arrive.

use super::wire::{EngineEvent, EngineHash};
use std::collections::HashMap;
use warmpath_core::hash::block_hash;
use warmpath_core::{BlockHash, BlockSize, KvEvent, KvTier, RootSeed, TokenId};

/// Why an engine event produced nothing for the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The engine's block size differs from the gateway's.
    BlockSizeMismatch {
        /// The event's block size.
        engine: u32,
        /// The gateway's.
        gateway: u32,
    },
    /// The parent block was never mapped (stored before we listened, or itself skipped).
    UnknownParent,
    /// Only a partial block (SGLang's trailing page): the contract hashes full blocks only.
    PartialBlock,
    /// `token_ids` does not fit the number of hashes and the block size.
    TokenCountMismatch,
    /// The blocks belong to a LoRA adapter; the gateway hashes base-model prompts.
    Lora,
    /// The engine hashed more than the tokens (multimodal ids, a cache salt).
    ExtraKeys,
    /// A medium other than the GPU (an offload tier).
    OtherMedium,
    /// A KV cache group other than the first (hybrid models).
    OtherGroup,
    /// An event type the decoder does not know.
    UnknownEvent,
    /// The map is at its bound.
    MapFull,
}

impl SkipReason {
    /// Every reason's label, indexed by [`SkipReason::index`].
    pub const LABELS: [&'static str; 10] = [
        "block_size_mismatch",
        "unknown_parent",
        "partial_block",
        "token_count_mismatch",
        "lora",
        "extra_keys",
        "other_medium",
        "other_group",
        "unknown_event",
        "map_full",
    ];

    /// A dense index, for a counter per reason.
    pub fn index(self) -> usize {
        match self {
            SkipReason::BlockSizeMismatch { .. } => 0,
            SkipReason::UnknownParent => 1,
            SkipReason::PartialBlock => 2,
            SkipReason::TokenCountMismatch => 3,
            SkipReason::Lora => 4,
            SkipReason::ExtraKeys => 5,
            SkipReason::OtherMedium => 6,
            SkipReason::OtherGroup => 7,
            SkipReason::UnknownEvent => 8,
            SkipReason::MapFull => 9,
        }
    }

    /// A metrics label.
    pub fn label(self) -> &'static str {
        Self::LABELS[self.index()]
    }
}

/// Turns one engine's events into Warmpath [`KvEvent`]s. Pure: no I/O, no clock.
#[derive(Debug)]
pub struct EventMapper {
    seed: RootSeed,
    block_size: BlockSize,
    max_blocks: usize,
    map: HashMap<EngineHash, BlockHash>,
}

impl EventMapper {
    /// A mapper for blocks hashed from `seed` (the pool's namespace: its checkpoint, no
    /// adapter, no tenant salt) in blocks of `block_size`, tracking at most `max_blocks`
    /// engine blocks (at least 1). A zero block size is raised to 1.
    pub(crate) fn new(seed: RootSeed, block_size: BlockSize, max_blocks: usize) -> Self {
        Self {
            seed,
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
        self.map.get(engine).copied()
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
                check_placement(medium.as_deref(), *group)?;
                if lora.is_some() {
                    return Err(SkipReason::Lora);
                }
                if *extra_keys {
                    return Err(SkipReason::ExtraKeys);
                }
                self.stored(hashes, parent.as_ref(), token_ids, *block_size)
            }
            EngineEvent::Removed {
                hashes,
                medium,
                group,
            } => {
                check_placement(medium.as_deref(), *group)?;
                let removed: Vec<BlockHash> =
                    hashes.iter().filter_map(|h| self.map.remove(h)).collect();
                Ok((!removed.is_empty()).then_some(KvEvent::Removed {
                    hashes: removed,
                    tier: KvTier::Device,
                }))
            }
            EngineEvent::Cleared => {
                self.map.clear();
                Ok(Some(KvEvent::Cleared))
            }
            EngineEvent::Unknown { .. } => Err(SkipReason::UnknownEvent),
        }
    }

    fn stored(
        &mut self,
        hashes: &[EngineHash],
        parent: Option<&EngineHash>,
        token_ids: &[u32],
        block_size: u32,
    ) -> Result<Option<KvEvent>, SkipReason> {
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
            Some(p) => Some(self.map.get(p).copied().ok_or(SkipReason::UnknownParent)?),
        };
        let new = hashes[..full]
            .iter()
            .filter(|h| !self.map.contains_key(h))
            .count();
        if self.map.len() + new > self.max_blocks {
            return Err(SkipReason::MapFull);
        }
        let mut prev = parent_hash.map_or(self.seed.0, |p| p.0);
        let mut out = Vec::with_capacity(full);
        let mut block = Vec::with_capacity(bs);
        for (engine, tokens) in hashes.iter().zip(token_ids.chunks_exact(bs)) {
            block.clear();
            block.extend(tokens.iter().map(|&t| TokenId(t)));
            let h = block_hash(prev, &block);
            prev = h.0;
            self.map.insert(engine.clone(), h);
            out.push(h);
        }
        Ok(Some(KvEvent::Stored {
            parent: parent_hash,
            hashes: out,
            tier: KvTier::Device,
        }))
    }
}

/// Only GPU-resident blocks of the first KV cache group are routable state.
fn check_placement(medium: Option<&str>, group: Option<u32>) -> Result<(), SkipReason> {
    if medium.is_some_and(|m| !m.eq_ignore_ascii_case("gpu")) {
        return Err(SkipReason::OtherMedium);
    }
    if group.is_some_and(|g| g != 0) {
        return Err(SkipReason::OtherGroup);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
