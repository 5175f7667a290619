//! The replica's control-plane endpoints, as the gateway and the load tester read them.

use serde::{Deserialize, Serialize};
use warmpath_core::{BlockSize, CheckpointId, ReplicaRole, TokenId};

/// `GET`: static facts about a replica ([`ReplicaInfo`]).
pub const PATH_INFO: &str = "/v1/replica/info";
/// `GET`: current load ([`ReplicaLoad`]).
pub const PATH_LOAD: &str = "/v1/replica/load";
/// `GET`: KV event stream, newline-delimited JSON of `warmpath_core::KvStreamMessage`.
/// Query `?from_seq=N&epoch=E` resumes after N when the epoch still matches, else a snapshot.
pub const PATH_KV_EVENTS: &str = "/v1/kv/events";
/// `GET`: the tokenizer and chat template the replica uses (a [`TokenizerSpec`](crate::tokenizer_spec::TokenizerSpec)), so the
/// gateway tokenizes exactly as the replica does.
pub const PATH_TOKENIZER: &str = "/v1/replica/tokenizer";

/// `POST`: compute a prompt's KV and stream its full blocks back as framed
/// [`KvBlockRecord`](crate::kv_block::KvBlockRecord)s, block by block as the prefill
/// goes ([`PrefillRequest`]; a replica of role `prefill` or `both` serves it).
pub const PATH_KV_PREFILL: &str = "/v1/kv/prefill";

/// Request header, set by the gateway only (it drops any client value): the base URL of
/// the prefill replica the decode replica fetches the prompt's KV from before it decodes.
pub const HEADER_PREFILL_FROM: &str = "x-warmpath-prefill-from";
/// Response header of a decode replica: how the KV transfer went (`ok`, `partial`,
/// `failed`, `skipped`), on requests that named a prefill replica.
pub const HEADER_KV_TRANSFER: &str = "x-warmpath-kv-transfer";
/// Response header of a decode replica, next to [`HEADER_KV_TRANSFER`]: why the transfer
/// ended (`complete`, or what broke it: `connect`, `timeout`, `http_status`, `truncated`,
/// `corrupt`, `mismatch`, and `import` when this replica's own pool had no room for the
/// blocks, which is no fault of the prefill replica).
pub const HEADER_KV_TRANSFER_REASON: &str = "x-warmpath-kv-transfer-reason";
/// The [`HEADER_KV_TRANSFER_REASON`] of a transfer whose blocks arrived but did not fit the
/// decode replica's pool.
pub const KV_TRANSFER_REASON_IMPORT: &str = "import";
/// Response header of a decode replica: prompt tokens whose KV came from the prefill
/// replica (they count as cached in `usage`).
pub const HEADER_KV_TRANSFERRED_TOKENS: &str = "x-warmpath-kv-transferred-tokens";
/// Response header of a replica with a shared KV tier: how the tier lookup went (`hit`,
/// `partial`, `miss`, `skipped`).
pub const HEADER_KV_TIER: &str = "x-warmpath-kv-tier";
/// Response header of a replica with a shared KV tier: prompt tokens whose KV came from
/// the tier (they count as cached in `usage`).
pub const HEADER_KV_TIER_TOKENS: &str = "x-warmpath-kv-tier-tokens";

/// Request header, set by the gateway only (it drops any client value): `1` tells the
/// replica not to use its shared KV tier for this request: nothing read from it, no block
/// written to it (and the same asked of the prefill replica it fetches from). The gateway
/// sets it for a region-pinned tenant when the replica's tier
/// ([`ReplicaInfo::kv_store_region`]) is outside the tenant's regions: data residency.
pub const HEADER_KV_TIER_OFF: &str = "x-warmpath-kv-tier-off";

/// Request header carrying the tenant cache salt. Set by the gateway, which overwrites any
/// client value; part of every block hash of the request.
pub const HEADER_CACHE_SALT: &str = "x-warmpath-cache-salt";
/// Response header: the replica that served the request (set by the gateway).
pub const HEADER_REPLICA: &str = "x-warmpath-replica";
/// Response header: cached prompt tokens the gateway predicted.
pub const HEADER_PREDICTED_CACHED: &str = "x-warmpath-predicted-cached-tokens";

/// Static facts about a replica, discovered at registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaInfo {
    /// Model name clients put in `model`.
    pub model: String,
    /// Exact weights served (part of every hash).
    pub checkpoint: CheckpointId,
    /// Tokens per KV page / hashed block.
    pub block_size: BlockSize,
    /// `warmpath_core::SCHEME_VERSION` the replica hashes with.
    pub hash_scheme: u32,
    /// KV capacity in blocks.
    pub capacity_blocks: u64,
    /// Maximum context length in tokens.
    pub max_context: u32,
    /// Deployment region label, if configured.
    #[serde(default)]
    pub region: Option<String>,
    /// Compute device, e.g. `cpu` or `cuda:0`.
    pub device: String,
    /// Role in a prefill/decode split (`both` from replicas that predate roles).
    #[serde(default)]
    pub role: ReplicaRole,
    /// The region of the shared KV tier's Redis (`--kv-store-region`, by default the
    /// replica's `--region`); `None` without a tier, or with a tier of no known region
    /// (treated as outside every region by residency pins).
    #[serde(default)]
    pub kv_store_region: Option<String>,
}

/// Body of `POST` [`PATH_KV_PREFILL`]; the tenant's salt travels in
/// [`HEADER_CACHE_SALT`] as on generation requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefillRequest {
    /// The whole prompt's token ids.
    pub prompt: Vec<TokenId>,
    /// Leading full blocks the caller holds already: not sent (they are still computed
    /// or matched, since later blocks depend on them).
    #[serde(default)]
    pub skip_blocks: u32,
}

/// A replica's load, polled by the gateway.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaLoad {
    /// Sequences being computed.
    pub running: u32,
    /// Sequences admitted but waiting.
    pub waiting: u32,
    /// Prompt tokens still to prefill over running and waiting sequences.
    pub queued_prefill_tokens: u64,
    /// KV pages in use (referenced or cached).
    pub kv_used_blocks: u64,
    /// KV pages in total.
    pub kv_total_blocks: u64,
    /// Recent prefill throughput, tokens per second (0 when unknown).
    pub prefill_tokens_per_s: f64,
    /// Recent decode throughput, tokens per second (0 when unknown).
    pub decode_tokens_per_s: f64,
    /// Engine steps run since the replica started (0 from replicas that do not say).
    #[serde(default)]
    pub steps: u64,
    /// Recent rate of loading prompt tokens from the shared KV tier, tokens per second of
    /// lookup (0 when unknown: no tier, or nothing loaded yet). The router's fetch term.
    #[serde(default)]
    pub tier_tokens_per_s: f64,
}
