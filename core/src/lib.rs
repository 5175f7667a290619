//! # warmpath-core
//!
//! The vocabulary every Warmpath crate shares, defined once and at the bottom of the crate
//! graph: it depends on nothing of the workspace, and has no async runtime, HTTP, clock or
//! policy. The gateway, the replica, the engine, the policies and the simulator all name
//! tokens, blocks, replicas, checkpoints and KV events with these types, so the hashing
//! contract and the KV event schema exist exactly once (golden tests pin both).
//!
//! # Layout
//! - [`ids`]: typed identifiers (`TokenId`, `BlockHash`, `ReplicaId`, `CheckpointId`,
//!   `RegionId`, `CacheSalt`, `Millis`, `PageId`, ...).
//! - [`hash`]: the hashing contract (root seed from checkpoint, adapter and salt; chained
//!   block hashes), pinned by a golden test.
//! - [`events`]: the KV event wire schema and the consumer's gap/epoch detection.
//! - [`role`]: replica roles in a prefill/decode split pool.
//! - [`rng`]: the seeded generators and draws every crate of the workspace uses.
//! - [`text_units`]: prompts as packed bytes, hashed when no tokenizer is known.
//!
//! # Use
//! ```
//! use warmpath_core::*;
//! let ns = HashNamespace::new(CheckpointId::new("m@1"));
//! let hashes = block_hashes(ns.root_seed(), &[TokenId(1); 40], BlockSize(16));
//! assert_eq!(hashes.len(), 2); // the trailing 8 tokens make no full block
//! ```

pub mod events;
pub mod hash;
pub mod ids;
pub mod rng;
pub mod role;
pub mod text_units;

pub use events::{
    Epoch, KvEvent, KvEventRecord, KvStreamMessage, KvTier, Observation, SeqNo, StreamCursor,
};
pub use hash::{block_hashes, ChainHasher, HashNamespace, RootSeed, SCHEME_VERSION};
pub use ids::{
    BlockHash, BlockSize, CacheSalt, CheckpointId, Millis, PageId, RegionId, ReplicaId, TokenId,
};
pub use role::ReplicaRole;
