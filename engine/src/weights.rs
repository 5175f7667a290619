//! The weights of a Llama-family model, independent of where they were loaded from.

use super::config::ModelConfig;
use super::matrix::Matrix;
use crate::error::EngineError;

/// One transformer block.
#[derive(Debug)]
pub struct LayerWeights {
    /// RMSNorm before attention.
    pub attn_norm: Vec<f32>,
    /// Query projection (`q_dim x dim`).
    pub wq: Matrix,
    /// Key projection (`kv_dim x dim`).
    pub wk: Matrix,
    /// Value projection (`kv_dim x dim`).
    pub wv: Matrix,
    /// Attention output projection (`dim x q_dim`).
    pub wo: Matrix,
    /// RMSNorm before the MLP.
    pub ffn_norm: Vec<f32>,
    /// SwiGLU gate (`ffn x dim`).
    pub w_gate: Matrix,
    /// SwiGLU up (`ffn x dim`).
    pub w_up: Matrix,
    /// SwiGLU down (`dim x ffn`).
    pub w_down: Matrix,
}

/// All weights. `output == None` means the head is tied to `token_embd`.
#[derive(Debug)]
pub struct ModelWeights {
    /// Token embeddings (`vocab x dim`).
    pub token_embd: Matrix,
    /// Blocks.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm.
    pub output_norm: Vec<f32>,
    /// Untied output head (`vocab x dim`), if any.
    pub output: Option<Matrix>,
}

impl ModelWeights {
    /// The output head (tied or not).
    pub fn head(&self) -> &Matrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Checks every shape against `cfg`.
    pub fn validate(&self, cfg: &ModelConfig) -> Result<(), EngineError> {
        let check = |name: &str, m: &Matrix, rows: usize, cols: usize| {
            if m.rows() != rows || m.cols() != cols {
                return Err(EngineError::Tensor {
                    name: name.to_string(),
                    msg: format!("shape {}x{}, expected {rows}x{cols}", m.rows(), m.cols()),
                });
            }
            Ok(())
        };
        let vec_check = |name: &str, v: &[f32], len: usize| {
            if v.len() != len {
                return Err(EngineError::Tensor {
                    name: name.to_string(),
                    msg: format!("length {}, expected {len}", v.len()),
                });
            }
            Ok(())
        };
        let (d, q, kv, f) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim);
        check("token_embd", &self.token_embd, cfg.vocab_size, d)?;
        if let Some(o) = &self.output {
            check("output", o, cfg.vocab_size, d)?;
        }
        vec_check("output_norm", &self.output_norm, d)?;
        if self.layers.len() != cfg.n_layers {
            return Err(EngineError::InvalidModel(format!(
                "{} layers loaded, config says {}",
                self.layers.len(),
                cfg.n_layers
            )));
        }
        for (i, l) in self.layers.iter().enumerate() {
            let n = |s: &str| format!("blk.{i}.{s}");
            vec_check(&n("attn_norm"), &l.attn_norm, d)?;
            vec_check(&n("ffn_norm"), &l.ffn_norm, d)?;
            check(&n("attn_q"), &l.wq, q, d)?;
            check(&n("attn_k"), &l.wk, kv, d)?;
            check(&n("attn_v"), &l.wv, kv, d)?;
            check(&n("attn_output"), &l.wo, d, q)?;
            check(&n("ffn_gate"), &l.w_gate, f, d)?;
            check(&n("ffn_up"), &l.w_up, f, d)?;
            check(&n("ffn_down"), &l.w_down, d, f)?;
        }
        Ok(())
    }
}
