//! Warmpath renders agent requests exactly as the engine does: a seeded corpus of agent
//! chats (tools, parallel tool calls, tool results, multi-turn, non-ASCII, content parts,
//! `chat_template_kwargs`, `continue_final_message`; `scripts/render_reference.py`) goes
//! through vLLM's message preparation and Hugging Face `transformers`' `apply_chat_template`
//! on real chat templates (`tests/data/templates/`, from llama.cpp's test templates) and
//! real vocabularies (llama.cpp's vocab-only GGUF files), and through [`ChatInput`] and
//! [`ChatTokenizer::encode_input`]; the token ids must be equal, request by request. A
//! chat the template refuses (`raise_exception`) must be refused by both.
//!
//! `scripts/render-reference.sh` sets up the Python side (cached under ~/.cache/warmpath).

use std::path::{Path, PathBuf};
use std::process::Command;
use warmpath_text::{ChatInput, ChatTokenizer};

/// (family, vocab file, template file).
const FAMILIES: [(&str, &str, &str); 5] = [
    (
        "llama-3.1",
        "ggml-vocab-llama-bpe.gguf",
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
    ),
    (
        "qwen-2.5",
        "ggml-vocab-qwen2.gguf",
        "Qwen-Qwen2.5-7B-Instruct.jinja",
    ),
    ("qwen-3", "ggml-vocab-qwen2.gguf", "Qwen-Qwen3-0.6B.jinja"),
    (
        "hermes-3",
        "ggml-vocab-llama-bpe.gguf",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    ),
    (
        "mistral-nemo",
        "ggml-vocab-llama-bpe.gguf",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    ),
];

/// Jinja2's error for `for x in none`.
const NONE_ITER: &str = "'NoneType' object is not iterable";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the setup script: (venv python, vocab dir).
fn setup() -> (String, PathBuf) {
    let out = Command::new(repo().join("scripts/render-reference.sh"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/render-reference.sh: {e} (needs bash)"));
    assert!(
        out.status.success(),
        "scripts/render-reference.sh failed: {}\nIt needs python3 with the venv module and \
         pip (apt-get install python3-venv python3-pip) and network access on its first run \
         (it installs transformers and jinja2 into ~/.cache/warmpath).",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("render-reference.sh printed no {k}: {text}"))
            .to_string()
    };
    (line("python="), PathBuf::from(line("vocab=")))
}

#[test]
fn agent_requests_render_to_the_engines_token_ids() {
    let (python, vocab) = setup();
    let work = std::env::temp_dir().join(format!("warmpath-render-ref-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let templates = repo().join("text/tests/data/templates");
    let mut tokenizers = Vec::new();
    let mut args = Vec::new();
    for (family, vocab_file, template) in FAMILIES {
        let mut spec = warmpath_text::gguf::tokenizer_spec_from_file(&vocab.join(vocab_file))
            .unwrap_or_else(|e| panic!("{family}: {e}"));
        let template_path = templates.join(template);
        spec.chat_template = Some(std::fs::read_to_string(&template_path).unwrap());
        let tok_file = work.join(format!("{family}.tokenizer.json"));
        std::fs::write(&tok_file, serde_json::to_vec(&spec.tokenizer).unwrap()).unwrap();
        args.push(format!(
            "{family}={},{},{},{}",
            tok_file.display(),
            template_path.display(),
            spec.bos_token.clone().unwrap_or_default(),
            spec.eos_token.clone().unwrap_or_default()
        ));
        tokenizers.push((family, ChatTokenizer::from_spec(&spec).unwrap()));
    }
    let expected_file = work.join("expected.json");
    let status = Command::new(&python)
        .arg(repo().join("scripts/render_reference.py"))
        .arg(&expected_file)
        .args(&args)
        .status()
        .expect("run the reference script");
    assert!(status.success(), "scripts/render_reference.py failed");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&expected_file).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&work);
    let corpus = expected["corpus"].as_array().unwrap();
    assert!(corpus.len() >= 200, "{} conversations", corpus.len());
    let mut failures = Vec::new();
    for (family, tok) in &tokenizers {
        let cases = expected["families"][*family].as_array().unwrap();
        let (mut equal, mut refused, mut engine_only) = (0, 0, 0);
        let mut reasons = std::collections::BTreeMap::<String, usize>::new();
        for (i, (body, want)) in corpus.iter().zip(cases).enumerate() {
            let body = body.as_str().expect("each body is a JSON string");
            let input = ChatInput::from_body(body.as_bytes()).unwrap();
            let got = tok.encode_input(&input);
            match (want.get("ids"), got) {
                (None, Err(_)) => {
                    refused += 1;
                    *reasons.entry(want["error"].to_string()).or_default() += 1;
                }
                // Jinja2 raises on iterating `None`; minijinja iterates it as empty (see
                // docs/engines.md): the engine refuses such a request, so it caches nothing.
                (None, Ok(_))
                    if want["error"]
                        .as_str()
                        .is_some_and(|e| e.contains(NONE_ITER)) =>
                {
                    engine_only += 1
                }
                (None, Ok(_)) => failures.push(format!(
                    "{family} #{i}: the template refused it ({}), Warmpath rendered it",
                    want["error"]
                )),
                (Some(_), Err(e)) => failures.push(format!("{family} #{i}: {e}")),
                (Some(ids), Ok(got)) => {
                    let ids: Vec<u32> = serde_json::from_value(ids.clone()).unwrap();
                    let got: Vec<u32> = got.iter().map(|t| t.0).collect();
                    if ids == got {
                        equal += 1;
                    } else {
                        failures.push(first_difference(family, i, tok, &ids, &got, want));
                    }
                }
            }
        }
        eprintln!(
            "{family}: {equal} equal, {refused} refused by both {reasons:?}, {engine_only} \
             refused by the engine only (iterating None), of {}",
            cases.len()
        );
        if equal < 60 {
            failures.push(format!("{family}: only {equal} chats rendered"));
        }
    }
    let shown: Vec<&String> = failures.iter().take(8).collect();
    assert!(
        failures.is_empty(),
        "{} failures, the first:\n{shown:#?}",
        failures.len()
    );
}

fn first_difference(
    family: &str,
    i: usize,
    tok: &ChatTokenizer,
    want: &[u32],
    got: &[u32],
    expected: &serde_json::Value,
) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let around = |ids: &[u32]| {
        let lo = at.saturating_sub(3);
        let hi = (at + 5).min(ids.len());
        let ids: Vec<_> = ids[lo..hi]
            .iter()
            .map(|&i| warmpath_core::TokenId(i))
            .collect();
        format!("{:?}", tok.decode(&ids).unwrap_or_default())
    };
    let text = expected["text"].as_str().unwrap_or_default();
    format!(
        "{family} #{i}: first difference at token {at} (lengths {} vs {}): engine {} / \
         Warmpath {}\n  engine prompt: {:?}",
        want.len(),
        got.len(),
        around(want),
        around(got),
        text.chars().take(400).collect::<String>()
    )
}
