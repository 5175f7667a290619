//! [`ZmqEventsConfig`]: where an engine publishes its KV events and how the gateway reads them.

use super::rehash::EventMapper;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use warmpath_core::{BlockSize, HashNamespace};

/// One engine's (one data-parallel rank's) KV event publisher, as the gateway subscribes to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ZmqEventsConfig {
    /// The engine's PUB endpoint, e.g. `tcp://10.0.0.5:5557` (vLLM's `endpoint`, with the
    /// host in place of `*`; a data-parallel rank `r` publishes on the port plus `r`).
    pub endpoint: String,
    /// The engine's ROUTER endpoint for replays (`replay_endpoint`), if it has one. Without
    /// it every gap drops the replica's entries.
    pub replay_endpoint: Option<String>,
    /// Topic prefix to subscribe to; empty (the default) receives every topic.
    pub topic: String,
    /// Tokens per block: must equal the engine's block size (vLLM `--block-size`, SGLang
    /// `--page-size`) and the gateway's, or every stored block is skipped.
    pub block_size: BlockSize,
    /// Most engine blocks tracked (see [`EventMapper`]); set it above the engine's number of
    /// KV blocks.
    pub max_tracked_blocks: usize,
    /// How long one replay (connect, request, replies) may take.
    pub replay_timeout_ms: u64,
    /// How long one connection attempt of the SUB socket may take.
    pub connect_timeout_ms: u64,
    /// Longest wait before the subscriber looks at its stop condition again.
    pub poll_ms: u64,
}

impl Default for ZmqEventsConfig {
    fn default() -> Self {
        Self {
            endpoint: "tcp://127.0.0.1:5557".into(),
            replay_endpoint: None,
            topic: String::new(),
            block_size: BlockSize::DEFAULT,
            max_tracked_blocks: 1 << 20,
            replay_timeout_ms: 2_000,
            connect_timeout_ms: 5_000,
            poll_ms: 100,
        }
    }
}

impl ZmqEventsConfig {
    /// A mapper for this engine, hashing in `base`: the pool's namespace (its checkpoint;
    /// each block's adapter and cache salt are added from its event).
    pub fn mapper(&self, base: HashNamespace) -> EventMapper {
        EventMapper::new(base, self.block_size, self.max_tracked_blocks)
    }

    pub(crate) fn replay_timeout(&self) -> Duration {
        Duration::from_millis(self.replay_timeout_ms.max(1))
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms.max(1))
    }

    pub(crate) fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_ms.clamp(1, 1_000))
    }
}
