#![allow(clippy::unwrap_used)]
//! HF checkpoints: a tiny random Llama written here (config.json, safetensors in f32 and
//! bf16, tokenizer files) loads, and its logits match a naive reference forward pass
//! written independently in this test (HF `rotate_half` RoPE, GQA, SwiGLU).

use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use warmpath_core::TokenId;
use warmpath_engine::{Engine, EngineOptions, ModelSource, PageId, StepItem};
use warmpath_text::bytelevel::byte_level_spec;

const H: usize = 32;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HD: usize = 8;
const FFN: usize = 48;
const LAYERS: usize = 2;
const VOCAB: usize = 259;
const THETA: f32 = 10000.0;
const EPS: f32 = 1e-6;

type Weights = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn random_weights(bf16: bool) -> Weights {
    let mut state = 12345u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f32 / (1u64 << 31) as f32 - 0.5) * 0.6
    };
    let mut w = Weights::new();
    let mut add = |name: String, shape: Vec<usize>, norm: bool| {
        let n = shape.iter().product();
        let mut v: Vec<f32> = (0..n)
            .map(|_| if norm { 1.0 + next() * 0.2 } else { next() })
            .collect();
        if bf16 {
            v.iter_mut()
                .for_each(|x| *x = half::bf16::from_f32(*x).to_f32());
        }
        w.insert(name, (shape, v));
    };
    add("model.embed_tokens.weight".into(), vec![VOCAB, H], false);
    add("lm_head.weight".into(), vec![VOCAB, H], false);
    add("model.norm.weight".into(), vec![H], true);
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        add(format!("{p}.input_layernorm.weight"), vec![H], true);
        add(
            format!("{p}.post_attention_layernorm.weight"),
            vec![H],
            true,
        );
        add(
            format!("{p}.self_attn.q_proj.weight"),
            vec![HEADS * HD, H],
            false,
        );
        add(
            format!("{p}.self_attn.k_proj.weight"),
            vec![KV_HEADS * HD, H],
            false,
        );
        add(
            format!("{p}.self_attn.v_proj.weight"),
            vec![KV_HEADS * HD, H],
            false,
        );
        add(
            format!("{p}.self_attn.o_proj.weight"),
            vec![H, HEADS * HD],
            false,
        );
        add(format!("{p}.mlp.gate_proj.weight"), vec![FFN, H], false);
        add(format!("{p}.mlp.up_proj.weight"), vec![FFN, H], false);
        add(format!("{p}.mlp.down_proj.weight"), vec![H, FFN], false);
    }
    w
}

