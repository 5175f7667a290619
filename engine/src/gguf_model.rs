//! Building a model (config, weights, tokenizer) from a GGUF file.

use super::config::{ModelConfig, RopeStyle};
use super::gguf::{GgmlType, GgufFile, TensorInfo};
use super::loaded::Loaded;
use super::matrix::{Bytes, Matrix};
use super::quant::QuantKind;
use super::weights::{LayerWeights, ModelWeights};
use crate::error::EngineError;
use half::f16;
use memmap2::Mmap;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use warmpath_core::CheckpointId;

/// Maps and parses `path`.
pub(crate) fn load(path: &Path) -> Result<Loaded, EngineError> {
    let file = std::fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
    let map = Arc::new(map_file(&file, path)?);
    let gguf = GgufFile::parse(&map)?;
    let src = TensorSource {
        gguf: &gguf,
        map: &map,
    };
    let config = config_from(&gguf, &src)?;
    let weights = weights_from(&src, &config)?;
    let tokenizer = warmpath_text::gguf::tokenizer_spec(&gguf.metadata, path)?;
    let digest = Sha256::digest(&map[..]);
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let file_stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    // "SmolLM2-135M-Instruct.Q4_1" -> served name "SmolLM2-135M-Instruct",
    // checkpoint "smollm2-135m-instruct-q4_1@<hash>".
    let model_name = file_stem.split('.').next().unwrap_or(file_stem).to_string();
    let stem = file_stem.to_lowercase().replace('.', "-");
    Ok(Loaded {
        config: ModelConfig {
            name: model_name.clone(),
            ..config
        },
        weights,
        tokenizer,
        checkpoint: CheckpointId::new(format!("{stem}@{hex}")),
        model_name,
    })
}

#[allow(unsafe_code)]
fn map_file(file: &std::fs::File, path: &Path) -> Result<Mmap, EngineError> {
    // SAFETY: the mapping is read-only and model files are not modified while loaded.
    unsafe { Mmap::map(file) }.map_err(|e| EngineError::io(path, e))
}

struct TensorSource<'a> {
    gguf: &'a GgufFile,
    map: &'a Arc<Mmap>,
}

impl TensorSource<'_> {
    fn info(&self, name: &str) -> Result<&TensorInfo, EngineError> {
        self.gguf
            .tensors
            .get(name)
            .ok_or_else(|| EngineError::Tensor {
                name: name.to_string(),
                msg: "missing".into(),
            })
    }

    fn data(&self, t: &TensorInfo) -> &[u8] {
        &self.map[t.offset as usize..(t.offset + t.size) as usize]
    }

    fn vector(&self, name: &str) -> Result<Vec<f32>, EngineError> {
        let t = self.info(name)?;
        to_f32(t, self.data(t))
    }

    fn matrix(&self, name: &str) -> Result<Matrix, EngineError> {
        let t = self.info(name)?;
        if t.dims.len() != 2 {
            return Err(EngineError::Tensor {
                name: name.into(),
                msg: format!("expected 2 dims, got {:?}", t.dims),
            });
        }
        let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
        let quant = |kind| Matrix::Quant {
            kind,
            bytes: Bytes::Mapped {
                map: Arc::clone(self.map),
                offset: t.offset as usize,
                len: t.size as usize,
            },
            rows,
            cols,
        };
        Ok(match t.ty {
            GgmlType::Q4_0 => quant(QuantKind::Q4_0),
            GgmlType::Q4_1 => quant(QuantKind::Q4_1),
            GgmlType::Q8_0 => quant(QuantKind::Q8_0),
            GgmlType::F32 | GgmlType::F16 => Matrix::F32 {
                w: to_f32(t, self.data(t))?,
                rows,
                cols,
            },
            GgmlType::Other(_) => return Err(unsupported(t)),
        })
    }
}

fn unsupported(t: &TensorInfo) -> EngineError {
    EngineError::UnsupportedTensorType {
        name: t.name.clone(),
        ty: t.ty.name(),
    }
}

