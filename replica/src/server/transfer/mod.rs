//! Prefill/decode disaggregation on the replica: moving a prompt's KV from the replica
//! that computed it to the one that decodes.
//!
//! The decode replica pulls. The gateway sends the request to the decode replica with
//! the prefill replica's URL in `x-warmpath-prefill-from`; before it submits the request,
//! the decode replica ([`pull`]) asks its own cache how many leading blocks it holds,
//! asks the prefill replica for the rest (`POST /v1/kv/prefill`, [`serve`]), checks
//! each block as it arrives and caches the run of good blocks. The request then finds
//! them as a cached prefix: `usage.prompt_tokens_details.cached_tokens` counts them.
//!
//! The prefill replica streams each block the engine step that caches it (overlapping
//! the transfer with its chunked prefill), as framed
//! [`KvBlockRecord`](warmpath_protocol::kv_block::KvBlockRecord)s ([`record`]).
//!
//! Nothing wrong is ever used: a block that fails its checksum, has another layout, or
//! whose chain hash or tokens differ from what this replica computes for the prompt
//! under its own checkpoint and the tenant's salt ends the transfer there, as do a cut
//! stream and the time limit; the replica computes everything after the last good
//! block. Each transfer is counted by outcome and reason.

pub mod engine;
pub mod pull;
pub mod record;
pub mod serve;

pub use pull::{pull, Transfer, TransferOutcome};
