//! The shared KV tier: full blocks of KV in Redis, written by the replica that computed
//! them and read by any replica that lacks them (`replica serve --kv-store redis://...`).
//!
//! * **Write** ([`write`](mod@write)): the engine loop offers every full block a sequence caches (the
//!   blocks it computed, not those it found cached or imported) to a [`TierSink`], a queue
//!   bounded in bytes: a block that does not fit is dropped and counted, so a slow or absent
//!   Redis never delays a step. A writer task encodes each block as a
//!   [`KvBlockRecord`](warmpath_protocol::kv_block::KvBlockRecord) and `SET`s it under
//!   [`tier_key`](warmpath_protocol::kv_block::tier_key) (the chain hash, which already holds
//!   the checkpoint and the tenant's salt), several blocks per pipelined round trip.
//! * **Read** ([`read`], [`Tier`], a [`KvSource`](super::source::KvSource)): before a request is submitted, the replica asks its own cache how
//!   many leading blocks it holds, then `MGET`s the following blocks' keys, all groups sent
//!   at once on one multiplexed connection (one pipelined round trip), and takes the
//!   consecutive run of good ones: a missing block, a record that fails its checksum, has
//!   another layout, another chain (checkpoint, salt, prompt) or other tokens, or a group
//!   that answers after `--kv-store-timeout-ms` ends the run there, and the engine computes
//!   the rest. The run is imported into the pool like a prefill replica's blocks, so the
//!   request finds it as a cached prefix.
//! * **Redis down** ([`conn`]): the replica serves as if there were no tier; lookups and
//!   writes count the failure, the log says so once per interval, and the connection is
//!   retried in the background of later calls.
//!
//! * **TLS** ([`tls`]): with `--kv-store rediss://...`, the connection is TLS (rustls),
//!   verified against `--kv-store-ca-file`, with a client certificate when given.
//! * **Authenticated** ([`mac`]): with `--kv-store-key-file`, each value is `MAC || record`
//!   under a deployment secret and bound to its Redis key; a value that does not verify is
//!   refused (reason `forged`).
//! * **Residency**: a request the gateway sent with `x-warmpath-kv-tier-off` (a
//!   region-pinned tenant, this tier's Redis outside its regions: `--kv-store-region`)
//!   neither reads the tier nor writes its blocks there (`http::generate`,
//!   `worker::tier`).
//!
//! Redis is expected to bound itself: `maxmemory` with `allkeys-lru` (docs/operations.md).

pub mod conn;
pub mod mac;
pub mod rate;
pub mod read;
pub mod tls;
pub mod write;

pub use conn::TierConn;
pub use mac::TierMac;
pub use rate::TierRate;
pub use read::Tier;
pub use write::{run_writer, TierSink};
