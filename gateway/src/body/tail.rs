//! Reading a JSON object from its end: where the value of its last top-level member with a
//! given name lies, found by walking the members backwards, without reading the ones in
//! front of it.
//!
//! # Why
//! A non-streaming completion ends with its `usage` (or a few short members after it), so
//! the walk touches a hundred bytes where a forward scan reads the whole body. The answer is
//! the one `serde_json::Value` lookups give for every valid document: the last of duplicate
//! keys is the one that counts, and the walk meets it first.
//!
//! # Why the walk is sound on valid JSON
//! Outside strings JSON has no backslash, and inside a string every `"` is escaped, so a
//! quote preceded by an odd run of backslashes is inside a string and any other quote opens
//! or closes one. A string read backwards therefore ends at the first quote before its
//! closing one that is preceded by an even run (zero included). Arrays and objects are
//! skipped by counting brackets outside strings.
//!
//! # What it does not do
//! It validates nothing in front of the member it finds. A caller that must refuse invalid
//! documents scans forward instead; the gateway's usage reader accepts a usage object read
//! from a well-formed tail (see `crate::body::response`). Whatever the bytes, the walk ends
//! (every step moves the cursor towards the start) and never indexes out of bounds.

use super::scan::Key;
use std::ops::Range;

/// The value ranges (in `bytes`, whitespace trimmed) of the last members of the object in
/// `bytes[within]` whose keys unescape to `names[i]`: walks back from its closing brace (see
/// the module docs) and stops once every name is found. `None` when the walk cannot read
/// an object there: something other than an object, or bytes that are not JSON. For a
/// valid document, a name left `None` is not a member of the object.
pub(crate) fn last_members<const N: usize>(
    bytes: &[u8],
    within: Range<usize>,
    names: [&[u8]; N],
) -> Option<[Option<Range<usize>>; N]> {
    let offset = within.start;
    let bytes = bytes.get(within)?;
    let mut walk = Back {
        bytes,
        end: bytes.len(),
    };
    let mut found = walk.members(names)?;
    for range in found.iter_mut().flatten() {
        *range = range.start + offset..range.end + offset;
    }
    Some(found)
}

/// The bytes and a cursor: everything before `end` is still to be read.
struct Back<'a> {
    bytes: &'a [u8],
    end: usize,
}

impl<'a> Back<'a> {
    fn members<const N: usize>(&mut self, names: [&[u8]; N]) -> Option<[Option<Range<usize>>; N]> {
        let mut found = [const { None }; N];
        let mut left = N;
        self.whitespace();
        if !self.eat(b'}') {
            return None;
        }
        self.whitespace();
        if self.eat(b'{') {
            return self.at_start().then_some(found);
        }
        loop {
            let value_end = self.end;
            self.value()?;
            let value = self.end..value_end;
            self.whitespace();
            if !self.eat(b':') {
                return None;
            }
            self.whitespace();
            let key = self.string()?;
            if let Some(i) = names.iter().position(|name| key.is(name)) {
                if found[i].is_none() {
                    found[i] = Some(value);
                    left -= 1;
                    if left == 0 {
                        return Some(found);
                    }
                }
            }
            self.whitespace();
            if self.eat(b'{') {
                return self.at_start().then_some(found);
            }
            if !self.eat(b',') {
                return None;
            }
            self.whitespace();
        }
    }

    /// Past the opening brace: only whitespace may come before it.
    fn at_start(&mut self) -> bool {
        self.whitespace();
        self.end == 0
    }

    /// The byte just before the cursor.
    fn last(&self) -> Option<u8> {
        self.bytes.get(self.end.checked_sub(1)?).copied()
    }

    /// Steps over `b` if it is the byte before the cursor.
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.last() == Some(b);
        self.end -= usize::from(hit);
        hit
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.last() {
            self.end -= 1;
        }
    }

    /// Steps over the value that ends at the cursor.
    #[inline]
    fn value(&mut self) -> Option<()> {
        match self.last()? {
            b'"' => self.string().map(drop),
            b'}' | b']' => self.nested(),
            _ => {
                let scalar = self.bytes.get(..self.end)?;
                let len = scalar
                    .iter()
                    .rev()
                    .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
                    .count();
                (len > 0).then(|| self.end -= len)
            }
        }
    }

    /// Steps over the array or object whose closing bracket is just before the cursor.
    fn nested(&mut self) -> Option<()> {
        let mut depth = 0usize;
        let mut at = self.end;
        while let Some(i) = at.checked_sub(1) {
            match *self.bytes.get(i)? {
                b'"' => {
                    at = opening_quote(self.bytes, i)?.0;
                    continue;
                }
                b'}' | b']' => depth += 1,
                b'{' | b'[' => {
                    depth -= 1;
                    if depth == 0 {
                        self.end = i;
                        return Some(());
                    }
                }
                _ => {}
            }
            at = i;
        }
        None
    }

    /// Steps over the string whose closing quote is just before the cursor; returns what is
    /// between its quotes.
    fn string(&mut self) -> Option<Key<'a>> {
        let close = self.end.checked_sub(1)?;
        if self.bytes.get(close) != Some(&b'"') {
            return None;
        }
        let (open, escaped) = opening_quote(self.bytes, close)?;
        self.end = open;
        let raw = self.bytes.get(open + 1..close)?;
        Some(Key::new(raw, escaped))
    }
}

/// The opening quote of the string whose closing quote is at `close` (the first quote
/// before it that no odd run of backslashes escapes), and whether the string holds a
/// backslash.
#[inline]
fn opening_quote(bytes: &[u8], close: usize) -> Option<(usize, bool)> {
    let mut end = close;
    let mut escaped = false;
    loop {
        let at = last_quote_or_backslash(bytes.get(..end)?)?;
        if bytes.get(at) == Some(&b'"') && unescaped(bytes, at) {
            return Some((at, escaped));
        }
        escaped = true;
        end = at;
    }
}

