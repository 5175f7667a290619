//! Decoding tests: golden payloads written by the real msgspec (`scripts/gen-vllm-events.py`)
//! in every encoding, and malformed input built by hand.

use super::*;

const VARIANTS: [&str; 5] = ["vllm_v1", "vllm_v2", "vllm_v3_array", "vllm_v3", "sglang"];
const TS: f64 = 1764750000.25;

fn fixture(variant: &str, name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/vllm_events/{variant}/{name}.hex",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    hex::decode(text.trim()).unwrap()
}

/// Engine hash of block `k` in `variant` (the generator's `H`).
fn h(variant: &str, k: u8) -> EngineHash {
    let k = i128::from(k);
    match variant {
        "vllm_v1" => EngineHash::Int(k * 1_000_003),
        "vllm_v2" => EngineHash::Int(0xF000_0000_0000_0000_i128 + k),
        "sglang" => EngineHash::Int(-(k * 1_000_000_007)),
        _ => EngineHash::Bytes(vec![k as u8; 32].into_boxed_slice()),
    }
}

fn medium(variant: &str) -> Option<String> {
    matches!(variant, "vllm_v2" | "vllm_v3" | "vllm_v3_array").then(|| "GPU".to_string())
}

fn tokens(from: u32, n: u32) -> Vec<u32> {
    (from..from + n).collect()
}

fn stored(variant: &str, keys: &[u8], parent: Option<u8>, toks: Vec<u32>) -> EngineEvent {
    let v3 = variant.starts_with("vllm_v3");
    EngineEvent::Stored {
        hashes: keys.iter().map(|&k| h(variant, k)).collect(),
        parent: parent.map(|p| h(variant, p)),
        token_ids: toks,
        block_size: 16,
        lora: None,
        medium: medium(variant),
        extra_keys: Vec::new(),
        group: v3.then_some(0),
    }
}

#[test]
fn stored_chains_decode_in_every_encoding() {
    for v in VARIANTS {
        let a = decode_batch(&fixture(v, "stored_a")).unwrap();
        let b = decode_batch(&fixture(v, "stored_b")).unwrap();
        assert_eq!(a.ts, TS, "{v}");
        let rank = match v {
            "vllm_v2" => Some(0),
            "vllm_v3" | "vllm_v3_array" => Some(1),
            _ => None,
        };
        assert_eq!(a.dp_rank, rank, "{v}");
        if v == "sglang" {
            // One event per page, each chained to the page before.
            assert_eq!(
                a.events,
                vec![
                    stored(v, &[1], None, tokens(1000, 16)),
                    stored(v, &[2], Some(1), tokens(1016, 16)),
                ]
            );
            assert_eq!(
                b.events,
                vec![
                    stored(v, &[3], Some(2), tokens(1032, 16)),
                    stored(v, &[4], Some(3), tokens(1048, 16)),
                ]
            );
        } else {
            assert_eq!(
                a.events,
                vec![stored(v, &[1, 2], None, tokens(1000, 32))],
                "{v}"
            );
            assert_eq!(
                b.events,
                vec![stored(v, &[3, 4], Some(2), tokens(1032, 32))],
                "{v}"
            );
        }
    }
}

#[test]
fn removed_and_cleared_decode_in_every_encoding() {
    for v in VARIANTS {
        let r = decode_batch(&fixture(v, "removed_b4")).unwrap();
        let group = v.starts_with("vllm_v3").then_some(0);
        assert_eq!(
            r.events,
            vec![EngineEvent::Removed {
                hashes: vec![h(v, 4)],
                medium: medium(v),
                group,
            }],
            "{v}"
        );
        let c = decode_batch(&fixture(v, "cleared")).unwrap();
        assert_eq!(c.events, vec![EngineEvent::Cleared], "{v}");
    }
}

#[test]
fn newer_fields_are_read_lora_extra_keys_group_and_medium() {
    for v in ["vllm_v3", "vllm_v3_array"] {
        let s = decode_batch(&fixture(v, "skips")).unwrap();
        assert_eq!(s.events.len(), 6, "{v}");
        let EngineEvent::Stored { lora, .. } = &s.events[0] else {
            panic!("{v}: {:?}", s.events[0]);
        };
        assert_eq!(
            lora,
            &Some(EngineLora {
                id: Some(7),
                name: Some("adapter-7".into())
            })
        );
        assert!(matches!(
            s.events[1],
            EngineEvent::Stored { block_size: 32, .. }
        ));
        assert!(
            matches!(&s.events[2], EngineEvent::Stored { parent: Some(p), .. } if *p == h(v, 99))
        );
        assert!(matches!(
            &s.events[3],
            EngineEvent::Stored { extra_keys, .. }
                if extra_keys == &vec![vec![ExtraKey::Text("salt-x".into())]]
        ));
        assert!(matches!(
            s.events[4],
            EngineEvent::Stored { group: Some(1), .. }
        ));
        assert_eq!(
            s.events[5],
            EngineEvent::Removed {
                hashes: vec![h(v, 1)],
                medium: Some("CPU".into()),
                group: None
            }
        );
        // A list of null extra keys is no extra key.
        let a = decode_batch(&fixture(v, "stored_a")).unwrap();
        assert!(matches!(
            &a.events[0],
            EngineEvent::Stored { extra_keys, .. } if extra_keys.iter().all(Vec::is_empty)
        ));
    }
    let sg = decode_batch(&fixture("sglang", "skips")).unwrap();
    let last = sg.events.last().unwrap();
    assert!(
        matches!(last, EngineEvent::Stored { block_size: 5, token_ids, .. } if token_ids.len() == 5)
    );
}

fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).unwrap();
    out
}

fn s(x: &str) -> Value {
    Value::from(x)
}

fn batch(events: Vec<Value>) -> Value {
    Value::Array(vec![Value::F64(1.0), Value::Array(events)])
}

fn stored_array(token: Value, hash: Value) -> Value {
    Value::Array(vec![
        s("BlockStored"),
        Value::Array(vec![hash]),
        Value::Nil,
        Value::Array(vec![token]),
        Value::from(1),
        Value::Nil,
    ])
}

#[test]
fn map_fields_are_found_by_name_in_any_order() {
    let event = Value::Map(vec![
        (s("token_ids"), Value::Array(vec![Value::from(5)])),
        (s("block_size"), Value::from(1)),
        (s("future_field"), Value::Array(vec![])),
        (s("block_hashes"), Value::Array(vec![Value::from(-3)])),
        (s("type"), s("BlockStored")),
        (s("parent_block_hash"), Value::Nil),
    ]);
    let payload = Value::Map(vec![
        (s("events"), Value::Array(vec![event])),
        (s("ts"), Value::from(2)),
    ]);
    let b = decode_batch(&encode(&payload)).unwrap();
    assert_eq!(b.ts, 2.0);
    assert_eq!(b.dp_rank, None);
    assert_eq!(
        b.events,
        vec![EngineEvent::Stored {
            hashes: vec![EngineHash::Int(-3)],
            parent: None,
            token_ids: vec![5],
            block_size: 1,
            lora: None,
            medium: None,
            extra_keys: Vec::new(),
            group: None,
        }]
    );
}

#[test]
fn malformed_payloads_are_typed_errors() {
    let err = |bytes: &[u8]| decode_batch(bytes).unwrap_err();
    // 0xc1 (never used) reads as nil in rmpv: not a batch.
    assert!(matches!(err(&[0xc1]), WireError::Shape { .. }));
    // A string whose declared length runs past the end.
    assert!(matches!(err(&[0xd9, 0x05, b'a']), WireError::Msgpack(_)));
    assert!(matches!(err(&[]), WireError::Msgpack(_)));
    let mut trailing = encode(&batch(vec![]));
    trailing.push(0);
    assert!(matches!(err(&trailing), WireError::TrailingBytes(1)));
    assert!(matches!(
        err(&encode(&Value::from(3))),
        WireError::Shape { .. }
    ));
    let no_events = Value::Array(vec![Value::F64(1.0)]);
    assert!(matches!(
        err(&encode(&no_events)),
        WireError::Missing("batch.events")
    ));
    let bad_ts = Value::Array(vec![s("now"), Value::Array(vec![])]);
    assert!(matches!(
        err(&encode(&bad_ts)),
        WireError::Shape {
            what: "batch.ts",
            ..
        }
    ));
    let untagged = batch(vec![Value::Array(vec![])]);
    assert!(matches!(
        err(&encode(&untagged)),
        WireError::Missing("event type")
    ));
    let negative_token = batch(vec![stored_array(Value::from(-1), Value::from(1))]);
    assert!(matches!(err(&encode(&negative_token)), WireError::Range(_)));
    let huge_token = batch(vec![stored_array(Value::from(1u64 << 32), Value::from(1))]);
    assert!(matches!(err(&encode(&huge_token)), WireError::Range(_)));
    let text_hash = batch(vec![stored_array(Value::from(1), s("abc"))]);
    assert!(matches!(err(&encode(&text_hash)), WireError::Shape { .. }));
    let short = batch(vec![Value::Array(vec![
        s("BlockStored"),
        Value::Array(vec![]),
    ])]);
    assert!(matches!(
        err(&encode(&short)),
        WireError::Missing("BlockStored.token_ids")
    ));
    let mut deep = Value::Nil;
    for _ in 0..64 {
        deep = Value::Array(vec![deep]);
    }
    assert!(matches!(err(&encode(&deep)), WireError::Msgpack(_)));
    // Truncated input never panics.
    let full = fixture("vllm_v3", "stored_a");
    for cut in 0..full.len() {
        assert!(decode_batch(&full[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn an_unknown_event_type_is_kept_as_unknown() {
    let payload = batch(vec![
        Value::Array(vec![s("BlocksMoved"), Value::from(1)]),
        Value::Array(vec![s("AllBlocksCleared")]),
    ]);
    let b = decode_batch(&encode(&payload)).unwrap();
    assert_eq!(
        b.events,
        vec![
            EngineEvent::Unknown {
                tag: "BlocksMoved".into()
            },
            EngineEvent::Cleared
        ]
    );
}
