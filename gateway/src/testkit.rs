//! Small fixtures shared by unit tests, the e2e crate and the benchmark upstream: a
//! byte-level BPE tokenizer with ChatML special tokens, built in code (no model files).

use serde_json::{json, Map, Value};
use warmpath_protocol::text::TokenizerSpec;

/// ChatML, as SmolLM2-style instruct models use.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// GPT-2's byte-to-unicode table: byte `b` is spelled `table[b]` in a byte-level vocab.
pub fn bytes_to_unicode() -> Vec<char> {
    let mut printable: Vec<u32> = (u32::from('!')..=u32::from('~')).collect();
    printable.extend(0xA1..=0xAC);
    printable.extend(0xAE..=0xFF);
    let mut table = vec!['\0'; 256];
    let mut extra = 0;
    for b in 0..256u32 {
        let c = if printable.contains(&b) {
            b
        } else {
            extra += 1;
            255 + extra
        };
        table[b as usize] = char::from_u32(c).unwrap_or('?');
    }
    table
}

/// A byte-level BPE tokenizer spec (256 byte tokens, a few merges, ChatML specials).
pub fn byte_level_spec() -> TokenizerSpec {
    let table = bytes_to_unicode();
    let mut vocab = Map::new();
    for (b, c) in table.iter().enumerate() {
        vocab.insert(c.to_string(), json!(b));
    }
    let merges = [
        ("t", "h"),
        ("th", "e"),
        ("Ġ", "c"),
        ("Ġc", "a"),
        ("c", "h"),
        ("e", "s"),
        ("Ġ", "t"),
    ];
    let mut merge_list = Vec::new();
    for (a, b) in merges {
        let merged = format!("{a}{b}");
        let id = vocab.len();
        vocab.entry(merged).or_insert(json!(id));
        merge_list.push(Value::String(format!("{a} {b}")));
    }
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    let added: Vec<Value> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"id": vocab.len() + i, "content": s, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab, "merges": merge_list
        }
    });
    TokenizerSpec {
        tokenizer,
        chat_template: Some(CHATML_TEMPLATE.to_string()),
        bos_token: None,
        eos_token: Some("<|im_end|>".into()),
        stop_tokens: vec!["<|endoftext|>".into()],
        add_bos: false,
    }
}