/// After this many bytes of one string, [`last_quote_or_backslash`] hands over to `memchr`.
const SHORT_STRING: usize = 64;

/// The last `"` or `\` in `hay`, looking at eight bytes at a time from the end. The test is
/// exact per byte (`(v & 0x7f..) + 0x7f..` sets a byte's top bit unless it is zero, with
/// no carry between bytes), unlike the borrow trick forward scans use, whose false hits lie
/// above a true one: a backward search wants the highest hit.
fn last_quote_or_backslash(hay: &[u8]) -> Option<usize> {
    const LOWS: u64 = u64::MAX / 255 * 0x7f;
    const QUOTES: u64 = u64::MAX / 255 * b'"' as u64;
    const BACKSLASHES: u64 = u64::MAX / 255 * b'\\' as u64;
    let zero = |v: u64| !(((v & LOWS).wrapping_add(LOWS)) | v | LOWS);
    let mut end = hay.len();
    while end >= 8 {
        if hay.len() - end >= SHORT_STRING {
            return memchr::memrchr2(b'"', b'\\', hay.get(..end)?);
        }
        let Ok(chunk) = <[u8; 8]>::try_from(hay.get(end - 8..end)?) else {
            break;
        };
        let x = u64::from_le_bytes(chunk);
        let hits = zero(x ^ QUOTES) | zero(x ^ BACKSLASHES);
        if hits != 0 {
            return Some(end - 8 + (63 - hits.leading_zeros() as usize) / 8);
        }
        end -= 8;
    }
    hay.get(..end)?
        .iter()
        .rposition(|&b| b == b'"' || b == b'\\')
}

/// Whether the quote at `at` is preceded by an even run of backslashes (zero included).
#[inline]
fn unescaped(bytes: &[u8], at: usize) -> bool {
    let before = bytes.get(..at).unwrap_or_default();
    before.iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(doc: &str, name: &str) -> Option<String> {
        let [range] = last_members(doc.as_bytes(), 0..doc.len(), [name.as_bytes()])?;
        Some(doc[range?].to_string())
    }

    fn absent(doc: &str) -> bool {
        last_members(doc.as_bytes(), 0..doc.len(), [b"usage"]) == Some([None])
    }

    fn unknown(doc: &str) -> bool {
        last_members(doc.as_bytes(), 0..doc.len(), [b"usage"]).is_none()
    }

    #[test]
    fn finds_the_last_top_level_member() {
        let doc = r#"{"a":{"usage":1},"usage":{"p":[1,{"q":"}"}]},"z":"x\"y","n":-1.5e3}"#;
        assert_eq!(
            found(doc, "usage").as_deref(),
            Some(r#"{"p":[1,{"q":"}"}]}"#)
        );
        assert_eq!(found(doc, "z").as_deref(), Some(r#""x\"y""#));
        assert_eq!(found(doc, "n").as_deref(), Some("-1.5e3"));
        let dup = r#" { "usage" : 1 , "usage" : null } "#;
        assert_eq!(found(dup, "usage").as_deref(), Some("null"));
        assert_eq!(
            found(r#"{"us\u0061ge":true}"#, "usage").as_deref(),
            Some("true")
        );
        assert_eq!(
            found(r#"{"k":"a\\","usage":2}"#, "usage").as_deref(),
            Some("2")
        );
        let long = format!(
            r#"{{"usage":"{}\"{}","x":1}}"#,
            "a".repeat(100),
            "b".repeat(100)
        );
        assert_eq!(found(&long, "usage").map(|v| v.len()), Some(204));
    }

    #[test]
    fn the_eight_byte_search_finds_what_a_byte_loop_finds() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..200 {
            for _ in 0..20 {
                let hay: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Mostly plain bytes; now and then a quote, a backslash or a neighbour.
                        match x % 40 {
                            0 => b'"',
                            1 => b'\\',
                            2 => b'"' ^ 0x80,
                            3 => b'\\' + 1,
                            _ => (x >> 8) as u8 | 0x01,
                        }
                    })
                    .collect();
                let want = hay.iter().rposition(|&b| b == b'"' || b == b'\\');
                assert_eq!(
                    last_quote_or_backslash(&hay),
                    want,
                    "{}",
                    hay.escape_ascii()
                );
            }
        }
    }

    #[test]
    fn several_names_and_a_nested_range() {
        let doc = r#"{"u":{"a":1,"b":{"c":2},"a":3},"x":0}"#;
        let [u] = last_members(doc.as_bytes(), 0..doc.len(), [b"u"]).unwrap();
        let u = u.unwrap();
        let [a, b, z] = last_members(doc.as_bytes(), u, [b"a", b"b", b"z"]).unwrap();
        assert_eq!(&doc[a.unwrap()], "3");
        assert_eq!(&doc[b.unwrap()], r#"{"c":2}"#);
        assert_eq!(z, None);
    }

    #[test]
    fn absent_and_unknown() {
        assert!(absent(r#"{"a":{"usage":1}}"#));
        assert!(absent(" {} "));
        assert!(absent(r#"{"x":"\"usage\":1"}"#));
        assert!(unknown(r#"[{"usage":1}]"#));
        assert!(unknown(r#""usage""#));
        assert!(unknown(r#"x{"a":1}"#));
        assert!(unknown(r#"{"a" 1}"#));
        assert!(unknown(r#"{"a":1"#));
        for junk in ["", "}", "\"}", "\\\"}", ":}", "{:}", "]]]}", "\"a\":}"] {
            assert!(unknown(junk), "{junk}");
        }
    }
}