fn write_checkpoint(dir: &Path, w: &Weights, bf16: bool) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let config = json!({
        "architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": FFN,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "num_hidden_layers": LAYERS,
        "rms_norm_eps": EPS, "rope_theta": THETA, "vocab_size": VOCAB,
        "max_position_embeddings": 128, "tie_word_embeddings": false
    });
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config");
    let spec = byte_level_spec(VOCAB);
    std::fs::write(dir.join("tokenizer.json"), spec.tokenizer.to_string()).expect("tok");
    let tc = json!({"chat_template": spec.chat_template, "bos_token": "<|im_start|>",
                    "eos_token": {"content": "<|im_end|>"}, "add_bos_token": false});
    std::fs::write(dir.join("tokenizer_config.json"), tc.to_string()).expect("tc");
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, (shape, v)) in w {
        let start = data.len();
        for x in v {
            if bf16 {
                data.extend(half::bf16::from_f32(*x).to_le_bytes());
            } else {
                data.extend(x.to_le_bytes());
            }
        }
        header.insert(
            name.clone(),
            json!({"dtype": if bf16 {"BF16"} else {"F32"}, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::Value::Object(header).to_string().into_bytes();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut file = (h.len() as u64).to_le_bytes().to_vec();
    file.extend(h);
    file.extend(data);
    std::fs::write(dir.join("model.safetensors"), file).expect("safetensors");
}

// === naive reference ===

fn matvec(w: &[f32], rows: usize, x: &[f32]) -> Vec<f32> {
    let cols = x.len();
    (0..rows)
        .map(|r| (0..cols).map(|c| w[r * cols + c] * x[c]).sum())
        .collect()
}

fn rmsnorm(x: &[f32], g: &[f32]) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let s = 1.0 / (ms + EPS).sqrt();
    x.iter().zip(g).map(|(v, g)| v * s * g).collect()
}

fn rope_half(v: &mut [f32], pos: usize) {
    for head in v.chunks_mut(HD) {
        let half = HD / 2;
        let orig = head.to_vec();
        for i in 0..HD {
            let f = (i % half) as f32;
            let ang = pos as f32 * THETA.powf(-2.0 * f / HD as f32);
            let rot = if i < half {
                -orig[i + half]
            } else {
                orig[i - half]
            };
            head[i] = orig[i] * ang.cos() + rot * ang.sin();
        }
    }
}

fn f16_round(v: Vec<f32>) -> Vec<f32> {
    v.into_iter()
        .map(|x| half::f16::from_f32(x).to_f32())
        .collect()
}

fn reference_logits(w: &Weights, ids: &[TokenId]) -> Vec<f32> {
    let g = |n: &str| &w[n].1;
    let mut xs: Vec<Vec<f32>> = ids
        .iter()
        .map(|t| g("model.embed_tokens.weight")[t.0 as usize * H..(t.0 as usize + 1) * H].to_vec())
        .collect();
    for l in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        let (mut qs, mut ks, mut vs) = (vec![], vec![], vec![]);
        for (pos, x) in xs.iter().enumerate() {
            let h = rmsnorm(x, g(&p("input_layernorm.weight")));
            let mut q = matvec(g(&p("self_attn.q_proj.weight")), HEADS * HD, &h);
            let mut k = matvec(g(&p("self_attn.k_proj.weight")), KV_HEADS * HD, &h);
            rope_half(&mut q, pos);
            rope_half(&mut k, pos);
            // The engine keeps an f16 KV cache and f16 queries/probabilities, like
            // llama.cpp's default CPU path.
            qs.push(f16_round(q));
            ks.push(f16_round(k));
            vs.push(f16_round(matvec(
                g(&p("self_attn.v_proj.weight")),
                KV_HEADS * HD,
                &h,
            )));
        }
        for t in 0..xs.len() {
            let mut att = vec![0.0; HEADS * HD];
            for hh in 0..HEADS {
                let kvh = hh / (HEADS / KV_HEADS);
                let q = &qs[t][hh * HD..(hh + 1) * HD];
                let sc: Vec<f32> = (0..=t)
                    .map(|j| {
                        let k = &ks[j][kvh * HD..(kvh + 1) * HD];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() / (HD as f32).sqrt()
                    })
                    .collect();
                let m = sc.iter().copied().fold(f32::MIN, f32::max);
                let e: Vec<f32> = sc.iter().map(|s| (s - m).exp()).collect();
                let z: f32 = e.iter().sum();
                for j in 0..=t {
                    for d in 0..HD {
                        let pj = half::f16::from_f32(e[j] / z).to_f32();
                        att[hh * HD + d] += pj * vs[j][kvh * HD + d];
                    }
                }
            }
            let o = matvec(g(&p("self_attn.o_proj.weight")), H, &att);
            xs[t].iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let h = rmsnorm(&xs[t], g(&p("post_attention_layernorm.weight")));
            let gate = matvec(g(&p("mlp.gate_proj.weight")), FFN, &h);
            let up = matvec(g(&p("mlp.up_proj.weight")), FFN, &h);
            let act: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(a, b)| a / (1.0 + (-a).exp()) * b)
                .collect();
            let d = matvec(g(&p("mlp.down_proj.weight")), H, &act);
            xs[t].iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
    }
    let last = rmsnorm(xs.last().expect("tokens"), g("model.norm.weight"));
    matvec(g("lm_head.weight"), VOCAB, &last)
}

fn tmp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("warmpath-hf-test-{}-{name}", std::process::id()))
}

fn check(bf16: bool) {
    let w = random_weights(bf16);
    let dir = tmp_dir(if bf16 { "bf16" } else { "f32" });
    write_checkpoint(&dir, &w, bf16);
    let opts = EngineOptions {
        kv_pages: 8,
        threads: 2,
        ..Default::default()
    };
    let mut e = Engine::load(&ModelSource::Path(dir), &opts).expect("load HF dir");
    assert_eq!(e.config().n_kv_heads, KV_HEADS);
    let ids = e
        .tokenizer()
        .encode("Hello, wörld! 123", false)
        .expect("encode");
    assert_eq!(
        e.tokenizer().decode(&ids).expect("decode"),
        "Hello, wörld! 123"
    );
    let got = e
        .step(&[StepItem {
            tokens: &ids,
            start_pos: 0,
            pages: &[PageId(0), PageId(1)],
        }])
        .expect("step")
        .remove(0);
    let want = reference_logits(&w, &ids);
    let num: f32 = got.iter().zip(&want).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f32 = want.iter().map(|b| b * b).sum();
    let rel = (num / den).sqrt();
    assert!(rel < 1e-4, "bf16={bf16}: relative L2 error {rel}");
    let chat = e
        .tokenizer()
        .render_chat(&[warmpath_text::ChatMessage::new("user", "hi")], true)
        .expect("template");
    assert!(chat.ends_with("<|im_start|>assistant\n"), "{chat}");
}

#[test]
fn hf_f32_checkpoint_matches_reference() {
    check(false);
}

#[test]
fn hf_bf16_checkpoint_matches_reference() {
    check(true);
}
