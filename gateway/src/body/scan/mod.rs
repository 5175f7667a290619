//! A strict, single-pass, allocation-free JSON scanner, for reading a few fields out of a
//! request or response body (or one SSE chunk's data) without building anything: readers
//! walk the objects they care about and skip everything else. The response's `Envelope`
//! and the request reader ([`crate::body::request`]) are built on it.
//!
//! # Why
//! This runs on every request, every response and every SSE chunk. The serde_json visitors it replaced
//! (which already skipped what they did not need and built no `Value`) measured about 6,700
//! to 6,900 instructions under callgrind for a typical 282-byte non-streaming body; this
//! scanner takes about 3,700 there, and about 2,200 (against 3,700) for a typical 158-byte
//! SSE chunk. Strings, most of the bytes, are scanned eight bytes at a time, and a long one
//! (a 25 KB system prompt) with `memchr` and vectorised checks.
//!
//! # What it validates, and why so strictly
//! Readers built on it must answer exactly as `serde_json::from_slice::<serde_json::Value>`
//! and `Value` lookups do, for every input, and those answer nothing for a document
//! serde_json rejects. So the whole document is validated as serde_json validates it:
//! - JSON grammar only: no trailing commas, keys are strings, one value and then only
//!   whitespace (space, `\t`, `\n`, `\r`; nothing else) to the end.
//! - At most 127 arrays/objects open at once (serde_json's recursion limit of 128).
//! - Strings: no raw control characters (below 0x20), only JSON's escapes, `\u` with four
//!   hex digits, surrogates paired (a lone one is an error), and valid UTF-8 bytes.
//! - Numbers: JSON syntax (no leading zeros or `+`, digits after `.` and `e`), and a value
//!   too large for `f64` is an error (serde_json's `NumberOutOfRange`). Numbers near that
//!   edge are handed to serde_json itself, so that its rounding decides.
//!
//! The accessors read as `Value`'s do: keys compare after unescaping (`"us\u0061ge"` is
//! `usage`), `u64_value` is `as_u64` (a non-negative integer that fits `u64`; not `-0`,
//! `1.0` or `1e2`), and `array_len` is the length of `as_array`, or 0.

#[cfg(test)]
pub(crate) mod gen;

/// serde_json fails once this many arrays/objects are open at once.
const DEPTH_LIMIT: u32 = 128;

/// A number below `10^(SURELY_FINITE + 1)` is finite however it is rounded; from there up,
/// serde_json decides.
const SURELY_FINITE: i64 = 306;

/// The plain run at the start of `bytes` inside a string: how long it is (up to the first
/// `"`, `\` or control character) and whether it is all ASCII. Looks at eight bytes at a
/// time (most strings end within the first eight) with Mycroft's zero-byte test: in
/// `(x - 0x0101..01) & !x`, the first zero byte of `x` has its top bit set and no byte
/// before it does (subtracting `0x20` instead finds the first byte below 0x20).
fn plain_run(bytes: &[u8]) -> (usize, bool) {
    const ONES: u64 = u64::MAX / 255;
    const TOPS: u64 = ONES << 7;
    let mut chunks = bytes.chunks_exact(8);
    let (mut n, mut seen) = (0, 0);
    for chunk in &mut chunks {
        if n == LONG_RUN && bytes.len() > 2 * LONG_RUN {
            let (len, ascii) = long_run(&bytes[n..]);
            return (n + len, ascii && seen & TOPS == 0);
        }
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let x = u64::from_le_bytes(chunk);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let control = x.wrapping_sub(ONES * 0x20) & !x;
        let quote = quote.wrapping_sub(ONES) & !quote;
        let backslash = backslash.wrapping_sub(ONES) & !backslash;
        let stops = (control | quote | backslash) & TOPS;
        if stops != 0 {
            // The bits below the first stop's top bit: the bytes before it, and more of
            // the stop byte, which is ASCII anyway.
            seen |= x & ((stops & stops.wrapping_neg()) - 1);
            return (n + stops.trailing_zeros() as usize / 8, seen & TOPS == 0);
        }
        seen |= x;
        n += 8;
    }
    for &b in chunks.remainder() {
        if b < 0x20 || b == b'"' || b == b'\\' {
            break;
        }
        seen |= u64::from(b);
        n += 1;
    }
    (n, seen & TOPS == 0)
}

/// After this many plain bytes a string is taken to be long: [`long_run`] scans the rest.
const LONG_RUN: usize = 64;

