//! The hashing contract: the one definition of how a token sequence becomes block hashes.
//!
//! Used by the gateway (to predict), the replica (to publish what it stores) and the
//! simulator. Changing anything here changes every hash in a running fleet, so the golden
//! test at the bottom pins exact values: a deliberate change bumps [`SCHEME_VERSION`].
//!
//! * The root seed is xxh3-64 over a canonical encoding of
//!   (scheme version, checkpoint id, adapter name or none, cache salt or none).
//! * Block `i`'s hash is xxh3-64 of its tokens as little-endian `u32`s, seeded with block
//!   `i-1`'s hash (block 0 is seeded with the root seed).
//! * Only full blocks are hashed; a trailing partial block has no hash.

use crate::ids::{BlockHash, BlockSize, CacheSalt, CheckpointId, TokenId};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Version of the hashing scheme. Bump it when anything in this file changes the output.
pub const SCHEME_VERSION: u32 = 1;

/// Domain separator so our seeds never collide with some other use of xxh3 on the same bytes.
const DOMAIN: &[u8] = b"warmpath.kv.v";

/// Everything that namespaces a cache: two requests can share a block only if their
/// namespaces are equal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HashNamespace {
    /// The exact weights being served.
    pub checkpoint: CheckpointId,
    /// LoRA / adapter name, if any.
    pub adapter: Option<String>,
    /// Per-tenant salt, if any.
    pub salt: Option<CacheSalt>,
}

impl HashNamespace {
    /// A namespace for a checkpoint with no adapter and no salt.
    pub fn new(checkpoint: CheckpointId) -> Self {
        Self {
            checkpoint,
            adapter: None,
            salt: None,
        }
    }

    /// The same namespace with a tenant salt.
    pub fn with_salt(mut self, salt: Option<CacheSalt>) -> Self {
        self.salt = salt;
        self
    }

    /// The same namespace with an adapter.
    pub fn with_adapter(mut self, adapter: Option<String>) -> Self {
        self.adapter = adapter;
        self
    }

    /// The root seed of every chain in this namespace.
    pub fn root_seed(&self) -> RootSeed {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(DOMAIN);
        buf.extend_from_slice(&SCHEME_VERSION.to_le_bytes());
        put_field(&mut buf, Some(self.checkpoint.as_str()));
        put_field(&mut buf, self.adapter.as_deref());
        put_field(&mut buf, self.salt.as_ref().map(CacheSalt::as_str));
        RootSeed(xxh3_64(&buf))
    }
}

/// Length-prefixed, presence-tagged field: `None` and `Some("")` encode differently and no
/// two field sequences share an encoding.
fn put_field(buf: &mut Vec<u8>, field: Option<&str>) {
    match field {
        None => buf.push(0),
        Some(s) => {
            buf.push(1);
            buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
            buf.extend_from_slice(s.as_bytes());
        }
    }
}

/// Seed of block 0 of every chain in one namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RootSeed(pub u64);

/// Hash of one block given its parent's hash (or the root seed for block 0).
pub fn block_hash(parent: u64, block: &[TokenId]) -> BlockHash {
    // Tokens are hashed as little-endian u32s; on little-endian machines this is the
    // in-memory layout, but we encode explicitly so the contract holds everywhere.
    let mut bytes = [0u8; 4 * 64];
    if block.len() <= 64 {
        for (i, t) in block.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&t.0.to_le_bytes());
        }
        BlockHash(xxh3_64_with_seed(&bytes[..4 * block.len()], parent))
    } else {
        let v: Vec<u8> = block.iter().flat_map(|t| t.0.to_le_bytes()).collect();
        BlockHash(xxh3_64_with_seed(&v, parent))
    }
}

/// Chained hashes of every full block of `tokens`.
pub fn block_hashes(seed: RootSeed, tokens: &[TokenId], block_size: BlockSize) -> Vec<BlockHash> {
    assert!(block_size.0 > 0, "block size must be positive");
    // The batch form of `ChainHasher` (a test pins them equal), sized once: no pending
    // buffer, no regrowth of the hash vector on a long prompt.
    let blocks = tokens.chunks_exact(block_size.get());
    let mut out = Vec::with_capacity(blocks.len());
    let mut prev = seed.0;
    for block in blocks {
        let h = block_hash(prev, block);
        prev = h.0;
        out.push(h);
    }
    out
}

/// Incremental hasher: feed tokens as they are produced (prompt, then generated tokens) and
/// read the hashes of the full blocks so far. `block_hashes` is the batch form.
#[derive(Clone, Debug)]
pub struct ChainHasher {
    block_size: usize,
    prev: u64,
    pending: Vec<TokenId>,
    hashes: Vec<BlockHash>,
}

impl ChainHasher {
    /// A hasher at the root of a chain.
    pub fn new(seed: RootSeed, block_size: BlockSize) -> Self {
        assert!(block_size.0 > 0, "block size must be positive");
        Self {
            block_size: block_size.get(),
            prev: seed.0,
            pending: Vec::with_capacity(block_size.get()),
            hashes: Vec::new(),
        }
    }

    /// Appends tokens, hashing every block they complete.
    pub fn extend(&mut self, tokens: &[TokenId]) {
        let mut rest = tokens;
        if !self.pending.is_empty() {
            let need = self.block_size - self.pending.len();
            let take = need.min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() == self.block_size {
                let h = block_hash(self.prev, &self.pending);
                self.push(h);
                self.pending.clear();
            }
        }
        let mut chunks = rest.chunks_exact(self.block_size);
        for block in &mut chunks {
            let h = block_hash(self.prev, block);
            self.push(h);
        }
        self.pending.extend_from_slice(chunks.remainder());
    }

    fn push(&mut self, h: BlockHash) {
        self.prev = h.0;
        self.hashes.push(h);
    }

    /// Hashes of the full blocks seen so far.
    pub fn hashes(&self) -> &[BlockHash] {
        &self.hashes
    }

    /// Consumes the hasher, returning the full-block hashes.
    pub fn into_hashes(self) -> Vec<BlockHash> {
        self.hashes
    }
}

#[cfg(test)]
mod tests;
