//! # router-policy
//!
//! The routing brain of Warmpath as a pure library: no async runtime, no HTTP, no clock.
//! The gateway, the replica and the load-test simulator all depend on it, so the hashing
//! contract and the KV event schema exist exactly once.
//!
//! # Layout
//! - [`ids`]: typed identifiers (`TokenId`, `BlockHash`, `ReplicaId`, `CheckpointId`, ...).
//! - [`hash`]: the hashing contract (root seed, chained block hashes), pinned by a golden test.
//! - [`events`]: the KV event wire schema and the consumer's gap/epoch detection.

pub mod events;
pub mod hash;
pub mod ids;

pub use events::{Epoch, KvEvent, KvEventRecord, KvStreamMessage, Observation, SeqNo, StreamCursor};
pub use hash::{block_hashes, ChainHasher, HashNamespace, RootSeed, SCHEME_VERSION};
pub use ids::{BlockHash, BlockSize, CacheSalt, CheckpointId, Millis, ReplicaId, TokenId};
