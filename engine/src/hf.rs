//! HF Llama checkpoints: `config.json`, `*.safetensors` (f32/f16/bf16), and the tokenizer
//! files (read by `warmpath_text::hf_files`).

use super::config::{ModelConfig, RopeStyle};
use super::loaded::Loaded;
use super::matrix::Matrix;
use super::weights::{LayerWeights, ModelWeights};
use crate::error::EngineError;
use half::{bf16, f16};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use warmpath_core::CheckpointId;

fn read_json(path: &Path) -> Result<Value, EngineError> {
    let text = std::fs::read_to_string(path).map_err(|e| EngineError::io(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| EngineError::InvalidModel(format!("{}: {e}", path.display())))
}

/// Loads a HF checkpoint directory.
pub(crate) fn load(dir: &Path) -> Result<Loaded, EngineError> {
    let cfg_json = read_json(&dir.join("config.json"))?;
    let config = config_from(&cfg_json, dir)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| EngineError::io(dir, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(EngineError::InvalidModel(format!(
            "no *.safetensors in {}",
            dir.display()
        )));
    }
    let mut tensors = HashMap::new();
    let mut hasher = Sha256::new();
    for f in &files {
        let bytes = std::fs::read(f).map_err(|e| EngineError::io(f, e))?;
        hasher.update(&bytes);
        read_safetensors(f, &bytes, &mut tensors)?;
    }
    let tie = cfg_json
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let weights = weights_from(&mut tensors, &config, tie)?;
    let tokenizer = warmpath_text::hf_files::tokenizer_spec_from_dir(dir)?;
    let hex: String = hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let name = dir
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("model")
        .to_string();
    Ok(Loaded {
        checkpoint: CheckpointId::new(format!("{}@{hex}", name.to_lowercase())),
        model_name: name.clone(),
        config: ModelConfig { name, ..config },
        weights,
        tokenizer,
    })
}

fn config_from(c: &Value, dir: &Path) -> Result<ModelConfig, EngineError> {
    let u = |k: &str| {
        c.get(k)
            .and_then(Value::as_u64)
            .map(|v| v as usize)
            .ok_or_else(|| {
                EngineError::InvalidModel(format!("{}: config.json lacks {k}", dir.display()))
            })
    };
    let f = |k: &str, d: f64| c.get(k).and_then(Value::as_f64).unwrap_or(d);
    let dim = u("hidden_size")?;
    let n_heads = u("num_attention_heads")?;
    let rope_freq_scale = match c.get("rope_scaling").filter(|v| !v.is_null()) {
        None => 1.0,
        Some(s) => {
            let ty = s
                .get("rope_type")
                .or_else(|| s.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if ty != "linear" {
                return Err(EngineError::InvalidModel(format!(
                    "rope_scaling {ty:?} not supported"
                )));
            }
            1.0 / s.get("factor").and_then(Value::as_f64).unwrap_or(1.0) as f32
        }
    };
    Ok(ModelConfig {
        name: String::new(),
        n_layers: u("num_hidden_layers")?,
        dim,
        n_heads,
        n_kv_heads: u("num_key_value_heads").unwrap_or(n_heads),
        head_dim: u("head_dim").unwrap_or(dim / n_heads.max(1)),
        ffn_dim: u("intermediate_size")?,
        vocab_size: u("vocab_size")?,
        max_context: u("max_position_embeddings").unwrap_or(2048),
        rope_theta: f("rope_theta", 10_000.0) as f32,
        rope_freq_scale,
        rope_style: RopeStyle::Half,
        rms_eps: f("rms_norm_eps", 1e-6) as f32,
    })
}

/// A tensor converted to f32, with its shape.
struct Dense {
    shape: Vec<usize>,
    data: Vec<f32>,
}

fn read_safetensors(
    path: &Path,
    b: &[u8],
    out: &mut HashMap<String, Dense>,
) -> Result<(), EngineError> {
    let bad = |msg: String| EngineError::Safetensors {
        path: path.to_path_buf(),
        msg,
    };
    if b.len() < 8 {
        return Err(bad("shorter than the 8-byte header length".into()));
    }
    let n = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as usize;
    let header = b
        .get(8..8usize.saturating_add(n))
        .ok_or_else(|| bad(format!("header of {n} bytes beyond end of file")))?;
    let header: HashMap<String, Value> =
        serde_json::from_slice(header).map_err(|e| bad(format!("header: {e}")))?;
    let data = &b[8 + n..];
    for (name, meta) in header {
        if name == "__metadata__" {
            continue;
        }
        let dtype = meta.get("dtype").and_then(Value::as_str).unwrap_or("");
        let shape: Vec<usize> = meta
            .get("shape")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .map(|v| v as usize)
                    .collect()
            })
            .unwrap_or_default();
        let offs: Vec<usize> = meta
            .get("data_offsets")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .map(|v| v as usize)
                    .collect()
            })
            .unwrap_or_default();
        let (start, end) = match offs[..] {
            [s, e] if s <= e && e <= data.len() => (s, e),
            _ => return Err(bad(format!("tensor {name}: bad data_offsets {offs:?}"))),
        };
        let raw = &data[start..end];
        let values: Vec<f32> = match dtype {
            "F32" => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            "F16" => raw
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            "BF16" => raw
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            other => {
                return Err(EngineError::UnsupportedTensorType {
                    name,
                    ty: other.to_string(),
                });
            }
        };
        if values.len() != shape.iter().product::<usize>() {
            return Err(bad(format!(
                "tensor {name}: {} values for shape {shape:?}",
                values.len()
            )));
        }
        out.insert(
            name,
            Dense {
                shape,
                data: values,
            },
        );
    }
    Ok(())
}

