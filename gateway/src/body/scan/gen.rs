//! Generated JSON documents for the property tests of the body readers (the request
//! reader, the response envelope): valid documents built from fields the gateway reads,
//! plus broken variants of them.

use warmpath_core::rng::{Draw, SeedableRng, Xoshiro256StarStar};

/// The workspace's seeded generator (`warmpath_core::rng`) with the draws the generators
/// below use.
pub(crate) struct Rng(Xoshiro256StarStar);

impl Rng {
    /// A generator seeded with `seed`: the same documents every run.
    pub(crate) fn new(seed: u64) -> Self {
        Self(Xoshiro256StarStar::seed_from_u64(seed))
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    pub(crate) fn digits(&mut self, out: &mut Vec<u8>, len: usize) {
        (0..len).for_each(|_| out.push(b'0' + self.below(10) as u8));
    }
}

/// Keys: the ones the scanner looks for (plain and escaped), near misses, and others.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    "usage", "error", "choices", "prompt_tokens", "completion_tokens",
    "prompt_tokens_details", "cached_tokens", "usage", "choices", "prompt_tokens",
    r"us\u0061ge", r"\u0075sage", r"prompt\u005Ftokens", r"cached_tok\u0065ns",
    r"choice\u0073", r"err\u006fr", r"completion\u005ftokens", r"usage\n", "usage ",
    "Usage", r"us\u00e1ge", "", r"\ud83d\ude00", "é", "id", r"\/usage", "usag",
];

/// Keys inside `usage`, and inside `usage.prompt_tokens_details`.
#[rustfmt::skip]
const USAGE_KEYS: &[&str] = &[
    "prompt_tokens", "completion_tokens", "prompt_tokens_details", "total_tokens",
    r"prompt\u005Ftokens", "prompt_tokens_details", r"prompt_tokens_det\u0061ils",
];
const DETAIL_KEYS: &[&str] = &["cached_tokens", r"cached_tok\u0065ns", "audio_tokens"];

/// Numbers of every shape, including ones at the edges of `u64` and `f64`.
#[rustfmt::skip]
const NUMBERS: &[&str] = &[
    "0", "-0", "1", "-1", "10.0", "1e2", "1.5", "0.0", "-0.0", "1E+2", "1e-2", "2.5e-5",
    "18446744073709551615", "18446744073709551616", "-9223372036854775808",
    "9223372036854775808", "123456789012345678901234", "1e308", "1e-400", "0e99999",
    "0e99999999999", "1e-99999999999", "1e0000000000005", "1.7976931348623157e308",
    "17976931348623157e292", "0.00017976931348623157e312", "0.0000012e5", "0.001e311",
    "0.01e309", "-0.000e400", "1844674407370955161.6e1",
];

/// Numbers that serde_json refuses as out of range (or that sit on the edge).
#[rustfmt::skip]
const HUGE: &[&str] = &[
    "1e309", "-1e309", "1e400", "1e99999999999", "1.7976931348623158e308",
    "1.7976931348623159e308", "0.00017976931348623159e312", "0.001e312",
];

/// String pieces: plain text (short and long), every escape, surrogate pairs, UTF-8.
#[rustfmt::skip]
const PIECES: &[&str] = &[
    "a", "Z", " ", "usage", r"\n", r"\t", r#"\""#, r"\\", r"\/", r"\b", r"\f", r"\r",
    r"\u0041", r"\u00e9", r"\uFFFF", r"\ud83d\ude00", r"\uD83D\uDE00", "é", "😀", "中",
    "\u{7f}", "The quick brown fox jumps over the lazy dog", "chatcmpl-0123456789abcdef",
    "Größe: 3 × 4 — ok", "日本語のテキストです",
];

/// String pieces that serde_json refuses: lone surrogates.
const LONE: &[&str] = &[r"\ud83d", r"\ude00", r"\ud83d\ud83d", r"\ud83d\n"];

/// Bytes that a mutation likes to put somewhere.
const NOISE: &[u8] =
    b"{}[]\",:\\ 0123456789.eE-+tfnu\x00\x1f\x7f\x80\xbf\xc3\xed\xf0\xff\t\n\r\x0c";

/// JSON whitespace, usually none.
pub(crate) fn ws(r: &mut Rng, out: &mut Vec<u8>) {
    while r.one_in(4) {
        out.push(*r.pick(b" \t\n\r"));
    }
}

/// Any value; containers only while `depth` allows.
pub(crate) fn value(r: &mut Rng, out: &mut Vec<u8>, depth: usize) {
    match r.below(if depth >= 5 { 4 } else { 7 }) {
        0 => number(r, out),
        1 => string(r, out),
        2 => out.extend_from_slice(r.pick(&["true", "false", "null"]).as_bytes()),
        3 => out.extend_from_slice(r.below(1000).to_string().as_bytes()),
        4 | 5 => object(r, out, depth + 1, KEYS),
        _ => array(r, out, depth + 1),
    }
}

