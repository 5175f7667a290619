//! A byte-level tokenizer (one token per byte, plus ChatML specials) as a HF
//! `tokenizer.json` document, for dummy models and tests.

use serde_json::{json, Value};
use warmpath_protocol::text::TokenizerSpec;

/// The ChatML template SmolLM2 ships (used by dummy models).
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Special tokens, at ids 256.. in this order.
const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// GPT-2's reversible byte -> printable char map.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            b
        } else {
            n += 1;
            255 + n
        };
        table[b as usize] = char::from_u32(c).unwrap_or('?');
    }
    table
}

/// HF pre-tokenizer: digits one by one, then GPT-2 byte-level splitting.
pub fn smollm_pre_tokenizer() -> Value {
    json!({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
    ]})
}

/// A BPE `tokenizer.json` document from a vocabulary, merges and added tokens.
pub fn bpe_tokenizer_json(
    vocab: &[String],
    merges: &[String],
    added: &[(u32, String)],
    pre_tokenizer: Value,
) -> Value {
    let vocab_map: serde_json::Map<String, Value> = vocab
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let added: Vec<Value> = added
        .iter()
        .map(|(id, content)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab_map, "merges": merges}
    })
}

/// Byte-level spec with exactly `vocab_size` ids: 256 bytes, the ChatML specials, then
/// unreachable two-byte filler tokens so every model output id decodes.
pub fn byte_level_spec(vocab_size: usize) -> TokenizerSpec {
    let map = byte_to_char();
    let mut vocab: Vec<String> = map.iter().map(|c| c.to_string()).collect();
    vocab.extend(SPECIALS.iter().map(|s| s.to_string()));
    let mut i = 0usize;
    while vocab.len() < vocab_size {
        vocab.push(format!("{}{}", map[i / 256 % 256], map[i % 256]));
        i += 1;
    }
    let added: Vec<(u32, String)> = SPECIALS
        .iter()
        .enumerate()
        .map(|(i, s)| (256 + i as u32, s.to_string()))
        .collect();
    TokenizerSpec {
        tokenizer: bpe_tokenizer_json(&vocab, &[], &added, smollm_pre_tokenizer()),
        chat_template: Some(CHATML_TEMPLATE.to_string()),
        bos_token: Some("<|im_start|>".into()),
        eos_token: Some("<|im_end|>".into()),
        stop_tokens: vec!["<|endoftext|>".into()],
        add_bos: false,
    }
}
