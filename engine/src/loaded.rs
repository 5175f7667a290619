//! [`Loaded`]: what every model reader (GGUF, HF, dummy) returns to the loading dispatch.

use crate::config::ModelConfig;
use crate::weights::ModelWeights;
use warmpath_core::CheckpointId;
use warmpath_text::TokenizerSpec;

/// A model read from its source, before the backend takes the weights.
pub(crate) struct Loaded {
    pub(crate) config: ModelConfig,
    pub(crate) weights: ModelWeights,
    pub(crate) tokenizer: TokenizerSpec,
    pub(crate) checkpoint: CheckpointId,
    pub(crate) model_name: String,
}