/// [`plain_run`] for a long string: `memchr` finds the closing quote or the first
/// backslash, then one vectorisable pass over the run finds its smallest byte (a control
/// character ends the run there) and whether any byte is non-ASCII.
#[cold]
fn long_run(bytes: &[u8]) -> (usize, bool) {
    let end = memchr::memchr2(b'"', b'\\', bytes).unwrap_or(bytes.len());
    let mut ascii = true;
    let mut at = 0;
    for block in bytes[..end].chunks(256) {
        let (low, high) = block
            .iter()
            .fold((u8::MAX, 0u8), |(low, high), &b| (low.min(b), high | b));
        if low < 0x20 {
            let control = block.iter().position(|&b| b < 0x20).unwrap_or(block.len());
            let before = &block[..control];
            return (at + control, ascii && before.iter().all(u8::is_ascii));
        }
        ascii &= high < 0x80;
        at += block.len();
    }
    (end, ascii)
}

/// An object key as written: the bytes between its quotes, and whether they hold escapes.
#[derive(Clone, Copy)]
pub(crate) struct Key<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl<'a> Key<'a> {
    /// The key whose bytes between the quotes are `raw`, holding escapes or not.
    pub(crate) fn new(raw: &'a [u8], escaped: bool) -> Self {
        Self { raw, escaped }
    }
}

impl Key<'_> {
    /// True when the key unescapes to the ASCII `name`.
    #[inline]
    pub(crate) fn is(self, name: &[u8]) -> bool {
        if !self.escaped {
            return self.raw == name;
        }
        self.is_escaped(name)
    }

    /// [`Self::is`] for a key with escapes.
    #[inline(never)]
    fn is_escaped(self, name: &[u8]) -> bool {
        let mut want = name.iter();
        let mut i = 0;
        while let Some(&b) = self.raw.get(i) {
            let (unit, len) = match b {
                b'\\' => escape_at(self.raw, i).unwrap_or((u16::MAX, 1)),
                _ => (u16::from(b), 1),
            };
            // A non-ASCII byte or character differs from every byte of `name`.
            if want.next().map(|&w| u16::from(w)) != Some(unit) {
                return false;
            }
            i += len;
        }
        want.next().is_none()
    }
}

impl<'a> Key<'a> {
    /// The string unescaped: borrowed when it holds no escapes. `None` only for what the
    /// scanner has already refused (it validated the string).
    pub(crate) fn text(self) -> Option<std::borrow::Cow<'a, str>> {
        if !self.escaped {
            return std::str::from_utf8(self.raw)
                .ok()
                .map(std::borrow::Cow::Borrowed);
        }
        let raw = self.raw;
        let mut out = String::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            let stop = memchr::memchr(b'\\', &raw[i..]).map_or(raw.len(), |p| i + p);
            out.push_str(std::str::from_utf8(&raw[i..stop]).ok()?);
            if stop == raw.len() {
                break;
            }
            let (unit, len) = escape_at(raw, stop)?;
            i = stop + len;
            let code = if (0xD800..0xDC00).contains(&unit) {
                let (low, len) = escape_at(raw, i)?;
                i += len;
                0x10000
                    + ((u32::from(unit) - 0xD800) << 10)
                    + (u32::from(low).checked_sub(0xDC00)?)
            } else {
                u32::from(unit)
            };
            out.push(char::from_u32(code)?);
        }
        Some(std::borrow::Cow::Owned(out))
    }
}

/// Decodes the escape starting at `bytes[i]` (which must be its backslash): its UTF-16 code
/// unit and how many bytes it spans. `None` for anything JSON does not allow.
fn escape_at(bytes: &[u8], i: usize) -> Option<(u16, usize)> {
    if bytes.get(i) != Some(&b'\\') {
        return None;
    }
    let unit = match bytes.get(i + 1)? {
        b @ (b'"' | b'\\' | b'/') => *b,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let hex = bytes.get(i + 2..i + 6)?;
            let unit = hex.iter().try_fold(0u16, |acc, &h| {
                let digit = char::from(h).to_digit(16)?;
                Some((acc << 4) | digit as u16)
            })?;
            return Some((unit, 6));
        }
        _ => return None,
    };
    Some((u16::from(unit), 2))
}

/// The bytes and a cursor into them. Every reading method starts at the first byte of its
/// value (whitespace already skipped) and leaves the cursor just past it; `None` means the
/// document is invalid.
pub(crate) struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Arrays/objects open around the cursor.
    depth: u32,
}

