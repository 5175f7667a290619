//! Credentials never reach the log: every line the gateway writes, its own and those it
//! forwards from Pingora (which can quote a raw request head, `Authorization` included, when
//! a header is malformed), passes through [`redact`] first.
//!
//! Redacted, wherever they appear in a line, whatever the case or quoting:
//! - the value after a credential-like name followed by `:` or `=` (`Authorization`,
//!   `Proxy-Authorization`, `api-key`/`x-api-key`/`api_key`/`apikey`, `Cookie`/`Set-Cookie`,
//!   `admin_key`, `key_sha256`, `key`, `token`, `secret`, `password`; not as the tail of a
//!   longer word, so `monkey=` is left alone), in a header, a query string
//!   or a debug dump, up to the end of the value (a line break, written or escaped, a quote,
//!   `&` or `,`);
//! - the credential after `Bearer` or `Basic`;
//! - `sk-...` tokens (OpenAI-style keys, and the keys `warmpath up` generates).
//!
//! A line with none of these names is returned as is, without a copy (one Aho-Corasick
//! scan); the per-request access line only pays that scan.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::borrow::Cow;
use std::sync::OnceLock;

/// What a secret is replaced with.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Names whose value is a credential.
const NAMES: &[&str] = &[
    "authorization",
    "api-key",
    "api_key",
    "apikey",
    "cookie",
    "admin-key",
    "admin_key",
    "key_sha256",
    "key",
    "warmpath_admin",
    "password",
    "secret",
    "token",
];
/// Auth schemes followed by a credential.
const SCHEMES: &[&str] = &["bearer", "basic"];
/// The prefix of OpenAI-style keys.
const SK: &str = "sk-";

/// Shortest run after `sk-` taken for a key (`sk-` alone, or `sk-1`, is just text).
const MIN_SK_TAIL: usize = 6;

fn matcher() -> &'static AhoCorasick {
    static M: OnceLock<AhoCorasick> = OnceLock::new();
    M.get_or_init(|| {
        let patterns: Vec<&str> = NAMES
            .iter()
            .chain(SCHEMES)
            .chain(std::iter::once(&SK))
            .copied()
            .collect();
        AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(patterns)
            .expect("valid patterns")
    })
}

/// Where a value ends: a line break (raw or written as `\r`/`\n`), a quote, a separator.
fn ends_value(b: u8) -> bool {
    matches!(b, b'\r' | b'\n' | b'"' | b'\'' | b'\\' | b'&' | b',')
}

/// Ends a bare token (after `Bearer`, or an `sk-` key).
fn ends_token(b: u8) -> bool {
    ends_value(b) || b.is_ascii_whitespace() || matches!(b, b';' | b')' | b']' | b'}' | b'>')
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
}

/// Skips spaces, tabs and quotes (plain or escaped) from `i`.
fn skip_fill(line: &[u8], mut i: usize) -> usize {
    while i < line.len() {
        match line[i] {
            b' ' | b'\t' | b'"' | b'\'' => i += 1,
            b'\\' if matches!(line.get(i + 1), Some(b'"' | b'\'')) => i += 2,
            _ => break,
        }
    }
    i
}

/// The span of secret that follows a match at `start..end`, if any.
fn secret_after(line: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let word = &line[start..end];
    if word.eq_ignore_ascii_case(SK.as_bytes()) {
        if start > 0 && is_key_char(line[start - 1]) {
            return None;
        }
        let tail = line[end..].iter().take_while(|&&b| !ends_token(b)).count();
        return (tail >= MIN_SK_TAIL).then_some((start, end + tail));
    }
    if SCHEMES
        .iter()
        .any(|s| word.eq_ignore_ascii_case(s.as_bytes()))
    {
        let from = end + line[end..].iter().take_while(|b| **b == b' ').count();
        if from == end {
            return None;
        }
        let len = line[from..].iter().take_while(|&&b| !ends_token(b)).count();
        return (len > 0).then_some((from, from + len));
    }
    // A name (not the tail of a longer word): `name: value`, `name=value`,
    // `"name": "value"`, `name=\"value\"`.
    if start > 0 && line[start - 1].is_ascii_alphabetic() {
        return None;
    }
    let sep = skip_fill(line, end);
    if !matches!(line.get(sep), Some(b':' | b'=')) {
        return None;
    }
    let from = skip_fill(line, sep + 1);
    let len = line[from..].iter().take_while(|&&b| !ends_value(b)).count();
    (len > 0).then_some((from, from + len))
}

/// `line` with every credential replaced by [`REDACTED`]; borrowed when there is none.
pub(crate) fn redact(line: &[u8]) -> Cow<'_, [u8]> {
    let m = matcher();
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut pos = 0;
    while pos < line.len() {
        let Some(hit) = m.find(aho_corasick::Input::new(line).span(pos..line.len())) else {
            break;
        };
        match secret_after(line, hit.start(), hit.end()) {
            Some((from, to)) => {
                let o = out.get_or_insert_with(|| Vec::with_capacity(line.len()));
                o.extend_from_slice(&line[copied..from]);
                o.extend_from_slice(REDACTED.as_bytes());
                copied = to;
                pos = to;
            }
            None => pos = hit.end(),
        }
    }
    match out {
        Some(mut o) => {
            o.extend_from_slice(&line[copied..]);
            Cow::Owned(o)
        }
        None => Cow::Borrowed(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        String::from_utf8(redact(s.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn credentials_are_redacted_in_every_shape() {
        let key = "canary-key-1234567890";
        let cases = [
            format!("buf: GET / HTTP/1.1\\r\\nAuthorization: Bearer {key}\\r\\nHost: x\\r\\n"),
            format!("buf: \"POST / HTTP/1.1\\r\\nauthorization:\\tbasic {key}\\r\\n\""),
            format!("headers: {{\"authorization\": \"Bearer {key}\"}}"),
            format!("x-api-key: {key}\r\nok"),
            format!("GET /v1/models?api_key={key}&x=1 HTTP/1.1"),
            format!("uri=/v1/chat?apikey={key}"),
            format!("buf: GET /v1/models?key={key} HTTP/9.9"),
            format!("Cookie: a=b; warmpath_admin={key}; c=d"),
            format!("proxy-authorization={key}"),
            format!("error=\"bad key sk-{key}\""),
            format!("admin_key: {key}"),
            format!("Authorization=\\\"Bearer {key}\\\""),
        ];
        for c in cases {
            let out = r(&c);
            assert!(!out.contains(key), "{c:?} -> {out:?}");
            assert!(out.contains(REDACTED), "{c:?} -> {out:?}");
        }
    }

    #[test]
    fn ordinary_lines_are_untouched_and_not_copied() {
        let line = b"INFO request request_id=ab12 tenant=acme model=m replica=r0 status=200 \
                     prompt_tokens=12 charged_tokens=14 cached_tokens=0 latency_ms=3\n";
        assert!(matches!(redact(line), Cow::Borrowed(_)));
        assert_eq!(r("task-runner sk-1 ask-me"), "task-runner sk-1 ask-me");
        assert_eq!(r("monkey=banana tokens=3"), "monkey=banana tokens=3");
        // The scheme word without a credential, or a name without a value.
        assert_eq!(r("bearer"), "bearer");
        assert_eq!(
            r("missing authorization header"),
            "missing authorization header"
        );
        assert_eq!(
            r("a: x\nauthorization: k1\nb: y"),
            format!("a: x\nauthorization: {REDACTED}\nb: y")
        );
    }
}
