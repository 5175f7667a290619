//! The fuzz targets: a name and a function of arbitrary bytes that panics when an
//! invariant breaks.

use std::sync::OnceLock;
use warmpath_text::ChatTokenizer;

/// One target.
pub(crate) struct Target {
    /// Name (and its folder under `fuzz/corpus/`).
    pub(crate) name: &'static str,
    /// Runs one input.
    pub(crate) run: fn(&[u8]),
    /// Tokens the mutator splices in.
    pub(crate) dictionary: &'static [&'static [u8]],
}

const JSON: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\\u",
    b"\\ud800",
    b":",
    b",",
    b"null",
    b"true",
    b"-1e999",
    b"0.5",
    b"\"messages\"",
    b"\"prompt\"",
    b"\"model\"",
    b"\"role\"",
    b"\"content\"",
    b"\"max_tokens\"",
    b"\"stream\"",
    b"\"usage\"",
    b"\"error\"",
    b"\"completion_tokens\"",
    b"\"prompt_tokens\"",
    b"\"choices\"",
    b"data: ",
    b"[DONE]",
    b"\n\n",
    b"\r\n",
];

const HTTP: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r\n\r\n",
    b"POST / HTTP/1.1\r\n",
    b"GET / HTTP/1.0\r\n",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked",
    b"Expect: 100-continue",
    b": ",
    b" ",
    b"\t",
    b"18446744073709551616",
    b"0",
];

const YAML: &[&[u8]] = &[
    b"\n",
    b": ",
    b"- ",
    b"{",
    b"}",
    b"[",
    b"]",
    b"listen",
    b"limits",
    b"max_body_bytes",
    b"max_headers",
    b"tenants",
    b"replicas",
    b"policy",
    b"retry",
    b"budget_ratio",
    b"!!",
    b"&a",
    b"*a",
    b"<<: ",
    b"~",
    b"1e400",
    b"-1",
    b"'",
    b"\"",
];

const KV: &[&[u8]] = &[
    b"WPKV",
    b"\x01\x00",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x80",
    b"\x01\x00\x00\x00",
    b"\x02\x00\x00\x00",
    b"\x00\x00\x00\x00\x00\x00\x00\x00",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
];

const TEXT: &[&[u8]] = &[
    b"<|im_start|>",
    b"<|im_end|>",
    b"<|endoftext|>",
    b"\xc3\xa9",
    b"\xf0\x9f\x98\x80",
    b" ",
    b"\n",
    b"'s",
    b"123",
];

/// Every target.
pub(crate) const ALL: &[Target] = &[
    Target {
        name: "request_body",
        run: gateway::fuzzing::request_body,
        dictionary: JSON,
    },
    Target {
        name: "response_body",
        run: gateway::fuzzing::response_body,
        dictionary: JSON,
    },
    Target {
        name: "sse_lines",
        run: gateway::fuzzing::sse_lines,
        dictionary: JSON,
    },
    Target {
        name: "upstream_header",
        run: gateway::fuzzing::upstream_header,
        dictionary: HTTP,
    },
    Target {
        name: "request_head",
        run: gateway::fuzzing::request_head,
        dictionary: HTTP,
    },
    Target {
        name: "config",
        run: gateway::fuzzing::config,
        dictionary: YAML,
    },
    Target {
        name: "kv_record",
        run: crate::kv::record,
        dictionary: KV,
    },
    Target {
        name: "kv_frames",
        run: crate::kv::frames,
        dictionary: KV,
    },
    Target {
        name: "replica_request",
        run: replica::fuzzing::request,
        dictionary: JSON,
    },
    Target {
        name: "tokenizer",
        run: tokenizer,
        dictionary: TEXT,
    },
];

/// The tokenizer (`warmpath-text`, the ChatML byte-level BPE the mock replicas use):
/// encoding never fails on valid UTF-8, and plain text decodes back to itself.
fn tokenizer(data: &[u8]) {
    static TOK: OnceLock<ChatTokenizer> = OnceLock::new();
    let tok = TOK.get_or_init(|| {
        ChatTokenizer::from_spec(&warmpath_text::bytelevel::chatml_bpe_spec())
            .expect("the fixture tokenizer builds")
    });
    let text = String::from_utf8_lossy(data);
    let ids = tok.encode(&text, false).expect("encode valid UTF-8");
    if !text.contains("<|") {
        assert_eq!(tok.decode(&ids).expect("decode"), text, "round trip");
    }
    let mut dec = tok.stream_decoder();
    let mut streamed = String::new();
    for &id in &ids {
        streamed.extend(dec.push(id));
    }
    streamed.extend(dec.finish());
    let _ = streamed;
}