fn to_f32(t: &TensorInfo, b: &[u8]) -> Result<Vec<f32>, EngineError> {
    match t.ty {
        GgmlType::F32 => Ok(b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()),
        GgmlType::F16 => Ok(b
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect()),
        _ => Err(unsupported(t)),
    }
}

fn meta_u(g: &GgufFile, key: &str) -> Result<usize, EngineError> {
    g.get(key)
        .and_then(|v| v.as_u64())
        .map(|v| v as usize)
        .ok_or_else(|| EngineError::InvalidModel(format!("GGUF metadata {key} missing")))
}

fn config_from(g: &GgufFile, src: &TensorSource<'_>) -> Result<ModelConfig, EngineError> {
    let arch = g
        .get("general.architecture")
        .and_then(|v| v.as_str())
        .ok_or_else(|| EngineError::InvalidModel("general.architecture missing".into()))?;
    if arch != "llama" {
        return Err(EngineError::InvalidModel(format!(
            "architecture {arch:?} is not supported (llama only)"
        )));
    }
    let k = |s: &str| format!("{arch}.{s}");
    let dim = meta_u(g, &k("embedding_length"))?;
    let n_heads = meta_u(g, &k("attention.head_count"))?;
    let n_kv_heads = meta_u(g, &k("attention.head_count_kv")).unwrap_or(n_heads);
    let head_dim = meta_u(g, &k("attention.key_length")).unwrap_or(dim / n_heads.max(1));
    let vocab_size = src
        .info("token_embd.weight")?
        .dims
        .get(1)
        .copied()
        .unwrap_or(0) as usize;
    let f = |key: &str, default: f64| g.get(&k(key)).and_then(|v| v.as_f64()).unwrap_or(default);
    let scaling = g.get(&k("rope.scaling.type")).and_then(|v| v.as_str());
    let rope_freq_scale = match scaling {
        Some("linear") => 1.0 / f("rope.scaling.factor", 1.0) as f32,
        None | Some("none") => 1.0,
        Some(other) => {
            return Err(EngineError::InvalidModel(format!(
                "rope scaling {other:?} is not supported"
            )))
        }
    };
    Ok(ModelConfig {
        name: String::new(),
        n_layers: meta_u(g, &k("block_count"))?,
        dim,
        n_heads,
        n_kv_heads,
        head_dim,
        ffn_dim: meta_u(g, &k("feed_forward_length"))?,
        vocab_size,
        max_context: meta_u(g, &k("context_length"))?,
        rope_theta: f("rope.freq_base", 10_000.0) as f32,
        rope_freq_scale,
        rope_style: RopeStyle::Interleaved,
        rms_eps: f("attention.layer_norm_rms_epsilon", 1e-5) as f32,
    })
}

fn weights_from(src: &TensorSource<'_>, c: &ModelConfig) -> Result<ModelWeights, EngineError> {
    let mut layers = Vec::with_capacity(c.n_layers);
    for i in 0..c.n_layers {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        layers.push(LayerWeights {
            attn_norm: src.vector(&n("attn_norm"))?,
            wq: src.matrix(&n("attn_q"))?,
            wk: src.matrix(&n("attn_k"))?,
            wv: src.matrix(&n("attn_v"))?,
            wo: src.matrix(&n("attn_output"))?,
            ffn_norm: src.vector(&n("ffn_norm"))?,
            w_gate: src.matrix(&n("ffn_gate"))?,
            w_up: src.matrix(&n("ffn_up"))?,
            w_down: src.matrix(&n("ffn_down"))?,
        });
    }
    let output = if src.gguf.tensors.contains_key("output.weight") {
        Some(src.matrix("output.weight")?)
    } else {
        None
    };
    Ok(ModelWeights {
        token_embd: src.matrix("token_embd.weight")?,
        layers,
        output_norm: src.vector("output_norm.weight")?,
        output,
    })
}
