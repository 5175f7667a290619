#![allow(clippy::unwrap_used)]
//! The SmolLM2 GGUF's tokenizer as a gateway reads it (`warmpath_text::gguf`, metadata
//! only) is exactly the one the replica publishes at `/v1/replica/tokenizer`, pinned by the
//! SHA-256 of its JSON as the replica published it before the GGUF reader moved to
//! `warmpath-text`; and reading it touches only a few percent of the file.

use sha2::{Digest, Sha256};
use warmpath_engine::{fetch, Engine, EngineOptions, ModelSource};
use warmpath_text::{gguf, TokenizerSource};

/// SHA-256 of `serde_json::to_string(&spec)` for the default model's tokenizer.
const SMOLLM2_SPEC_SHA256: &str =
    "d605cc9c1609cabf11136a784cd95ac5bf366cbaaf0258765f42f03546f9a9d1";

#[test]
fn the_gguf_tokenizer_read_from_metadata_is_the_replicas() {
    let opts = EngineOptions {
        kv_pages: 4,
        threads: 1,
        ..Default::default()
    };
    let engine = Engine::load(&ModelSource::Default, &opts)
        .expect("the default SmolLM2 model loads (scripts/fetch-model.sh fetches it)");
    let path = fetch::default_model_path();

    let read = gguf::read_file(&path).unwrap();
    assert!(
        read.bytes_read * 10 < read.file_len,
        "read {} of {} bytes",
        read.bytes_read,
        read.file_len
    );

    let loaded = TokenizerSource::from_path(&path).load().unwrap().unwrap();
    assert_eq!(&loaded.spec, engine.tokenizer().spec());
    assert_eq!(loaded.checkpoint_hint, read.checkpoint_hint);
    assert_eq!(loaded.spec.eos_token.as_deref(), Some("<|im_end|>"));
    assert!(loaded.spec.chat_template.is_some());

    let json = serde_json::to_string(&loaded.spec).unwrap();
    let sha: String = Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(sha, SMOLLM2_SPEC_SHA256);
}
