#![allow(clippy::unwrap_used)]
//! The tokenizer of a GGUF file from its metadata alone: a small file written here (with a
//! large tensor section) yields its spec after reading little more than the metadata; the
//! checkpoint hint follows the metadata; missing files, bad headers and missing or wrong
//! keys give errors that name the file and the key.

use std::path::{Path, PathBuf};
use warmpath_text::bytelevel::{BYTE_CHARS, SMOLLM2_TEMPLATE};
use warmpath_text::gguf::{self, GgufError};
use warmpath_text::{ChatMessage, ChatTokenizer, TextError, TokenizerSource};

/// Bytes of (unparsed) tensor data after the metadata.
const TENSOR_BYTES: usize = 4 << 20;

enum Meta {
    U32(u32),
    Str(String),
    Bool(bool),
    StrArr(Vec<String>),
    I32Arr(Vec<i32>),
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

/// A GGUF v3 file: `meta`, one F32 tensor, and `TENSOR_BYTES` of data.
fn gguf_bytes(meta: &[(&str, Meta)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend((meta.len() as u64).to_le_bytes());
    for (k, v) in meta {
        put_str(&mut b, k);
        match v {
            Meta::U32(x) => {
                b.extend(4u32.to_le_bytes());
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
                a.iter().for_each(|s| put_str(&mut b, s));
            }
            Meta::I32Arr(a) => {
                b.extend(9u32.to_le_bytes());
                b.extend(5u32.to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                a.iter().for_each(|x| b.extend(x.to_le_bytes()));
            }
        }
    }
    put_str(&mut b, "weights");
    b.extend(1u32.to_le_bytes());
    b.extend((TENSOR_BYTES as u64 / 4).to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b.extend((0..TENSOR_BYTES).map(|i| (i % 251) as u8));
    b
}

/// ChatML byte-level metadata: 256 byte tokens, then `<|endoftext|>`, `<|im_start|>`,
/// `<|im_end|>` as control tokens; `without` names a key to leave out.
fn chatml_meta(without: &str) -> Vec<(&'static str, Meta)> {
    let mut tokens: Vec<String> = BYTE_CHARS.iter().map(|c| c.to_string()).collect();
    tokens.extend(["<|endoftext|>", "<|im_start|>", "<|im_end|>"].map(String::from));
    let mut types = vec![1i32; 256];
    types.extend([3, 3, 3]);
    let meta = vec![
        ("general.architecture", Meta::Str("llama".into())),
        ("tokenizer.ggml.model", Meta::Str("gpt2".into())),
        ("tokenizer.ggml.pre", Meta::Str("smollm".into())),
        ("tokenizer.ggml.tokens", Meta::StrArr(tokens)),
        ("tokenizer.ggml.token_type", Meta::I32Arr(types)),
        ("tokenizer.ggml.merges", Meta::StrArr(vec![])),
        ("tokenizer.ggml.bos_token_id", Meta::U32(257)),
        ("tokenizer.ggml.eos_token_id", Meta::U32(256)),
        ("tokenizer.ggml.add_bos_token", Meta::Bool(false)),
        (
            "tokenizer.chat_template",
            Meta::Str(SMOLLM2_TEMPLATE.into()),
        ),
    ];
    meta.into_iter().filter(|(k, _)| *k != without).collect()
}

fn write_tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("warmpath-text-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn message(r: Result<impl std::fmt::Debug, TextError>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn the_spec_comes_from_the_metadata_without_reading_the_tensors() {
    let path = write_tmp("chatml.gguf", &gguf_bytes(&chatml_meta("")));
    let read = gguf::read_file(&path).unwrap();
    assert_eq!(read.file_len, std::fs::metadata(&path).unwrap().len());
    assert!(
        read.bytes_read < 256 * 1024 && read.bytes_read * 10 < read.file_len,
        "read {} of {} bytes",
        read.bytes_read,
        read.file_len
    );
    assert_eq!(read.metadata.tensor_count, 1);
    assert_eq!(
        read.metadata
            .get("general.architecture")
            .and_then(|v| v.as_str()),
        Some("llama")
    );

    let spec = gguf::tokenizer_spec_from_file(&path).unwrap();
    assert_eq!(spec.bos_token.as_deref(), Some("<|im_start|>"));
    assert_eq!(spec.eos_token.as_deref(), Some("<|endoftext|>"));
    assert_eq!(spec.stop_tokens, vec!["<|im_end|>".to_string()]);
    assert_eq!(spec.chat_template.as_deref(), Some(SMOLLM2_TEMPLATE));
    let tok = ChatTokenizer::from_spec(&spec).unwrap();
    let ids = tok
        .encode_chat(&[
            ChatMessage::new("system", "s"),
            ChatMessage::new("user", "hi"),
        ])
        .unwrap();
    let text = tok.decode(&ids).unwrap();
    assert!(text.contains("user\nhi"), "{text:?}");
    assert_eq!(ids[0].0, 257, "the chat opens with <|im_start|>");
}

#[test]
fn the_hint_follows_the_metadata_not_the_weights() {
    let bytes = gguf_bytes(&chatml_meta(""));
    let a = gguf::load_tokenizer(&write_tmp("hint-a.gguf", &bytes)).unwrap();
    let again = gguf::load_tokenizer(&write_tmp("hint-a.gguf", &bytes)).unwrap();
    assert_eq!(a.checkpoint_hint, again.checkpoint_hint);
    assert_eq!(a.checkpoint_hint.len(), 16);
    assert!(a.checkpoint_hint.bytes().all(|c| c.is_ascii_hexdigit()));

    let mut other_weights = bytes.clone();
    *other_weights.last_mut().unwrap() ^= 0xff;
    let w = gguf::load_tokenizer(&write_tmp("hint-w.gguf", &other_weights)).unwrap();
    assert_eq!(a.checkpoint_hint, w.checkpoint_hint);

    let mut meta = chatml_meta("tokenizer.ggml.add_bos_token");
    meta.push(("tokenizer.ggml.add_bos_token", Meta::Bool(true)));
    let m = gguf::load_tokenizer(&write_tmp("hint-m.gguf", &gguf_bytes(&meta))).unwrap();
    assert_ne!(a.checkpoint_hint, m.checkpoint_hint);
    assert!(m.spec.add_bos);

    let via_source = TokenizerSource::from_path(write_tmp("hint-a.gguf", &bytes))
        .load()
        .unwrap()
        .unwrap();
    assert_eq!(via_source, a);
}

#[test]
fn missing_or_wrong_keys_name_the_file_and_the_key() {
    let path = write_tmp(
        "no-tokens.gguf",
        &gguf_bytes(&chatml_meta("tokenizer.ggml.tokens")),
    );
    let msg = message(gguf::tokenizer_spec_from_file(&path));
    assert!(
        msg.ends_with("no-tokens.gguf: metadata key tokenizer.ggml.tokens missing"),
        "{msg}"
    );

    let path = write_tmp(
        "no-model.gguf",
        &gguf_bytes(&chatml_meta("tokenizer.ggml.model")),
    );
    let msg = message(gguf::tokenizer_spec_from_file(&path));
    assert!(
        msg.contains("no-model.gguf") && msg.contains("tokenizer.ggml.model missing"),
        "{msg}"
    );

    let mut meta = chatml_meta("tokenizer.ggml.model");
    meta.push(("tokenizer.ggml.model", Meta::Str("llama".into())));
    let path = write_tmp("spm.gguf", &gguf_bytes(&meta));
    let msg = message(gguf::tokenizer_spec_from_file(&path));
    assert!(
        msg.contains("spm.gguf") && msg.contains("tokenizer.ggml.model is \"llama\""),
        "{msg}"
    );

    let mut meta = chatml_meta("tokenizer.ggml.pre");
    meta.push(("tokenizer.ggml.pre", Meta::Str("mystery".into())));
    let path = write_tmp("pre.gguf", &gguf_bytes(&meta));
    let msg = message(gguf::tokenizer_spec_from_file(&path));
    assert!(
        msg.contains("pre.gguf") && msg.contains("tokenizer.ggml.pre is \"mystery\""),
        "{msg}"
    );

    let mut meta = chatml_meta("tokenizer.ggml.merges");
    meta.push(("tokenizer.ggml.merges", Meta::U32(3)));
    let path = write_tmp("merges.gguf", &gguf_bytes(&meta));
    let msg = message(gguf::tokenizer_spec_from_file(&path));
    assert!(
        msg.contains("merges.gguf: metadata key tokenizer.ggml.merges is not an array"),
        "{msg}"
    );
}

#[test]
fn unreadable_and_malformed_files_name_the_file() {
    let missing = Path::new("/nonexistent/warmpath/model.gguf");
    let err = gguf::tokenizer_spec_from_file(missing).expect_err("missing file");
    assert!(matches!(err, TextError::Io { .. }), "{err:?}");
    assert!(err
        .to_string()
        .starts_with("/nonexistent/warmpath/model.gguf: "));

    let mut bytes = gguf_bytes(&chatml_meta(""));
    bytes[0..4].copy_from_slice(b"GGML");
    let path = write_tmp("magic.gguf", &bytes);
    let err = gguf::tokenizer_spec_from_file(&path).expect_err("bad magic");
    match &err {
        TextError::Gguf {
            file,
            source: GgufError { offset: 0, msg },
        } => {
            assert_eq!(file, &path);
            assert!(msg.contains("magic"), "{msg}");
        }
        other => panic!("expected a GGUF error, got {other:?}"),
    }
    assert!(err
        .to_string()
        .contains("magic.gguf: invalid GGUF at byte offset 0"));

    // Cut inside the metadata (the token array): an offset, never a panic.
    let whole = gguf_bytes(&chatml_meta(""));
    for cut in [3, 10, 30, 700, 2000] {
        let path = write_tmp("cut.gguf", &whole[..cut]);
        match gguf::read_file(&path) {
            Err(TextError::Gguf { source, .. }) => {
                assert!(source.offset <= cut as u64, "cut {cut}: {source}");
                assert!(source.msg.contains("truncated"), "cut {cut}: {source}");
            }
            other => panic!("cut at {cut}: expected a GGUF error, got {other:?}"),
        }
    }
}

#[test]
fn a_length_beyond_the_file_is_refused_before_allocating() {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend((u64::MAX / 2).to_le_bytes()); // key length
    let err = gguf::read_metadata(&b[..], b.len() as u64).expect_err("implausible");
    assert_eq!(err.offset, 24);
    assert!(err.msg.contains("implausible metadata key"), "{}", err.msg);
}