impl<'a> Scanner<'a> {
    /// Reads `bytes` as one JSON document: `read` is called at its first byte and must
    /// consume one value; then only whitespace may follow. `None` when serde_json would
    /// reject the document.
    pub(crate) fn document<T>(
        bytes: &'a [u8],
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<T> {
        Self::document_at(bytes, read).ok()
    }

    /// [`Self::document`], failing with the byte offset where reading stopped.
    pub(crate) fn document_at<T>(
        bytes: &'a [u8],
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Result<T, usize> {
        let mut s = Scanner {
            bytes,
            pos: 0,
            depth: 0,
        };
        s.whitespace();
        let value = read(&mut s).ok_or(s.pos)?;
        s.whitespace();
        if s.pos == bytes.len() {
            Ok(value)
        } else {
            Err(s.pos)
        }
    }

    /// The byte at the cursor.
    #[inline]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Consumes `b` if it is next.
    #[inline]
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.pos += usize::from(hit);
        hit
    }

    /// Skips JSON whitespace (space, tab, line feed, carriage return; nothing else).
    #[inline]
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Skips one or more digits, returning them.
    fn digits(&mut self) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        let rest = bytes.get(self.pos..)?;
        let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        self.pos += n;
        rest.get(..n).filter(|digits| !digits.is_empty())
    }

