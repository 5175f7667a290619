//! Model hyper-parameters.

use serde::{Deserialize, Serialize};

/// How RoPE pairs dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)`: GGUF `llama` (weights already permuted by the converter).
    Interleaved,
    /// Halves `(i, i + d/2)`: HF `rotate_half`.
    Half,
}

/// Architecture of a Llama-family model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Human-readable model name, e.g. `SmolLM2-135M-Instruct`.
    pub name: String,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Hidden size.
    pub dim: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention when `< n_heads`).
    pub n_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// MLP hidden size.
    pub ffn_dim: usize,
    /// Output vocabulary size (rows of the output head).
    pub vocab_size: usize,
    /// Maximum context length in tokens.
    pub max_context: usize,
    /// RoPE base frequency.
    pub rope_theta: f32,
    /// Linear RoPE scaling: positions are multiplied by this (1 = none).
    pub rope_freq_scale: f32,
    /// RoPE pairing convention.
    pub rope_style: RopeStyle,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
}

impl ModelConfig {
    /// Width of the query projection output.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }
    /// Width of each of the key and value projection outputs.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
    /// Checks the shape relations the forward pass relies on.
    pub fn validate(&self) -> Result<(), crate::error::EngineError> {
        let bad = |m: &str| Err(crate::error::EngineError::InvalidModel(m.to_string()));
        if self.n_layers == 0 || self.dim == 0 || self.vocab_size == 0 || self.ffn_dim == 0 {
            return bad("zero-sized dimension");
        }
        if self.n_heads == 0
            || self.n_kv_heads == 0
            || !self.n_heads.is_multiple_of(self.n_kv_heads)
        {
            return bad("n_heads must be a positive multiple of n_kv_heads");
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return bad("head_dim must be even");
        }
        Ok(())
    }
}
