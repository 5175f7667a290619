//! Discrete-event simulation of N replicas behind the real router-policy code.
//!
//! Each replica has a KV capacity in blocks, a radix cache with LRU eviction and a
//! continuous-batching cost model ([`CostProfile`]). The router is exactly the gateway's:
//! a `router_policy` [`Policy`] choosing from a [`ClusterView`] and a [`PrefixIndex`] that is
//! fed the KV events each simulated replica publishes (Stored when a prompt's blocks are
//! written, Removed on eviction), delivered after `kv_event_delay_ms`, and load reports that
//! are `load_staleness_ms` old. Virtual time only: results are a function of the inputs.

pub mod capacity;
mod engine;
mod events;
mod oracle;
pub mod profile;
pub mod progress;
pub mod radix;
mod replica;

pub use engine::{simulate, simulate_with, FleetSim, SimConfig, SimOutcome};
pub use oracle::oracle_hit_rate;
pub use profile::CostProfile;
pub use progress::{NoProgress, ProgressSink, SimProgress};
