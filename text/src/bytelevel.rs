//! Byte-level BPE tokenizers built in code, with no model files: GPT-2's byte alphabet (the
//! one copy in the workspace), the `tokenizer.json` document builder the GGUF loader uses,
//! the vocabulary of `dummy:` models, and a small ChatML tokenizer with a few merges for
//! mock replicas, benchmarks and tests.

use serde_json::{json, Value};
use warmpath_protocol::tokenizer_spec::TokenizerSpec;

/// GPT-2's byte-to-unicode table: byte `b` is spelled `BYTE_CHARS[b]` in a byte-level
/// vocabulary. Printable Latin-1 bytes stand for themselves; the others, in byte order,
/// take the characters from U+0100 on.
pub static BYTE_CHARS: [char; 256] = byte_chars();

const fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut next = 256u32;
    let mut b = 0u32;
    while b < 256 {
        let printable = (33 <= b && b <= 126) || (161 <= b && b <= 172) || b >= 174;
        let c = if printable {
            b
        } else {
            next += 1;
            next - 1
        };
        out[b as usize] = match char::from_u32(c) {
            Some(c) => c,
            None => panic!("byte-level chars are below U+0200"),
        };
        b += 1;
    }
    out
}

/// Special tokens of the ChatML tokenizers here, in id order.
const CHATML_SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// Plain ChatML.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The ChatML template SmolLM2 ships (a default system turn when the chat has none).
pub const SMOLLM2_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// HF pre-tokenizer: GPT-2 byte-level splitting, no prefix space.
pub fn byte_level_pre_tokenizer() -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})
}

/// HF pre-tokenizer: digits one by one, then GPT-2 byte-level splitting (SmolLM2 and the
/// GGUF `smollm` family).
pub fn smollm_pre_tokenizer() -> Value {
    json!({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        byte_level_pre_tokenizer()
    ]})
}

/// A BPE `tokenizer.json` document from a vocabulary (id = position), merges (`"a b"`),
/// added special tokens and a pre-tokenizer; byte-level decoding, no normalizer.
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

/// The 256 byte tokens, ids 0..256.
fn byte_vocab() -> Vec<String> {
    BYTE_CHARS.iter().map(char::to_string).collect()
}

/// The ChatML specials as added tokens from id `first` on.
fn chatml_added(first: usize) -> Vec<(u32, String)> {
    CHATML_SPECIALS
        .iter()
        .enumerate()
        .map(|(i, s)| ((first + i) as u32, s.to_string()))
        .collect()
}

/// The tokenizer of `dummy:` models: exactly `vocab_size` ids, one token per byte, the
/// ChatML specials at 256.., then unreachable two-byte filler tokens so every model output
/// id decodes. SmolLM2's pre-tokenizer and template.
pub fn byte_level_spec(vocab_size: usize) -> TokenizerSpec {
    let mut vocab = byte_vocab();
    vocab.extend(CHATML_SPECIALS.iter().map(|s| s.to_string()));
    let mut i = 0usize;
    while vocab.len() < vocab_size {
        vocab.push(format!(
            "{}{}",
            BYTE_CHARS[i / 256 % 256],
            BYTE_CHARS[i % 256]
        ));
        i += 1;
    }
    TokenizerSpec {
        tokenizer: bpe_tokenizer_json(&vocab, &[], &chatml_added(256), smollm_pre_tokenizer()),
        chat_template: Some(SMOLLM2_TEMPLATE.to_string()),
        bos_token: Some("<|im_start|>".into()),
        eos_token: Some("<|im_end|>".into()),
        stop_tokens: vec!["<|endoftext|>".into()],
        add_bos: false,
    }
}

/// A small byte-level BPE with plain ChatML, for mock replicas, benchmarks and tests: the
/// 256 byte tokens, seven merges (so common words such as `the` and ` cache` take fewer
/// tokens than bytes) and the ChatML specials after them.
pub fn chatml_bpe_spec() -> TokenizerSpec {
    const MERGES: [(&str, &str); 7] = [
        ("t", "h"),
        ("th", "e"),
        ("Ġ", "c"),
        ("Ġc", "a"),
        ("c", "h"),
        ("e", "s"),
        ("Ġ", "t"),
    ];
    let mut vocab = byte_vocab();
    vocab.extend(MERGES.iter().map(|(a, b)| format!("{a}{b}")));
    let merges: Vec<String> = MERGES.iter().map(|(a, b)| format!("{a} {b}")).collect();
    let added = chatml_added(vocab.len());
    TokenizerSpec {
        tokenizer: bpe_tokenizer_json(&vocab, &merges, &added, byte_level_pre_tokenizer()),
        chat_template: Some(CHATML_TEMPLATE.to_string()),
        bos_token: None,
        eos_token: Some("<|im_end|>".into()),
        stop_tokens: vec!["<|endoftext|>".into()],
        add_bos: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatTokenizer;

    #[test]
    fn byte_alphabet_matches_gpt2() {
        assert_eq!(BYTE_CHARS[b'a' as usize], 'a');
        assert_eq!(BYTE_CHARS[b' ' as usize], '\u{120}');
        assert_eq!(BYTE_CHARS[b'\n' as usize], '\u{10a}');
        assert_eq!(BYTE_CHARS[0xAD], '\u{143}');
        let mut seen = BYTE_CHARS.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
    }

    #[test]
    fn the_synthetic_specs_build_and_round_trip() {
        let dummy = ChatTokenizer::from_spec(&byte_level_spec(320)).unwrap();
        assert_eq!(dummy.vocab_size(), 320);
        let small = ChatTokenizer::from_spec(&chatml_bpe_spec()).unwrap();
        assert!(small.has_fast_path());
        let ids = small.encode("the cache", false).unwrap();
        assert_eq!(ids.len(), 4, "{ids:?}"); // `the`, `Ġca`, `ch`, `e`
        assert_eq!(small.decode(&ids).unwrap(), "the cache");
    }
}
