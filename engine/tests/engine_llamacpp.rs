#![allow(clippy::unwrap_used)]
//! Agreement with llama.cpp on the default SmolLM2-135M-Instruct Q4_1 GGUF, against the
//! fixtures `scripts/gen-fixtures.py` generated (tokenizer ids, last-position logits and
//! 32-token greedy continuations). The model is fetched if missing.

use base64::Engine as _;
use warmpath_core::TokenId;
use warmpath_engine::sampling::argmax;
use warmpath_engine::{Engine, EngineOptions, ModelSource, PageId, StepItem};

mod llamacpp_fixtures;
use llamacpp_fixtures::fixtures;

fn engine(pages: usize) -> Engine {
    let opts = EngineOptions {
        kv_pages: pages,
        threads: 2,
        ..Default::default()
    };
    Engine::load(&ModelSource::Default, &opts).expect("default model loads")
}

fn ids(v: &[u32]) -> Vec<TokenId> {
    v.iter().map(|&i| TokenId(i)).collect()
}

#[test]
fn tokenizer_matches_llamacpp_and_roundtrips() {
    let f = fixtures();
    assert_eq!(f.tokenize.len(), 50);
    let e = engine(1);
    let tok = e.tokenizer();
    let mut mismatches = Vec::new();
    for case in &f.tokenize {
        let got: Vec<u32> = tok
            .encode(&case.text, false)
            .expect("encode")
            .iter()
            .map(|t| t.0)
            .collect();
        if got != case.ids {
            mismatches.push(format!(
                "{:?}: ours {got:?} llama.cpp {:?}",
                case.text, case.ids
            ));
        }
        let back = tok.decode(&ids(&case.ids)).expect("decode");
        assert_eq!(back, case.text, "detokenize(tokenize(s)) != s");
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn chat_template_renders_like_fixture() {
    let f = fixtures();
    let e = engine(1);
    for p in f.prompts.iter().filter(|p| p.kind == "chat") {
        let msg = warmpath_text::ChatMessage::new("user", p.message.clone());
        let text = e
            .tokenizer()
            .render_chat(std::slice::from_ref(&msg), true)
            .expect("render");
        assert_eq!(text, p.text);
        let got: Vec<u32> = e
            .tokenizer()
            .encode_chat(&[msg])
            .expect("encode")
            .iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(got, p.ids);
    }
}

fn rel_l2(a: &[f32], b: &[f32]) -> f32 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den).sqrt() as f32
}

#[test]
fn logits_and_greedy_match_llamacpp() {
    let f = fixtures();
    assert_eq!(f.prompts.len(), 10);
    let mut e = engine(64);
    let pages: Vec<PageId> = (0..64).map(PageId).collect();
    let mut same_greedy = 0;
    let mut failures = Vec::new();
    for p in &f.prompts {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&p.logits_f16_b64)
            .expect("base64");
        let want: Vec<f32> = raw
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        let prompt = ids(&p.ids);
        let mut logits = e
            .step(&[StepItem {
                tokens: &prompt,
                start_pos: 0,
                pages: &pages,
            }])
            .expect("prefill")
            .remove(0);
        assert_eq!(logits.len(), want.len());
        let err = rel_l2(&logits, &want);
        let top1 = argmax(&logits);
        if err > 2e-2 {
            failures.push(format!("{:?}: relative L2 error {err:.3e}", p.message));
        }
        if top1 != p.top1 {
            failures.push(format!(
                "{:?}: top-1 {top1}, llama.cpp {}",
                p.message, p.top1
            ));
        }
        let mut greedy = Vec::new();
        for i in 0..p.greedy.len() {
            let next = TokenId(argmax(&logits) as u32);
            greedy.push(next.0);
            if i + 1 == p.greedy.len() {
                break;
            }
            logits = e
                .step(&[StepItem {
                    tokens: &[next],
                    start_pos: prompt.len() + i,
                    pages: &pages,
                }])
                .expect("decode")
                .remove(0);
        }
        let same = greedy == p.greedy;
        same_greedy += usize::from(same);
        eprintln!(
            "{} {:?}: rel L2 {err:.2e}, greedy {}",
            p.kind,
            p.message,
            if same { "same" } else { "DIFFERS" }
        );
        if !same {
            eprintln!(" ours  {greedy:?}\n llama {:?}", p.greedy);
        }
    }
    eprintln!("greedy agreement {same_greedy}/10");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        same_greedy >= 9,
        "only {same_greedy}/10 greedy continuations match"
    );
}