fn take(t: &mut HashMap<String, Dense>, name: &str) -> Result<Dense, EngineError> {
    t.remove(name).ok_or_else(|| EngineError::Tensor {
        name: name.into(),
        msg: "missing".into(),
    })
}

fn matrix(t: &mut HashMap<String, Dense>, name: &str) -> Result<Matrix, EngineError> {
    let d = take(t, name)?;
    match d.shape[..] {
        [rows, cols] => Ok(Matrix::F32 {
            w: d.data,
            rows,
            cols,
        }),
        _ => Err(EngineError::Tensor {
            name: name.into(),
            msg: format!("expected 2 dims, got {:?}", d.shape),
        }),
    }
}

fn weights_from(
    t: &mut HashMap<String, Dense>,
    c: &ModelConfig,
    tie: bool,
) -> Result<ModelWeights, EngineError> {
    let mut layers = Vec::with_capacity(c.n_layers);
    for i in 0..c.n_layers {
        let p = format!("model.layers.{i}");
        layers.push(LayerWeights {
            attn_norm: take(t, &format!("{p}.input_layernorm.weight"))?.data,
            wq: matrix(t, &format!("{p}.self_attn.q_proj.weight"))?,
            wk: matrix(t, &format!("{p}.self_attn.k_proj.weight"))?,
            wv: matrix(t, &format!("{p}.self_attn.v_proj.weight"))?,
            wo: matrix(t, &format!("{p}.self_attn.o_proj.weight"))?,
            ffn_norm: take(t, &format!("{p}.post_attention_layernorm.weight"))?.data,
            w_gate: matrix(t, &format!("{p}.mlp.gate_proj.weight"))?,
            w_up: matrix(t, &format!("{p}.mlp.up_proj.weight"))?,
            w_down: matrix(t, &format!("{p}.mlp.down_proj.weight"))?,
        });
    }
    let output = if tie || !t.contains_key("lm_head.weight") {
        None
    } else {
        Some(matrix(t, "lm_head.weight")?)
    };
    Ok(ModelWeights {
        token_embd: matrix(t, "model.embed_tokens.weight")?,
        layers,
        output_norm: take(t, "model.norm.weight")?.data,
        output,
    })
}
