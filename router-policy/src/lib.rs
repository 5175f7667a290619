//! # router-policy
//!
//! The routing brain of Warmpath as a pure library: no async runtime, no HTTP, no clock.
//! The gateway and the load-test simulator route with it. The vocabulary it routes over
//! (ids, the hashing contract, KV events, roles, the RNG) lives one crate below, in
//! `warmpath-core`, so nothing that only needs those types depends on a policy.
//!
//! # Layout
//! - [`hot`]: the most requested prefixes, replayed to pre-warm a new checkpoint.
//! - [`index`]: the prefix index (precise from events, approximate from routing history).
//! - [`cluster`]: the per-replica snapshot policies read.
//! - [`policy`]: the routing policies behind one trait, selected by [`PolicyConfig`].
//! - [`decision`]: the choice, retry fallbacks and the explanation.
//! - [`disagg`]: the prefill/decode choice of a role-split pool.
//! - [`region`]: regions, RTTs, residency pinning and the spill rule.
//! - [`rollout`]: a model on two checkpoints at once: sticky, monotone canary shares.
//! - [`flow`]: flow control: who waits and who goes next when every replica slot is taken
//!   (per-tenant queues, weighted fair sharing by predicted prefill cost, classes, deadlines).
//! - [`prefill_order`]: the order a replica serves prefills in (FCFS, or shortest uncached
//!   first with aging), shared by the replica and the simulator.
//!
//! # Use
//! ```
//! use router_policy::*;
//! use warmpath_core::*;
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
pub mod flow;
pub mod hot;
pub mod index;
pub mod policy;
pub mod prefill_order;
pub mod region;
pub mod rollout;

pub use cluster::{AdapterState, ClusterView, Health, ReplicaSnapshot};
pub use decision::{Branch, CandidateScore, Decision, Explanation, Terms};
pub use disagg::{DisaggConfig, PrefillNote};
pub use error::RouteError;
pub use hot::{HotPrefix, HotPrefixes};
pub use index::{IndexConfig, IndexStats, PrefixIndex, PrefixMatches, ReplicaMatch};
pub use policy::{Policy, PolicyConfig, RouteRequest, POLICY_NAMES};
pub use prefill_order::{Candidate, Packer, PrefillOrder, WorkClock};
pub use region::{
    allows as residency_allows, resident, RegionMode, RegionNote, Regions, Rtt, SpillReason,
};
pub use rollout::{
    conversation_key, sticky_key, sticky_key_seeded, sticky_seed, Rollout, RolloutState,
};
