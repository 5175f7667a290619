//! Property test: the scanner-based reader against the serde model it replaced (the
//! replica's way of reading a request), over generated request bodies and broken variants
//! of them.

use super::reference::{positional, reference};
use super::*;
use crate::body::scan::gen::{mutate, number, string, value, ws, Rng};
use std::borrow::Cow;

/// Top-level keys: every known one (plain and escaped), near misses, and others.
#[rustfmt::skip]
const TOP_KEYS: &[&str] = &[
    "model", "messages", "prompt", "stream", "max_tokens", "max_completion_tokens", "n",
    "model", "messages", "prompt", "max_tokens", "cache_salt", r"mod\u0065l",
    r"m\u0065ssages", r"\u006e", r"max\u005ftokens", "Model", "model ", "temperature",
    "tools", "user", "stop", "", "priority", "kv_transfer_params", "base_url",
    r"nv\u0065xt",
];
/// Optional keys of a well-formed body, each used at most once.
const CLEAN_KEYS: &[&str] = &[
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "temperature",
    "user",
    r"str\u0065am",
    "prompt",
];
const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "role",
    "content",
    "name",
    r"r\u006fle",
    "tool_calls",
];
const PART_KEYS: &[&str] = &["type", "text", "text", r"t\u0065xt", "image_url"];
const ROLES: &[&str] = &["system", "user", "assistant", "tool"];
const COUNTS: &[&str] = &[
    "0",
    "1",
    "2",
    "16",
    "17",
    "1000",
    "4294967295",
    "4294967296",
    "-1",
    "-0",
    "1.0",
    "1e2",
    "18446744073709551616",
    "null",
];
const CLEAN_COUNTS: &[&str] = &["1", "2", "16", "256", "null"];
/// Message texts: plain, escaped (unescaped into an owned string), and long ones on both
/// sides of the scanner's `memchr` switch.
const TEXTS: &[&str] = &[
    "hello",
    "You are a helpful assistant.",
    "",
    r"line\none",
    r"caf\u00e9 \ud83d\ude00 ok",
    "Größe: 3 × 4",
    LONG_PLAIN,
    LONG_ESCAPED,
    LONG_UTF8,
];
const LONG_PLAIN: &str = "The quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog again and again.";
const LONG_ESCAPED: &str = r#"The quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog\n\tand then \u00e9 \"quotes\"."#;
const LONG_UTF8: &str = "The quick brown fox jumps over the lazy dog; the quick brown fox jumps over the lazy dog — 日本語のテキストです.";

/// A member writer: the generator's state and the output.
struct Gen {
    r: Rng,
    /// Anything goes (wrong types, duplicates, odd keys) rather than a well-formed body.
    wild: bool,
}

impl Gen {
    /// An object of `n` members written by `member` (with the member's index).
    fn object_of(
        &mut self,
        out: &mut Vec<u8>,
        n: usize,
        mut member: impl FnMut(&mut Self, &mut Vec<u8>, usize),
    ) {
        self.list(out, b"{}", n, |g, out, i| member(g, out, i));
    }

    /// An array of `n` elements written by `element`.
    fn array_of(
        &mut self,
        out: &mut Vec<u8>,
        n: usize,
        mut element: impl FnMut(&mut Self, &mut Vec<u8>),
    ) {
        self.list(out, b"[]", n, |g, out, _| element(g, out));
    }

    fn list(
        &mut self,
        out: &mut Vec<u8>,
        brackets: &[u8; 2],
        n: usize,
        mut item: impl FnMut(&mut Self, &mut Vec<u8>, usize),
    ) {
        out.push(brackets[0]);
        for i in 0..n {
            if i > 0 {
                out.push(b',');
            }
            ws(&mut self.r, out);
            item(self, out, i);
            ws(&mut self.r, out);
        }
        out.push(brackets[1]);
    }

    /// A value of no particular shape.
    fn any(&mut self, out: &mut Vec<u8>) {
        value(&mut self.r, out, 2);
    }

    /// Now and then (in wild bodies) a value of no particular shape instead of `write`.
    fn or_any(
        &mut self,
        out: &mut Vec<u8>,
        one_in: usize,
        write: impl FnOnce(&mut Self, &mut Vec<u8>),
    ) {
        if self.wild && self.r.one_in(one_in) {
            self.any(out);
        } else {
            write(self, out);
        }
    }

    /// A string: one of `words`, or (in wild bodies) any generated string.
    fn text(&mut self, out: &mut Vec<u8>, words: &[&str]) {
        if self.wild && self.r.one_in(3) {
            string(&mut self.r, out);
        } else {
            out.extend_from_slice(format!("\"{}\"", self.r.pick(words)).as_bytes());
        }
    }

    fn part(&mut self, out: &mut Vec<u8>) {
        self.or_any(out, 10, |g, out| {
            let n = g.r.below(3) + 1;
            g.object_of(out, n, |g, out, i| {
                let k = match i {
                    0 if !g.wild => "type",
                    1 if !g.wild => "text",
                    _ => *g.r.pick(PART_KEYS),
                };
                key(out, k);
                match k {
                    "type" => out.extend_from_slice(b"\"text\""),
                    "image_url" => g.any(out),
                    _ => g.or_any(out, 6, |g, out| g.text(out, TEXTS)),
                }
            });
        });
    }

