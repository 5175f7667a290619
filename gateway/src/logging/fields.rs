//! Event fields as `name=value`, byte for byte as `tracing_subscriber`'s `DefaultFields`
//! writes them without colours, with fast paths for the gateway's `request` line: integers,
//! booleans and plain strings are written directly instead of through `Debug` and the
//! colour painter, which cost that line about 10,000 instructions. Everything else (the
//! message, strings that need escaping, other types) goes through `DefaultVisitor` itself.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};

/// The fields formatter for colour-free output.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PlainFields;

impl<'a> MakeVisitor<Writer<'a>> for PlainFields {
    type Visitor = PlainVisitor<'a>;

    fn make_visitor(&self, target: Writer<'a>) -> PlainVisitor<'a> {
        PlainVisitor {
            writer: target,
            is_empty: true,
            result: Ok(()),
        }
    }
}

/// Writes one event's fields.
pub(crate) struct PlainVisitor<'a> {
    writer: Writer<'a>,
    is_empty: bool,
    result: fmt::Result,
}

impl PlainVisitor<'_> {
    /// The name as `DefaultFields` writes it; `None` for a field it skips.
    fn name(field: &Field) -> Option<&'static str> {
        let name = field.name();
        if name.starts_with("log.") {
            return None;
        }
        Some(name.strip_prefix("r#").unwrap_or(name))
    }

    /// Writes `name=` after the separating space (never for the message); false when the
    /// field is not written.
    fn start(&mut self, field: &Field) -> bool {
        if self.result.is_err() {
            return false;
        }
        let Some(name) = Self::name(field) else {
            return false;
        };
        if !std::mem::replace(&mut self.is_empty, false) {
            self.result = self.writer.write_char(' ');
        }
        self.result = self
            .result
            .and_then(|()| self.writer.write_str(name))
            .and_then(|()| self.writer.write_char('='));
        true
    }

    /// Writes a value whose `Debug` text is `value` itself.
    fn write_plain(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.delegate(field, &format_args!("{value}"));
        } else if self.start(field) {
            self.result = self.result.and_then(|()| self.writer.write_str(value));
        }
    }

    /// The slow path: `DefaultVisitor` writes the field.
    fn delegate(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() || (field.name() != "message" && Self::name(field).is_none()) {
            return;
        }
        let mut d = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        d.record_debug(field, value);
        self.result = d.finish();
        self.is_empty = false;
    }
}

/// A string `Debug` writes as itself between quotes.
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

impl Visit for PlainVisitor<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.write_plain(field, itoa::Buffer::new().format(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.write_plain(field, itoa::Buffer::new().format(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.write_plain(field, if value { "true" } else { "false" });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.delegate(field, &format_args!("{value}"));
        } else if !plain(value) {
            self.delegate(field, &value);
        } else if self.start(field) {
            self.result = self
                .result
                .and_then(|()| self.writer.write_char('"'))
                .and_then(|()| self.writer.write_str(value))
                .and_then(|()| self.writer.write_char('"'));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.delegate(field, value);
    }
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for PlainVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::testing::Shared;
    use crate::logging::LogSink;
    use std::io;

    /// The same events through `DefaultFields` and `PlainFields`, colour-free, no time.
    fn both(events: impl Fn()) -> (String, String) {
        let (a, b) = (Shared::default(), Shared::default());
        let (sa, sb) = (
            LogSink::new(Box::new(a.clone())),
            LogSink::new(Box::new(b.clone())),
        );
        let default = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_writer(sa)
            .finish();
        tracing::subscriber::with_default(default, &events);
        let plain = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .fmt_fields(PlainFields)
            .with_writer(sb)
            .finish();
        tracing::subscriber::with_default(plain, &events);
        (a.text(), b.text())
    }

    #[test]
    fn lines_are_identical_to_the_default_formatter() {
        let (default, plain) = both(|| {
            let err = io::Error::other("disk \"full\"");
            tracing::info!(
                request_id = "5d2c0ffee",
                tenant = "team a",
                model = %"SmolLM2",
                replica = "r\"0\"",
                note = "tab\there é",
                status = 200u16,
                attempts = 2u32,
                delta = -5i64,
                cached_tokens = Some(7u64),
                missing = None::<u64>,
                ok = true,
                ratio = 0.25f64,
                r#type = "chat",
                error = &err as &(dyn std::error::Error + 'static),
                "request {} done",
                7
            );
            tracing::warn!(code = 3u64, "plain message");
            tracing::error!(message = "only a message");
            tracing::info!(a = 1u64, b = "x");
        });
        assert!(default.lines().count() == 4, "{default}");
        assert_eq!(plain, default);
    }

    #[test]
    fn a_message_of_another_type_is_written_as_the_default_does() {
        let (default, plain) = both(|| tracing::info!(message = 42u64, late = false));
        assert!(default.contains(": 42 late=false"), "{default}");
        assert_eq!(plain, default);
    }

    #[test]
    fn plain_strings_are_the_ones_debug_leaves_alone() {
        for s in ["abc", "a b", "0123-_./:", ""] {
            assert!(plain(s), "{s}");
            assert_eq!(format!("{s:?}"), format!("\"{s}\""));
        }
        for s in ["a\"b", "a\\b", "tab\t", "é", "\u{1b}[31m"] {
            assert!(!plain(s), "{s}");
        }
    }
}
