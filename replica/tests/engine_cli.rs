#![allow(clippy::unwrap_used)]
//! The `replica generate` and `replica tokenize` command shapes promised in
//! `/work/shared/CLI.md`, run as real processes: on `dummy:tiny`, and on the default
//! SmolLM2 GGUF against the llama.cpp fixtures (fetched if missing).

use serde::Deserialize;
use std::process::Command;

fn replica(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_replica"))
        .args(args)
        .output()
        .expect("run replica");
    assert!(
        out.status.success(),
        "replica {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct GenOut {
    prompt_tokens: Vec<u32>,
    tokens: Vec<u32>,
    text: String,
}

#[path = "../../engine/tests/llamacpp_fixtures/mod.rs"]
mod llamacpp_fixtures;
use llamacpp_fixtures::fixtures;

#[test]
fn tokenize_prints_a_json_array_of_ids() {
    let out = replica(&[
        "tokenize",
        "--model",
        "dummy:tiny",
        "--text",
        "hé<|im_end|>",
    ]);
    let ids: Vec<u32> = serde_json::from_str(out.trim()).unwrap();
    // Byte-level dummy vocabulary: 'h', the two bytes of 'é', then the special token.
    assert_eq!(ids, vec![b'h' as u32, 0xc3, 0xa9, 258]);
}

#[test]
fn generate_json_has_the_promised_shape() {
    let run = || -> GenOut {
        let out = replica(&[
            "generate",
            "--model",
            "dummy:tiny",
            "--prompt",
            "hello",
            "--max-tokens",
            "6",
            "--temperature",
            "0",
            "--json",
        ]);
        serde_json::from_str(out.trim()).unwrap()
    };
    let g = run();
    assert_eq!(
        g.prompt_tokens,
        b"hello".iter().map(|&b| b as u32).collect::<Vec<_>>()
    );
    assert!(!g.tokens.is_empty() && g.tokens.len() <= 6, "{g:?}");
    // Greedy is deterministic.
    let again = run();
    assert_eq!(again.tokens, g.tokens);
    assert_eq!(again.text, g.text);
}

#[test]
fn default_model_cli_matches_llamacpp() {
    let f = fixtures();
    // `--model` with no value is the default SmolLM2 GGUF.
    let case = &f.tokenize[0];
    let out = replica(&["tokenize", "--model", "--text", &case.text]);
    let ids: Vec<u32> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(ids, case.ids);
    for kind in ["raw", "chat"] {
        let p = f.prompts.iter().find(|p| p.kind == kind).unwrap();
        let mut args = vec![
            "generate",
            "--model",
            "--prompt",
            &p.message,
            "--max-tokens",
            "8",
            "--temperature",
            "0",
            "--json",
        ];
        if kind == "chat" {
            args.push("--chat");
        }
        let g: GenOut = serde_json::from_str(replica(&args).trim()).unwrap();
        assert_eq!(g.prompt_tokens, p.ids, "{kind}: prompt tokens");
        // Generation stops early at an end-of-turn token; compare what was produced.
        assert!(!g.tokens.is_empty());
        assert_eq!(
            g.tokens[..],
            p.greedy[..g.tokens.len()],
            "{kind}: greedy tokens"
        );
        assert!(!g.text.is_empty());
    }
}
