#![allow(clippy::unwrap_used)]
//! Hugging Face tokenizer files: the checkpoint layout the replica's HF test writes
//! (`tokenizer.json` + `tokenizer_config.json` with a string BOS and an AddedToken EOS)
//! round-trips into the spec it came from; the newer `chat_template.jinja` layout and
//! explicit template files work; the checkpoint hint follows the bytes read; unreadable
//! files and bad keys give errors that name the file and the key.

use serde_json::json;
use std::path::{Path, PathBuf};
use warmpath_text::bytelevel::byte_level_spec;
use warmpath_text::hf_files::{self, HfFiles};
use warmpath_text::{ChatMessage, ChatTokenizer, TextError, TokenizerSource, TokenizerSpec};

const VOCAB: usize = 259;
const JINJA: &str = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}";

fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("warmpath-text-hf-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The spec the files of [`write_checkpoint_tokenizer`] describe.
fn expected() -> TokenizerSpec {
    TokenizerSpec {
        bos_token: Some("<|im_start|>".into()),
        eos_token: Some("<|im_end|>".into()),
        stop_tokens: vec![],
        add_bos: false,
        ..byte_level_spec(VOCAB)
    }
}

/// `tokenizer.json` and `tokenizer_config.json` as `replica/tests/engine_hf.rs` writes them.
fn write_checkpoint_tokenizer(dir: &Path) {
    let spec = byte_level_spec(VOCAB);
    std::fs::write(dir.join("tokenizer.json"), spec.tokenizer.to_string()).unwrap();
    let tc = json!({"chat_template": spec.chat_template, "bos_token": "<|im_start|>",
                    "eos_token": {"content": "<|im_end|>"}, "add_bos_token": false});
    std::fs::write(dir.join("tokenizer_config.json"), tc.to_string()).unwrap();
}

#[test]
fn a_checkpoint_directory_round_trips() {
    let dir = tmp_dir("checkpoint");
    write_checkpoint_tokenizer(&dir);
    let files = HfFiles::in_dir(&dir);
    assert_eq!(files.config, Some(dir.join("tokenizer_config.json")));
    assert_eq!(files.template, None);
    let spec = hf_files::tokenizer_spec_from_dir(&dir).unwrap();
    assert_eq!(spec, expected());
    let tok = ChatTokenizer::from_spec(&spec).unwrap();
    let ids = tok.encode_chat(&[ChatMessage::new("user", "hi")]).unwrap();
    assert!(tok.decode(&ids).unwrap().contains("hi"));
    let via_files = hf_files::tokenizer_spec_from_files(
        &dir.join("tokenizer.json"),
        Some(&dir.join("tokenizer_config.json")),
    )
    .unwrap();
    assert_eq!(via_files, spec);
}

#[test]
fn a_jinja_template_file_takes_precedence() {
    let dir = tmp_dir("jinja");
    write_checkpoint_tokenizer(&dir);
    std::fs::write(dir.join("chat_template.jinja"), JINJA).unwrap();
    let spec = hf_files::tokenizer_spec_from_dir(&dir).unwrap();
    assert_eq!(spec.chat_template.as_deref(), Some(JINJA));
    assert_eq!(
        spec.eos_token.as_deref(),
        Some("<|im_end|>"),
        "tokens still from the config"
    );
    let tok = ChatTokenizer::from_spec(&spec).unwrap();
    let text = tok
        .render_chat(&[ChatMessage::new("user", "hi")], false)
        .unwrap();
    assert_eq!(text, "[user]hi");

    // tokenizer.json with only a template file: no special tokens from anywhere else.
    let alone = hf_files::tokenizer_spec_from_files(
        &dir.join("tokenizer.json"),
        Some(&dir.join("chat_template.jinja")),
    )
    .unwrap();
    assert_eq!(alone.chat_template.as_deref(), Some(JINJA));
    assert_eq!(alone.bos_token, None);
    let bare = hf_files::tokenizer_spec_from_files(&dir.join("tokenizer.json"), None).unwrap();
    assert_eq!(bare.chat_template, None);
    assert_eq!(bare.tokenizer, expected().tokenizer);
}

#[test]
fn the_source_overrides_a_directory_template_and_hashes_what_it_read() {
    let dir = tmp_dir("source");
    write_checkpoint_tokenizer(&dir);
    let other = dir.join("other.jinja");
    std::fs::write(&other, JINJA).unwrap();
    let plain = TokenizerSource::from_path(&dir).load().unwrap().unwrap();
    assert_eq!(plain.spec, expected());
    let again = TokenizerSource::from_path(&dir).load().unwrap().unwrap();
    assert_eq!(plain.checkpoint_hint, again.checkpoint_hint);
    assert_eq!(plain.checkpoint_hint.len(), 16);

    let templated = TokenizerSource::HuggingFace {
        tokenizer: dir.clone(),
        template: Some(other),
    }
    .load()
    .unwrap()
    .unwrap();
    assert_eq!(templated.spec.chat_template.as_deref(), Some(JINJA));
    assert_eq!(templated.spec.bos_token, expected().bos_token);
    assert_ne!(templated.checkpoint_hint, plain.checkpoint_hint);

    let tokenizer_only = TokenizerSource::from_path(dir.join("tokenizer.json"))
        .load()
        .unwrap()
        .unwrap();
    assert_ne!(tokenizer_only.checkpoint_hint, plain.checkpoint_hint);
}

#[test]
fn missing_files_and_bad_keys_name_the_file_and_the_key() {
    let dir = tmp_dir("errors");
    let err = hf_files::tokenizer_spec_from_dir(&dir).expect_err("no tokenizer.json");
    assert!(matches!(err, TextError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("tokenizer.json"), "{err}");

    std::fs::write(dir.join("tokenizer.json"), "{not json").unwrap();
    let msg = hf_files::tokenizer_spec_from_dir(&dir)
        .expect_err("bad json")
        .to_string();
    assert!(msg.contains("tokenizer.json: is not valid JSON"), "{msg}");

    std::fs::write(dir.join("tokenizer.json"), r#"{"chat_template": "x"}"#).unwrap();
    let msg = hf_files::tokenizer_spec_from_dir(&dir)
        .expect_err("a config")
        .to_string();
    assert!(
        msg.contains("tokenizer.json: metadata key model missing"),
        "{msg}"
    );

    write_checkpoint_tokenizer(&dir);
    let config = dir.join("tokenizer_config.json");
    for (key, value, problem) in [
        (
            "bos_token",
            json!(5),
            "is not a string or an AddedToken object",
        ),
        (
            "eos_token",
            json!({"special": true}),
            "is an object without a string",
        ),
        ("chat_template", json!(3), "is not a string or a list"),
        ("add_bos_token", json!("yes"), "is not a boolean"),
    ] {
        std::fs::write(&config, json!({ key: value }).to_string()).unwrap();
        let msg = hf_files::tokenizer_spec_from_dir(&dir)
            .expect_err(key)
            .to_string();
        let want = format!("tokenizer_config.json: metadata key {key} {problem}");
        assert!(msg.contains(&want), "{msg} lacks {want}");
    }

    std::fs::write(&config, "[]").unwrap();
    let msg = hf_files::tokenizer_spec_from_dir(&dir)
        .expect_err("array")
        .to_string();
    assert!(
        msg.contains("tokenizer_config.json: is not a JSON object"),
        "{msg}"
    );
}
