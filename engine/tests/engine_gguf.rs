#![allow(clippy::unwrap_used)]
//! GGUF loading: a small llama file written here loads and runs; truncated, corrupt and
//! unsupported files give clear errors (never a panic).

use std::path::PathBuf;
use warmpath_core::TokenId;
use warmpath_engine::quant::{quantize_row, QuantKind};
use warmpath_engine::{Engine, EngineError, EngineOptions, ModelSource, PageId, StepItem};
use warmpath_text::bytelevel::BYTE_CHARS;

const DIM: usize = 32;
const FFN: usize = 64;

enum Meta {
    U32(u32),
    F32(f32),
    Str(String),
    Bool(bool),
    StrArr(Vec<String>),
    I32Arr(Vec<i32>),
}

struct Tensor {
    name: String,
    dims: Vec<u64>,
    ty: u32,
    data: Vec<u8>,
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

/// Serialises a GGUF v3 file (alignment 32).
fn write_gguf(meta: &[(&str, Meta)], tensors: &[Tensor]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((meta.len() as u64).to_le_bytes());
    for (k, v) in meta {
        put_str(&mut b, k);
        match v {
            Meta::U32(x) => {
                b.extend(4u32.to_le_bytes());
                b.extend(x.to_le_bytes());
            }
            Meta::F32(x) => {
                b.extend(6u32.to_le_bytes());
                b.extend(x.to_le_bytes());
            }
            Meta::Bool(x) => {
                b.extend(7u32.to_le_bytes());
                b.push(*x as u8);
            }
            Meta::Str(s) => {
                b.extend(8u32.to_le_bytes());
                put_str(&mut b, s);
            }
            Meta::StrArr(a) => {
                b.extend(9u32.to_le_bytes());
                b.extend(8u32.to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                for s in a {
                    put_str(&mut b, s);
                }
            }
            Meta::I32Arr(a) => {
                b.extend(9u32.to_le_bytes());
                b.extend(5u32.to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                for x in a {
                    b.extend(x.to_le_bytes());
                }
            }
        }
    }
    let mut offset = 0u64;
    let mut offsets = Vec::new();
    for t in tensors {
        put_str(&mut b, &t.name);
        b.extend((t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            b.extend(d.to_le_bytes());
        }
        b.extend(t.ty.to_le_bytes());
        b.extend(offset.to_le_bytes());
        offsets.push(offset);
        offset += (t.data.len() as u64).div_ceil(32) * 32;
    }
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    for t in tensors {
        b.extend(&t.data);
        while !b.len().is_multiple_of(32) {
            b.push(0);
        }
    }
    b
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 1000.0 - 0.5)
        .collect()
}

fn f32_tensor(name: &str, dims: &[u64], seed: u32) -> Tensor {
    let n = dims.iter().product::<u64>() as usize;
    let data = values(n, seed)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    Tensor {
        name: name.into(),
        dims: dims.to_vec(),
        ty: 0,
        data,
    }
}

fn quant_tensor(name: &str, rows: usize, cols: usize, kind: QuantKind, seed: u32) -> Tensor {
    let mut data = Vec::new();
    quantize_row(kind, &values(rows * cols, seed), &mut data);
    let ty = match kind {
        QuantKind::Q4_0 => 2,
        QuantKind::Q4_1 => 3,
        QuantKind::Q8_0 => 8,
    };
    Tensor {
        name: name.into(),
        dims: vec![cols as u64, rows as u64],
        ty,
        data,
    }
}

fn f16_tensor(name: &str, rows: usize, cols: usize, seed: u32) -> Tensor {
    let data = values(rows * cols, seed)
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    Tensor {
        name: name.into(),
        dims: vec![cols as u64, rows as u64],
        ty: 1,
        data,
    }
}

fn tiny_model(attn_q_type: Option<u32>) -> Vec<u8> {
    let mut tokens: Vec<String> = BYTE_CHARS.iter().map(|c| c.to_string()).collect();
    tokens.extend(["<|endoftext|>", "<|im_start|>", "<|im_end|>"].map(String::from));
    let mut types = vec![1i32; 256];
    types.extend([3, 3, 3]);
    let vocab = tokens.len();
    let meta = vec![
        ("general.architecture", Meta::Str("llama".into())),
        ("general.name", Meta::Str("Tiny Test".into())),
        ("llama.block_count", Meta::U32(1)),
        ("llama.context_length", Meta::U32(256)),
        ("llama.embedding_length", Meta::U32(DIM as u32)),
        ("llama.feed_forward_length", Meta::U32(FFN as u32)),
        ("llama.attention.head_count", Meta::U32(2)),
        ("llama.attention.head_count_kv", Meta::U32(1)),
        ("llama.rope.freq_base", Meta::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(1e-5)),
        ("tokenizer.ggml.model", Meta::Str("gpt2".into())),
        ("tokenizer.ggml.pre", Meta::Str("smollm".into())),
        ("tokenizer.ggml.tokens", Meta::StrArr(tokens)),
        ("tokenizer.ggml.token_type", Meta::I32Arr(types)),
        ("tokenizer.ggml.merges", Meta::StrArr(vec![])),
        ("tokenizer.ggml.bos_token_id", Meta::U32(257)),
        ("tokenizer.ggml.eos_token_id", Meta::U32(258)),
        ("tokenizer.ggml.add_bos_token", Meta::Bool(false)),
    ];
    let mut t = vec![
        quant_tensor("token_embd.weight", vocab, DIM, QuantKind::Q8_0, 1),
        f32_tensor("output_norm.weight", &[DIM as u64], 2),
        f32_tensor("blk.0.attn_norm.weight", &[DIM as u64], 3),
        f32_tensor("blk.0.ffn_norm.weight", &[DIM as u64], 4),
        quant_tensor("blk.0.attn_q.weight", DIM, DIM, QuantKind::Q4_1, 5),
        quant_tensor("blk.0.attn_k.weight", 16, DIM, QuantKind::Q4_0, 6),
        f16_tensor("blk.0.attn_v.weight", 16, DIM, 7),
        f32_tensor("blk.0.attn_output.weight", &[DIM as u64, DIM as u64], 8),
        quant_tensor("blk.0.ffn_gate.weight", FFN, DIM, QuantKind::Q4_1, 9),
        quant_tensor("blk.0.ffn_up.weight", FFN, DIM, QuantKind::Q8_0, 10),
        f16_tensor("blk.0.ffn_down.weight", DIM, FFN, 11),
    ];
    if let Some(ty) = attn_q_type {
        t[4].ty = ty;
    }
    write_gguf(&meta, &t)
}

fn write_tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("warmpath-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

fn load(bytes: &[u8], name: &str) -> Result<Engine, EngineError> {
    let p = write_tmp(name, bytes);
    let opts = EngineOptions {
        kv_pages: 4,
        threads: 1,
        ..Default::default()
    };
    Engine::load(&ModelSource::Path(p), &opts)
}

#[test]
fn small_mixed_type_gguf_loads_and_runs() {
    let mut e = load(&tiny_model(None), "ok.gguf").expect("valid file loads");
    assert_eq!(e.model_name(), "ok");
    assert!(e.checkpoint().as_str().starts_with("ok@"));
    assert_eq!(e.config().vocab_size, 259);
    assert_eq!(e.config().n_kv_heads, 1);
    let ids = e
        .tokenizer()
        .encode("<|im_start|>hi 42", false)
        .expect("encode");
    assert_eq!(ids[0], TokenId(257));
    assert_eq!(ids.len(), 1 + 2 + 1 + 1 + 1, "{ids:?}"); // special, h, i, ' ', 4, 2
    let l = e
        .step(&[StepItem {
            tokens: &ids,
            start_pos: 0,
            pages: &[PageId(0)],
        }])
        .expect("step");
    assert_eq!(l[0].len(), 259);
    assert!(l[0].iter().all(|v| v.is_finite()));
    assert!(l[0].iter().any(|v| *v != l[0][0]));
}

#[test]
fn wrong_magic_is_reported_at_offset_zero() {
    let mut b = tiny_model(None);
    b[0..4].copy_from_slice(b"GGML");
    let err = load(&b, "magic.gguf").expect_err("bad magic");
    let msg = err.to_string();
    assert!(matches!(err, EngineError::Gguf { offset: 0, .. }), "{msg}");
    assert!(msg.contains("magic"), "{msg}");
}

#[test]
fn truncated_files_error_with_offset_never_panic() {
    let b = tiny_model(None);
    let mut cuts: Vec<usize> = (0..200).collect();
    cuts.extend((200..b.len()).step_by(97));
    cuts.push(b.len() - 1);
    for cut in cuts {
        let r = warmpath_engine::gguf::GgufFile::parse(&b[..cut]);
        match r {
            Err(EngineError::Gguf { offset, msg }) => {
                assert!(offset as usize <= b.len(), "cut {cut}: offset {offset}");
                assert!(!msg.is_empty());
            }
            other => panic!("cut at {cut}: expected a GGUF error, got {other:?}"),
        }
    }
    let err = load(&b[..b.len() - 40], "trunc.gguf").expect_err("truncated");
    assert!(err.to_string().contains("beyond end of file"), "{err}");
}

#[test]
fn bad_tensor_offset_is_reported() {
    let mut b = tiny_model(None);
    // Patch the offset of the first tensor info to point past the end of the file.
    let name = b"token_embd.weight";
    let at = b
        .windows(name.len())
        .position(|w| w == name)
        .expect("tensor name");
    let off_at = at + name.len() + 4 + 16 + 4; // rank, 2 dims, type
    b[off_at..off_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let err = load(&b, "offset.gguf").expect_err("bad offset");
    let msg = err.to_string();
    assert!(
        msg.contains("token_embd.weight") && msg.contains("offset"),
        "{msg}"
    );
}

#[test]
fn unsupported_tensor_type_names_tensor_and_type() {
    let err = load(&tiny_model(Some(12)), "q4k.gguf").expect_err("Q4_K unsupported");
    let msg = err.to_string();
    assert!(
        msg.contains("blk.0.attn_q.weight") && msg.contains("type 12"),
        "{msg}"
    );
}