/// A number: a listed edge case, or random sign, digits, fraction and exponent.
pub(crate) fn number(r: &mut Rng, out: &mut Vec<u8>) {
    if r.one_in(50) {
        return out.extend_from_slice(r.pick(HUGE).as_bytes());
    }
    if r.one_in(2) {
        return out.extend_from_slice(r.pick(NUMBERS).as_bytes());
    }
    if r.one_in(4) {
        out.push(b'-');
    }
    match r.below(10) {
        0 => out.push(b'0'),
        1 => {
            out.push(b'1' + r.below(9) as u8);
            let len = 300 + r.below(12);
            r.digits(out, len);
        }
        _ => {
            out.push(b'1' + r.below(9) as u8);
            let len = r.below(22);
            r.digits(out, len);
        }
    }
    if r.one_in(3) {
        out.push(b'.');
        let len = 1 + r.below(20);
        r.digits(out, len);
    }
    if r.one_in(3) {
        out.push(*r.pick(b"eE"));
        out.extend_from_slice(r.pick(&["", "+", "-"]).as_bytes());
        let len = 1 + r.below(4);
        r.digits(out, len);
    }
}

/// A string of random pieces (now and then many), now and then a random `\u` escape or a lone surrogate.
pub(crate) fn string(r: &mut Rng, out: &mut Vec<u8>) {
    out.push(b'"');
    // Now and then a long string (past the scanner's 64-byte switch to `memchr`).
    let pieces = if r.one_in(12) {
        20 + r.below(60)
    } else {
        r.below(6)
    };
    for _ in 0..pieces {
        if r.one_in(6) {
            out.extend_from_slice(format!("\\u{:04x}", r.below(0x10000)).as_bytes());
        } else if r.one_in(100) {
            out.extend_from_slice(r.pick(LONE).as_bytes());
        } else {
            out.extend_from_slice(r.pick(PIECES).as_bytes());
        }
    }
    out.push(b'"');
}

/// An object with keys from `keys` (now and then a random string).
fn object(r: &mut Rng, out: &mut Vec<u8>, depth: usize, keys: &[&str]) {
    out.push(b'{');
    for i in 0..r.below(5) {
        if i > 0 {
            ws(r, out);
            out.push(b',');
        }
        ws(r, out);
        let key = *r.pick(keys);
        if r.one_in(8) {
            string(r, out);
        } else {
            out.extend_from_slice(format!("\"{key}\"").as_bytes());
        }
        ws(r, out);
        out.push(b':');
        ws(r, out);
        field_value(r, out, depth, key);
    }
    ws(r, out);
    out.push(b'}');
}

/// A value for `key`, mostly of the shape the scanner looks for under that key.
fn field_value(r: &mut Rng, out: &mut Vec<u8>, depth: usize, key: &str) {
    let unescaped: String = serde_json::from_str(&format!("\"{key}\"")).unwrap_or_default();
    let inner: &[&str] = match unescaped.as_str() {
        "usage" => USAGE_KEYS,
        "prompt_tokens_details" => DETAIL_KEYS,
        _ => &[],
    };
    if !inner.is_empty() && !r.one_in(3) {
        object(r, out, depth + 1, inner);
    } else if unescaped.ends_with("_tokens") && r.one_in(2) {
        out.extend_from_slice(r.below(100_000).to_string().as_bytes());
    } else if unescaped == "choices" && r.one_in(2) {
        array(r, out, depth + 1);
    } else {
        value(r, out, depth);
    }
}

/// An array of random values.
fn array(r: &mut Rng, out: &mut Vec<u8>, depth: usize) {
    out.push(b'[');
    for i in 0..r.below(4) {
        if i > 0 {
            out.push(b',');
        }
        ws(r, out);
        value(r, out, depth);
        ws(r, out);
    }
    out.push(b']');
}

/// One to three random edits: a byte changed, dropped or added, a cut, a copied span.
pub(crate) fn mutate(r: &mut Rng, doc: &mut Vec<u8>) {
    for _ in 0..1 + r.below(3) {
        let at = r.below(doc.len() + 1);
        let byte = if r.one_in(4) {
            r.below(256) as u8
        } else {
            *r.pick(NOISE)
        };
        match r.below(5) {
            0 if at < doc.len() => doc[at] = byte,
            1 if at < doc.len() => drop(doc.remove(at)),
            2 => doc.insert(at, byte),
            3 => doc.truncate(at),
            _ => {
                let from = r.below(doc.len() + 1);
                let span = doc[from..(from + r.below(12)).min(doc.len())].to_vec();
                doc.splice(at..at, span);
            }
        }
    }
}

/// A document: mostly an object with the envelope's keys, sometimes any value.
pub(crate) fn document(r: &mut Rng) -> Vec<u8> {
    let mut doc = Vec::new();
    ws(r, &mut doc);
    if r.one_in(8) {
        value(r, &mut doc, 0);
    } else {
        object(r, &mut doc, 0, KEYS);
    }
    ws(r, &mut doc);
    doc
}
