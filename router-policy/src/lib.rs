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
//! - [`hot`]: the most requested prefixes, replayed to pre-warm a new checkpoint.
//! - [`index`]: the prefix index (precise from events, approximate from routing history).
//! - [`cluster`]: the per-replica snapshot policies read.
//! - [`policy`]: the routing policies behind one trait, selected by [`PolicyConfig`].
//! - [`decision`]: the choice, retry fallbacks and the explanation.
//! - [`disagg`]: replica roles and the prefill/decode choice of a role-split pool.
//! - [`region`]: regions, RTTs, residency pinning and the spill rule.
//! - [`rollout`]: a model on two checkpoints at once: sticky, monotone canary shares.
//! - [`rng`]: the seeded generators and draws every crate of the workspace uses.
//! - [`text_units`]: prompts as packed bytes, hashed when no tokenizer is known.
//!
//! # Use
//! ```
//! use router_policy::*;
//! let ck = CheckpointId::new("m@1");
//! let view = ClusterView::new((0..4).map(|i| ReplicaSnapshot::idle(ReplicaId(i), ck.clone())).collect());
//! let mut index = PrefixIndex::new(IndexConfig::default());
//! let mut policy = PolicyConfig::default().build();
//! let hashes = block_hashes(HashNamespace::new(ck.clone()).root_seed(), &[TokenId(1); 64], BlockSize(16));
//! let req = RouteRequest { checkpoint: &ck, hashes: &hashes, prompt_tokens: 64, block_size: BlockSize(16), now: Millis(0), regions: None, residency: &[] };
//! let d = policy.select(&req, &view, &index).expect("four healthy replicas");
//! index.record_routed(d.replica, &hashes, Millis(0));
//! assert_eq!(d.explanation.branch, Branch::ColdHome);
//! assert_eq!(index.match_prefix(&hashes, Millis(1)).get(d.replica).approx_blocks, 4);
//! ```

pub mod cluster;
pub mod decision;
pub mod disagg;
pub mod error;
pub mod events;
pub mod hash;
pub mod hot;
pub mod ids;
pub mod index;
pub mod policy;
pub mod region;
pub mod rng;
pub mod rollout;
pub mod text_units;

pub use cluster::{ClusterView, Health, ReplicaSnapshot};
pub use decision::{Branch, CandidateScore, Decision, Explanation, Terms};
pub use disagg::{DisaggConfig, PrefillNote, ReplicaRole};
pub use error::RouteError;
pub use events::{
    Epoch, KvEvent, KvEventRecord, KvStreamMessage, KvTier, Observation, SeqNo, StreamCursor,
};
pub use hash::{block_hashes, ChainHasher, HashNamespace, RootSeed, SCHEME_VERSION};
pub use hot::{HotPrefix, HotPrefixes};
pub use ids::{
    BlockHash, BlockSize, CacheSalt, CheckpointId, Millis, RegionId, ReplicaId, TokenId,
};
pub use index::{IndexConfig, IndexStats, PrefixIndex, PrefixMatches, ReplicaMatch};
pub use policy::{Policy, PolicyConfig, RouteRequest, POLICY_NAMES};
pub use region::{resident, RegionMode, RegionNote, Regions, Rtt, SpillReason};
pub use rollout::{conversation_key, sticky_key, Rollout, RolloutState};
