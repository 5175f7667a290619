//! The KV subsystem: the page pool, the radix prefix cache on top of it, and every way
//! blocks arrive or leave.
//!
//! The engine stores K/V in pages it is told about; this subsystem decides which page
//! holds which block, which blocks are shared and evicted, and where blocks come from
//! other than the engine's own prefill.
//!
//! # Layout
//! - The page pool and the block-hash keyed radix prefix cache (single-use blocks evicted
//!   before shared ones, then LRU; locking; KV events) are the `warmpath-kv-cache` crate
//!   (`kv-cache/`: [`warmpath_kv_cache::PagePool`], [`warmpath_kv_cache::RadixCache`]),
//!   which the simulator drives too; the scheduler and the engine loop use it directly.
//! - [`block`]: a block leaving the pool ([`ExportedBlock`], [`Export`]) or entering it
//!   ([`ImportBlock`]); [`record`]: blocks to and from wire records, and the check of a
//!   received one against this replica's layout, chain and prompt.
//! - [`source`]: [`KvSource`], where a prompt's following blocks can come from instead of
//!   being computed; [`load`](mod@load): the one loader that drives any source (held prefix, fetch,
//!   import, outcome, metrics, log); [`link`]: [`KvLink`], the loader's handle on the
//!   engine loop; [`sink`]: the batches a load caches while its source delivers;
//!   [`budget`]: the byte budget all loads share (`--kv-load-memory`).
//! - Sources: [`peer`] (a prefill replica, `POST /v1/kv/prefill`) and [`tier`] (the shared
//!   tier in Redis, `--kv-store`, whose write side is here too); [`trust`]: who may start a
//!   transfer (the transfer key's signatures).
//!
//! The engine loop's side (export, import, tier writes) is `impl` blocks of the loop in
//! `worker/kv.rs` and `worker/tier.rs`; the prefill endpoint is `http/kv_prefill.rs`.

pub mod block;
pub mod budget;
pub mod link;
pub mod load;
pub mod peer;
pub mod record;
pub mod sink;
pub mod source;
pub mod tier;
pub mod trust;

pub use block::{Export, ExportedBlock, ImportBlock};
pub use budget::LoadBudget;
pub use link::KvLink;
pub use load::{load, Load};
pub use peer::Peer;
pub use sink::Sink;
pub use source::{KvSource, LoadOutcome, SourceMetrics};
pub use tier::Tier;
pub use trust::TransferTrust;