    fn content(&mut self, out: &mut Vec<u8>) {
        self.or_any(out, 8, |g, out| match g.r.below(10) {
            0 => out.extend_from_slice(b"null"),
            1 | 2 => {
                let n = g.r.below(4);
                g.array_of(out, n, Self::part);
            }
            _ => g.text(out, TEXTS),
        });
    }

    fn message(&mut self, out: &mut Vec<u8>) {
        self.or_any(out, 25, |g, out| {
            let n = if g.wild {
                g.r.below(4)
            } else {
                2 + usize::from(g.r.one_in(4))
            };
            g.object_of(out, n, |g, out, i| {
                let k = match i {
                    0 if !g.wild || !g.r.one_in(8) => "role",
                    1 if !g.wild || !g.r.one_in(8) => "content",
                    _ if !g.wild => "name",
                    _ => *g.r.pick(MESSAGE_KEYS),
                };
                key(out, k);
                match k {
                    "role" | r"r\u006fle" => g.or_any(out, 10, |g, out| g.text(out, ROLES)),
                    "content" => g.content(out),
                    _ => g.any(out),
                }
            });
        });
    }

    fn prompt(&mut self, out: &mut Vec<u8>) {
        match self.r.below(7) {
            0..=2 => self.text(out, TEXTS),
            3 | 4 => {
                let n = self.r.below(5);
                self.array_of(out, n, |g, out| {
                    let id = if g.r.one_in(8) {
                        g.r.pick(COUNTS).to_string()
                    } else {
                        g.r.below(50_000).to_string()
                    };
                    out.extend_from_slice(id.as_bytes());
                });
            }
            5 => {
                let n = self.r.below(3);
                self.array_of(out, n, |g, out| g.text(out, &["a", "b"]));
            }
            _ => self.any(out),
        }
    }

    fn count(&mut self, out: &mut Vec<u8>) {
        if self.wild && self.r.one_in(5) {
            number(&mut self.r, out);
        } else {
            let counts = if self.wild { COUNTS } else { CLEAN_COUNTS };
            out.extend_from_slice(self.r.pick(counts).as_bytes());
        }
    }

    /// A request body: half well-formed (known fields once, right types, escapes and long
    /// texts), half wild.
    fn body(&mut self, chat: bool) -> Vec<u8> {
        self.wild = self.r.one_in(2);
        let mut out = Vec::new();
        ws(&mut self.r, &mut out);
        if self.wild && self.r.one_in(15) {
            self.any(&mut out);
            return out;
        }
        let n = 2 + self.r.below(4);
        let mut unused: Vec<&str> = CLEAN_KEYS.to_vec();
        self.object_of(&mut out, n, |g, out, i| {
            let k = match i {
                0 if !g.wild || !g.r.one_in(6) => "model",
                1 if !g.wild || !g.r.one_in(6) => {
                    if chat {
                        "messages"
                    } else {
                        "prompt"
                    }
                }
                _ if g.wild => *g.r.pick(TOP_KEYS),
                _ => unused.remove(g.r.below(unused.len())),
            };
            key(out, k);
            match k {
                "model" | r"mod\u0065l" => g.or_any(out, 10, |g, out| {
                    g.text(out, &["m", "smollm2", "", r"sm\u006fllm2"])
                }),
                "messages" | r"m\u0065ssages" => g.or_any(out, 10, |g, out| {
                    let n = g.r.below(4) + usize::from(!g.wild || !g.r.one_in(8));
                    g.array_of(out, n, Self::message);
                }),
                "prompt" => g.prompt(out),
                "stream" | r"str\u0065am" => {
                    let options: &[&str] = if g.wild {
                        &["true", "false", "null", "1", "\"yes\""]
                    } else {
                        &["true", "false", "null"]
                    };
                    out.extend_from_slice(g.r.pick(options).as_bytes());
                }
                "cache_salt" | "priority" | "kv_transfer_params" | "base_url" => {
                    out.extend_from_slice(g.r.pick(&["null", "\"evil\"", "{}", "0"]).as_bytes())
                }
                _ if k.contains("tokens") || k == "n" || k == r"\u006e" => g.count(out),
                _ => value(&mut g.r, out, 1),
            }
        });
        ws(&mut self.r, &mut out);
        out
    }
}

fn key(out: &mut Vec<u8>, k: &str) {
    out.extend_from_slice(format!("\"{k}\":").as_bytes());
}

/// How often each outcome came up, to show that the generator reaches them all.
#[derive(Debug, Default)]
struct Tally {
    ok: usize,
    not_json: usize,
    invalid_body: usize,
    bad_request: usize,
    positional: usize,
    owned_text: usize,
    long_text: usize,
}