    /// Validates any value and discards it.
    pub(crate) fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|s, _| s.skip_value()),
            b'[' => self.array(|s| s.skip_value()),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => None,
        }
    }

    /// Validates the literal `word` (`true`, `false` or `null`).
    pub(crate) fn literal(&mut self, word: &[u8]) -> Option<()> {
        let rest = self.bytes.get(self.pos..)?;
        rest.starts_with(word).then(|| self.pos += word.len())
    }

    /// Steps into an array or object, failing at the depth limit.
    #[inline]
    fn open(&mut self) -> Option<()> {
        self.pos += 1;
        self.depth += 1;
        self.whitespace();
        (self.depth < DEPTH_LIMIT).then_some(())
    }

    /// Walks an object, calling `field` with each key and the cursor on its value (which
    /// `field` must consume).
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, Key<'a>) -> Option<()>,
    ) -> Option<()> {
        self.open()?;
        if !self.eat(b'}') {
            loop {
                if self.peek() != Some(b'"') {
                    return None;
                }
                let key = self.string()?;
                self.whitespace();
                if !self.eat(b':') {
                    return None;
                }
                self.whitespace();
                field(self, key)?;
                if self.separator(b'}')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// Walks an array, calling `element` with the cursor on each element (which `element`
    /// must consume).
    pub(crate) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.open()?;
        if !self.eat(b']') {
            loop {
                element(self)?;
                if self.separator(b']')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// After a member: `Some(true)` past the closing `close`, `Some(false)` past a comma
    /// and the whitespace after it.
    #[inline]
    fn separator(&mut self, close: u8) -> Option<bool> {
        self.whitespace();
        let b = self.peek()?;
        self.pos += 1;
        if b == close {
            return Some(true);
        }
        self.whitespace();
        (b == b',').then_some(false)
    }

    /// A string value at the cursor (`None` when the value there is no string).
    pub(crate) fn string_value(&mut self) -> Option<Key<'a>> {
        (self.peek()? == b'"').then_some(())?;
        self.string()
    }

    /// `null`, `true` or `false` at the cursor: `Some(None)`, `Some(Some(..))`; `None` for
    /// anything else.
    pub(crate) fn bool_or_null(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| None),
            b't' => self.literal(b"true").map(|()| Some(true)),
            b'f' => self.literal(b"false").map(|()| Some(false)),
            _ => None,
        }
    }

    /// A number at the cursor read as serde reads a `u64`: a non-negative integer that
    /// fits (`Some(None)` for any other valid number); `None` when no number is there.
    pub(crate) fn integer(&mut self) -> Option<Option<u64>> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// Validates a string; returns what is between its quotes, still escaped.
    #[inline(always)]
    fn string(&mut self) -> Option<Key<'a>> {
        let start = self.pos + 1;
        let rest = self.bytes.get(start..)?;
        // Most strings are one plain ASCII run up to the closing quote.
        let (len, ascii) = plain_run(rest);
        match (ascii, rest.get(len)) {
            (true, Some(b'"')) => {
                self.pos = start + len + 1;
                let raw = rest.get(..len)?;
                Some(Key {
                    raw,
                    escaped: false,
                })
            }
            _ => self.string_in_runs(start),
        }
    }

    /// [`Self::string`] for any string (from the byte after its opening quote at `start`):
    /// plain runs between escapes.
    #[inline(never)]
    fn string_in_runs(&mut self, start: usize) -> Option<Key<'a>> {
        let bytes = self.bytes;
        self.pos = start;
        let mut escaped = false;
        loop {
            let rest = bytes.get(self.pos..)?;
            let (len, ascii) = plain_run(rest);
            let (run, stop) = rest.split_at_checked(len)?;
            // An escape decodes to whole characters, so checking the runs between escapes
            // one by one answers as checking the unescaped string would.
            if !ascii {
                std::str::from_utf8(run).ok()?;
            }
            self.pos += len;
            match stop.first()? {
                b'"' => {
                    self.pos += 1;
                    let raw = bytes.get(start..self.pos - 1)?;
                    return Some(Key { raw, escaped });
                }
                b'\\' => {
                    self.escape()?;
                    escaped = true;
                }
                _ => return None,
            }
        }
    }

    /// Validates the escape at the cursor, pairing surrogates as serde_json requires.
    fn escape(&mut self) -> Option<()> {
        let (unit, len) = escape_at(self.bytes, self.pos)?;
        self.pos += len;
        match unit {
            0xDC00..=0xDFFF => None,
            0xD800..=0xDBFF => {
                let (low, len) = escape_at(self.bytes, self.pos)?;
                self.pos += len;
                (0xDC00..=0xDFFF).contains(&low).then_some(())
            }
            _ => Some(()),
        }
    }

    /// Validates a number; returns it as `Value::as_u64` reads it.
    fn number(&mut self) -> Option<Option<u64>> {
        let start = self.pos;
        let negative = self.eat(b'-');
        let (value, lead) = self.integer_part()?;
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            self.fraction_and_exponent(start, lead)?;
            return Some(None);
        }
        if value.is_none() {
            self.in_range(start, lead)?;
        }
        Some(value.filter(|_| !negative))
    }

    /// The digits before any `.` or `e`: their value (`None` past `u64::MAX`) and the
    /// decimal exponent of the leading digit (`None` for `0`).
    fn integer_part(&mut self) -> Option<(Option<u64>, Option<i64>)> {
        let start = self.pos;
        match self.peek()? {
            // One leading zero only (a digit after a value fails anyway; say so here).
            b'0' => {
                self.pos += 1;
                let digit_next = self.peek().is_some_and(|b| b.is_ascii_digit());
                (!digit_next).then_some((Some(0), None))
            }
            b'1'..=b'9' => {
                let mut value = Some(0u64);
                while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
                    let digit = u64::from(d - b'0');
                    value = value.and_then(|v| v.checked_mul(10)?.checked_add(digit));
                    self.pos += 1;
                }
                Some((value, Some((self.pos - start) as i64 - 1)))
            }
            _ => None,
        }
    }

    /// Validates what follows the integer part of the number at `start` (from its `.`, `e`
    /// or `E`) and its range; `lead` is the decimal exponent of its leading integer digit.
    #[cold]
    #[inline(never)]
    fn fraction_and_exponent(&mut self, start: usize, mut lead: Option<i64>) -> Option<()> {
        if self.eat(b'.') {
            let digits = self.digits()?;
            // `0.00…`: the leading digit is the first non-zero one.
            if lead.is_none() {
                let zeros = digits.iter().position(|&d| d != b'0');
                lead = zeros.map(|z| -(z as i64) - 1);
            }
        }
        let exponent = match self.peek() {
            Some(b'e' | b'E') => self.exponent()?,
            _ => Some(0),
        };
        match lead {
            None => Some(()), // zero, whatever its exponent
            Some(lead) => self.in_range(start, exponent.map(|e| lead + e)),
        }
    }

    /// Validates an exponent (from its `e`); returns its value, or `Some(None)` when it is
    /// too long to add up safely (nine digits are not).
    fn exponent(&mut self) -> Option<Option<i64>> {
        self.pos += 1;
        let minus = self.eat(b'-');
        if !minus {
            self.eat(b'+');
        }
        let digits = self.digits()?;
        if digits.len() > 9 {
            return Some(None);
        }
        let e = digits.iter().fold(0, |e, &d| e * 10 + i64::from(d - b'0'));
        Some(Some(if minus { -e } else { e }))
    }

    /// Fails when the number from `start` to the cursor is too large for `f64`.
    /// `magnitude` is the decimal exponent of its leading digit, when known.
    #[cold]
    #[inline(never)]
    fn in_range(&self, start: usize, magnitude: Option<i64>) -> Option<()> {
        if magnitude.is_some_and(|m| m <= SURELY_FINITE) {
            return Some(());
        }
        let text = self.bytes.get(start..self.pos)?;
        serde_json::from_slice::<serde_json::Value>(text)
            .ok()
            .map(drop)
    }

    /// Any value, read as `Value::as_u64` reads it: a non-negative integer that fits.
    pub(crate) fn u64_value(&mut self) -> Option<Option<u64>> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            _ => self.skip_value().map(|()| None),
        }
    }

    /// Any value, read as the length of `Value::as_array`: 0 when it is not an array.
    pub(crate) fn array_len(&mut self) -> Option<u64> {
        if self.peek()? != b'[' {
            return self.skip_value().map(|()| 0);
        }
        let mut n = 0;
        self.array(|s| {
            n += 1;
            s.skip_value()
        })?;
        Some(n)
    }
}
