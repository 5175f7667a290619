//! Typed identifiers shared by every Warmpath component.
//!
//! Raw `u32`/`u64`/`String` values never cross a public signature: a token id, a block
//! hash and a replica id are different things and the compiler keeps them apart.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// One vocabulary id as produced by the tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TokenId(pub u32);

/// Chained hash of one full block of tokens (see [`crate::hash`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BlockHash(pub u64);

impl fmt::Display for BlockHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Index of one KV page of a replica's page pool (`0..num_pages`): the engine stores a
/// block's K/V in the page it is told about, and the radix cache (`warmpath-kv-cache`)
/// decides which page holds which block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId(pub u32);

/// Identifies one replica inside a gateway or simulator. Dense, assigned at registration.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ReplicaId(pub u32);

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// The exact model weights a replica serves, e.g. `smollm2-135m-instruct-q4_1@sha256:1f2e...`.
/// Two replicas share cache hashes only when their checkpoint ids are byte-equal. Shared
/// text: every routing snapshot carries it, and a clone is a reference count, not a copy.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CheckpointId(Arc<str>);

impl CheckpointId {
    /// Wraps a checkpoint id.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for CheckpointId {
    fn default() -> Self {
        Self::new("")
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A region (or zone) label, e.g. `eu`. Replicas, pools, gateways and tenants' residency
/// lists carry it; a clone is a reference count.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RegionId(Arc<str>);

impl RegionId {
    /// Wraps a region label.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }
    /// The label as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Per-tenant cache namespace. Set by the gateway (keyed HMAC of the tenant id), never by
/// clients; requests with different salts never share a cached block.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CacheSalt(pub String);

impl CacheSalt {
    /// Wraps a salt.
    pub fn new(salt: impl Into<String>) -> Self {
        Self(salt.into())
    }
    /// The salt as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Tokens per block (= KV page size). Only full blocks are hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BlockSize(pub u32);

impl BlockSize {
    /// The default page size, as in SGLang and vLLM.
    pub const DEFAULT: BlockSize = BlockSize(16);

    /// Number of full blocks in `tokens` tokens.
    pub fn full_blocks(self, tokens: usize) -> usize {
        tokens / self.0 as usize
    }
    /// Block size as `usize`.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

impl Default for BlockSize {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Milliseconds on a caller-supplied clock. The library never reads a clock itself, so the
/// simulator can run on virtual time and tests are deterministic.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_id_is_plain_text_on_the_wire_and_shared_when_cloned() {
        let c = CheckpointId::new("smollm2@sha256:1f2e");
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            "\"smollm2@sha256:1f2e\""
        );
        let back: CheckpointId = serde_json::from_str("\"smollm2@sha256:1f2e\"").unwrap();
        assert_eq!(back, c);
        assert_eq!(c.to_string(), "smollm2@sha256:1f2e");
        // A clone is a reference count: the same text, not a copy.
        assert_eq!(c.clone().as_str().as_ptr(), c.as_str().as_ptr());
        assert_eq!(CheckpointId::default().as_str(), "");
    }
}
