//! # warmpath-kv-cache
//!
//! A replica's KV prefix cache, in one place for the two programs that need it: the
//! replica serves from it (`replica/src/server/kv/`) and the discrete-event simulator
//! models each replica with it (`loadtest/src/sim/replica.rs`), so the simulator's
//! eviction, locking and KV events are the replica's, not a model of them.
//!
//! It knows pages and block hashes only: no engine, no runtime, no I/O. It depends on
//! `warmpath-core` alone (typed ids and the KV event schema).
//!
//! # Layout
//! - [`pool`]: [`PagePool`], the free list over a fixed number of pages, and
//!   [`pages_for_budget`].
//! - [`radix`]: [`RadixCache`], one node per cached full block keyed by its chained
//!   [`BlockHash`](warmpath_core::BlockHash): match, lock, allocate (evicting unlocked
//!   leaves, single-use before shared, then least recently used), insert, unlock, and the
//!   [`KvEvent`](warmpath_core::KvEvent)s every change records.
//!
//! # Use
//! ```
//! use warmpath_core::{BlockHash, KvEvent, KvTier};
//! use warmpath_kv_cache::{Inserted, RadixCache};
//!
//! let mut cache = RadixCache::new(4);
//! let hashes = [BlockHash(1), BlockHash(2)];
//! // A sequence: match its cached prefix, lock it, take pages for the rest, insert them.
//! let mut nodes = cache.match_prefix(&hashes);
//! cache.lock(&nodes);
//! let pages = cache.alloc(hashes.len() - nodes.len()).expect("room");
//! for (h, page) in hashes[nodes.len()..].to_vec().into_iter().zip(pages) {
//!     let node = cache.insert(nodes.last().copied(), h, page);
//!     assert!(matches!(node, Inserted::New(_)));
//!     nodes.push(node.node());
//! }
//! cache.unlock(&nodes); // finished: the blocks stay cached, now evictable
//! assert_eq!(
//!     cache.take_events(),
//!     vec![KvEvent::Stored { parent: None, hashes: hashes.to_vec(), tier: KvTier::Device }]
//! );
//! assert_eq!(cache.available_pages(), 4);
//! ```

pub mod pool;
pub mod radix;

pub use pool::{pages_for_budget, PagePool};
pub use radix::{Inserted, NodeId, RadixCache};
