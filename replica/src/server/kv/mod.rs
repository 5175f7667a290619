//! KV memory management: the page pool and the radix prefix cache on top of it.
//!
//! The engine stores K/V in pages it is told about; this module decides which page holds
//! which block, which blocks are shared, and which are evicted.

pub mod pool;
pub mod radix;

pub use pool::{pages_for_budget, PagePool};
pub use radix::{Inserted, NodeId, RadixCache};
