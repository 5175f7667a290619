//! [`SkipReason`]: why an engine event produced nothing for the index (counted per reason).

/// Why an engine event produced nothing for the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The engine's block size differs from the gateway's.
    BlockSizeMismatch {
        /// The event's block size.
        engine: u32,
        /// The gateway's.
        gateway: u32,
    },
    /// The parent block was never mapped (stored before we listened, or itself skipped).
    UnknownParent,
    /// Only a partial block (SGLang's trailing page): the contract hashes full blocks only.
    PartialBlock,
    /// `token_ids` does not fit the number of hashes and the block size.
    TokenCountMismatch,
    /// The blocks belong to a LoRA adapter known only by its id (no `lora_name`), which no
    /// model name the gateway hashes under can match.
    Lora,
    /// The engine hashed more than the tokens, adapter and cache salt (multimodal inputs,
    /// prompt embeddings, a salt past a chain's first block).
    ExtraKeys,
    /// An offload store without tokens whose blocks the map never saw on the GPU.
    UnknownBlock,
    /// A KV cache group other than the first (hybrid models).
    OtherGroup,
    /// An event type the decoder does not know.
    UnknownEvent,
    /// The map is at its bound.
    MapFull,
}

impl SkipReason {
    /// Every reason's label, indexed by [`SkipReason::index`].
    pub const LABELS: [&'static str; 10] = [
        "block_size_mismatch",
        "unknown_parent",
        "partial_block",
        "token_count_mismatch",
        "lora",
        "extra_keys",
        "unknown_block",
        "other_group",
        "unknown_event",
        "map_full",
    ];

    /// A dense index, for a counter per reason.
    pub fn index(self) -> usize {
        match self {
            SkipReason::BlockSizeMismatch { .. } => 0,
            SkipReason::UnknownParent => 1,
            SkipReason::PartialBlock => 2,
            SkipReason::TokenCountMismatch => 3,
            SkipReason::Lora => 4,
            SkipReason::ExtraKeys => 5,
            SkipReason::UnknownBlock => 6,
            SkipReason::OtherGroup => 7,
            SkipReason::UnknownEvent => 8,
            SkipReason::MapFull => 9,
        }
    }

    /// A metrics label.
    pub fn label(self) -> &'static str {
        Self::LABELS[self.index()]
    }
}
