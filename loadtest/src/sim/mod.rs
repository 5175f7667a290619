//! Discrete-event simulation of N replicas behind the real router-policy code.
//!
//! Each replica has a KV capacity in blocks, the replica's own radix cache over that many
//! pages ([`warmpath_kv_cache::RadixCache`]: the cached prefix locked while a request runs,
//! unlocked leaves evicted single-use first, then least recently used, and the cache's
//! own KV events) and a continuous-batching cost model ([`CostProfile`]). The router is exactly the gateway's:
//! a `router_policy` [`Policy`] choosing from a [`ClusterView`] and a [`PrefixIndex`] that is
//! fed the KV events each simulated replica publishes (Stored when a prompt's blocks are
//! written, Removed on eviction), delivered after `kv_event_delay_ms`, and load reports that
//! are `load_staleness_ms` old. Virtual time only: results are a function of the inputs.
//!
//! Optional parts of a run ([`SimConfig`]):
//! - [`RegionSim`]: replicas split across regions, one gateway per region (own policy
//!   instance, view and index) deciding the requests that originate there ([`diurnal`]
//!   assigns origins), RTTs charged once on the TTFT of requests served elsewhere;
//! - [`RolloutSim`]: a second checkpoint's replicas join mid-run with cold caches, naive
//!   cut-over or hot-prefix pre-warm with a ramped share ([`rollout`]);
//! - [`DisaggSim`]: prefill and decode replicas, long prompts prefilled on one and their KV
//!   streamed to the other ([`disagg`]);
//! - [`TierSim`]: a shared KV tier, written through by every replica and loaded from on a
//!   local miss ([`tier`]);
//! - [`AdmissionSim`]: the gateway's admission: tenants, classes, TTFT objectives, an
//!   in-flight cap, and a first-come queue or the flow queue (`router_policy::flow`)
//!   ([`admission`]).
//!
//! [`capacity`] estimates the offered load against the cluster before a run; [`progress`]
//! reports how far a run has got.

pub mod admission;
pub mod capacity;
pub mod config;
pub mod disagg;
pub mod diurnal;
mod event_loop;
mod events;
mod gateway;
mod oracle;
pub mod profile;
pub mod progress;
mod replica;
pub mod rollout;
pub mod tier;

pub use admission::{AdmissionMode, AdmissionSim};
pub use config::{FleetSim, RegionIx, RegionSim, SimConfig};
pub use disagg::{DisaggSim, Transfer};
pub use event_loop::{simulate, simulate_with, SimOutcome};
pub use oracle::oracle_hit_rate;
pub use profile::CostProfile;
pub use progress::{NoProgress, ProgressSink, SimProgress};
pub use rollout::{RolloutArm, RolloutKey, RolloutSim};
pub use tier::TierSim;