fn check(endpoint: Endpoint, doc: &[u8], tally: &mut Tally) {
    let got = parse(endpoint, doc);
    // serde's derive does not validate what it skips (UTF-8, surrogate pairs, number
    // range inside unknown fields); this reader refuses any body that is not JSON.
    if serde_json::from_slice::<serde_json::Value>(doc).is_err() {
        tally.not_json += 1;
        assert!(
            matches!(got, Err(GatewayError::InvalidBody(_))),
            "{got:?}: {}",
            doc.escape_ascii()
        );
        return;
    }
    if positional(endpoint, doc) {
        tally.positional += 1;
        assert!(got.is_err(), "{}", doc.escape_ascii());
        return;
    }
    let want = reference(endpoint, doc);
    match (&got, &want) {
        (Ok(g), Ok(w)) => {
            assert_eq!(g, w, "{}", doc.escape_ascii());
            tally.ok += 1;
            if let Prompt::Chat(m) = &g.prompt {
                tally.owned_text +=
                    usize::from(m.iter().any(|m| matches!(m.content, Cow::Owned(_))));
                tally.long_text += usize::from(m.iter().any(|m| m.content.len() > 64));
            }
        }
        (Err(g), Err(w)) => {
            assert_eq!(
                std::mem::discriminant(g),
                std::mem::discriminant(w),
                "{g:?} vs {w:?}: {}",
                doc.escape_ascii()
            );
            match g {
                GatewayError::InvalidBody(_) => tally.invalid_body += 1,
                _ => tally.bad_request += 1,
            }
        }
        _ => panic!("reader {got:?}, serde {want:?}: {}", doc.escape_ascii()),
    }
}

#[test]
fn reader_matches_serde_on_generated_bodies() {
    const BODIES: usize = 6_000;
    let mut g = Gen {
        r: Rng::new(0xD1B5_4A32_D192_ED03),
        wild: false,
    };
    for endpoint in [Endpoint::Chat, Endpoint::Completions] {
        let (mut whole, mut broken) = (Tally::default(), Tally::default());
        for _ in 0..BODIES {
            let doc = g.body(endpoint == Endpoint::Chat);
            check(endpoint, &doc, &mut whole);
            for _ in 0..2 {
                let mut mutant = doc.clone();
                mutate(&mut g.r, &mut mutant);
                check(endpoint, &mutant, &mut broken);
            }
        }
        eprintln!("{endpoint:?} generated: {whole:?}\nmutated: {broken:?}");
        assert!(whole.ok > BODIES / 4, "{whole:?}");
        assert!(whole.invalid_body > BODIES / 10, "{whole:?}");
        assert!(whole.bad_request > BODIES / 100, "{whole:?}");
        assert!(whole.not_json > BODIES / 50, "{whole:?}");
        assert!(broken.ok > BODIES / 50, "{broken:?}");
        assert!(broken.not_json > BODIES, "{broken:?}");
        if endpoint == Endpoint::Chat {
            assert!(whole.positional > 0, "{whole:?}");
            assert!(whole.owned_text > BODIES / 20, "{whole:?}");
            assert!(whole.long_text > BODIES / 20, "{whole:?}");
        }
    }
}

#[test]
fn long_strings_are_read_across_the_memchr_switch() {
    // Plain, with an escape, with UTF-8, and with a raw control character, each at offsets
    // on both sides of the 64-byte switch and of a 256-byte block.
    for at in [0, 1, 63, 64, 65, 70, 255, 256, 257, 300] {
        let pad = "x".repeat(at);
        for (inner, want) in [
            (format!("{pad}tail"), Some(format!("{pad}tail"))),
            (format!("{pad}\\n\\u00e9"), Some(format!("{pad}\n\u{e9}"))),
            (format!("{pad}é"), Some(format!("{pad}é"))),
            (format!("{pad}\u{1}"), None),
        ] {
            let pad2 = "y".repeat(200);
            let body = format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"{inner}{pad2}"}}]}}"#
            );
            let got = parse(Endpoint::Chat, body.as_bytes())
                .ok()
                .map(|p| match p.prompt {
                    Prompt::Chat(m) => m[0].content.to_string(),
                    _ => unreachable!(),
                });
            assert_eq!(
                got,
                want.map(|w| format!("{w}{pad2}")),
                "at {at}: {inner:?}"
            );
        }
        // In a skipped field, where no text is made: invalid UTF-8 (a stray continuation
        // byte, a cut sequence) and a control byte are still refused; valid UTF-8 is not.
        for (bad, refused) in [
            (&b"\x80"[..], true),
            (b"\xe6\x97", true),
            (b"\x1f", true),
            ("é日".as_bytes(), false),
        ] {
            let mut body = br#"{"model":"m","user":""#.to_vec();
            body.extend_from_slice(pad.as_bytes());
            body.extend_from_slice(bad);
            body.extend_from_slice("y".repeat(300).as_bytes());
            body.extend_from_slice(br#"","messages":[{"role":"user","content":"x"}]}"#);
            let got = parse(Endpoint::Chat, &body);
            assert_eq!(got.is_err(), refused, "at {at}: {}", body.escape_ascii());
        }
    }
}
