//! Log output: `tracing` events as text lines on stderr.
//!
//! While the gateway serves, INFO and more verbose events (the per-request `request` line
//! above all) are batched: appended to a buffer that is written when it passes
//! [`FLUSH_BYTES`] and at least every [`FLUSH_INTERVAL`]. A busy gateway then pays one
//! `write(2)` per few dozen lines rather than one per request. WARN and ERROR events are
//! written at once, after whatever is buffered, so lines keep their order. Before serving
//! starts and after it ends (either shutdown signal) every line is written at once and the
//! buffer is emptied, so only a crash can lose lines: at most the last interval's.
//!
//! Every line is passed through [`redact::redact`] first: credentials never reach the log,
//! whichever library wrote the line.
//!
//! ANSI colours only when stderr is a terminal: a log file or collector gets plain text,
//! with fields written by [`fields::PlainFields`] (the same text, at a third of the cost).

pub(crate) mod fields;
pub(crate) mod redact;

use parking_lot::Mutex;
use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Buffered bytes that trigger a write.
pub(crate) const FLUSH_BYTES: usize = 32 * 1024;
/// Longest time a batched line waits.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

struct Inner {
    pending: Vec<u8>,
    out: Box<dyn Write + Send>,
    /// INFO and more verbose lines wait in `pending`.
    batching: bool,
}

impl Inner {
    /// Writes what is buffered. The buffer is emptied even when the write fails, so an
    /// unwritable stderr costs lines, never memory.
    fn write_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let r = self.out.write_all(&self.pending);
        self.pending.clear();
        r.and_then(|()| self.out.flush())
    }
}

/// Where log lines go; a `MakeWriter` for `tracing_subscriber::fmt`. Clones share the buffer.
#[derive(Clone)]
pub(crate) struct LogSink {
    inner: Arc<Mutex<Inner>>,
}

impl LogSink {
    /// A sink writing to `out`; it writes every line at once until batching is turned on.
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                pending: Vec::with_capacity(FLUSH_BYTES + 1024),
                out,
                batching: false,
            })),
        }
    }

    /// Turns batching of INFO and more verbose lines on or off; off writes the buffer first.
    pub(crate) fn set_batching(&self, on: bool) {
        let mut g = self.inner.lock();
        g.batching = on;
        if !on {
            let _ = g.write_pending();
        }
    }

    /// Writes what is buffered.
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.inner.lock().write_pending()
    }

    fn write_line(&self, line: &[u8], urgent: bool) -> io::Result<()> {
        let line = redact::redact(line);
        let mut g = self.inner.lock();
        // After whatever is buffered, in the same write when it goes out now.
        g.pending.extend_from_slice(&line);
        if urgent || !g.batching || g.pending.len() >= FLUSH_BYTES {
            g.write_pending()?;
        }
        Ok(())
    }
}

/// One event's writer.
pub(crate) struct LineWriter<'a> {
    sink: &'a LogSink,
    urgent: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sink.write_line(buf, self.urgent)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogSink {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter {
            sink: self,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter<'a> {
        LineWriter {
            sink: self,
            // More verbose levels compare greater: WARN and ERROR are the urgent ones.
            urgent: *meta.level() <= Level::WARN,
        }
    }
}

static STDERR: OnceLock<LogSink> = OnceLock::new();

/// Installs the process's subscriber: `RUST_LOG` filter (default `info`), text lines on the
/// stderr sink, and the thread that writes batched lines every [`FLUSH_INTERVAL`].
pub fn init() {
    let sink = STDERR.get_or_init(|| {
        let sink = LogSink::new(Box::new(io::stderr()));
        let flusher = sink.clone();
        std::thread::Builder::new()
            .name("warmpath-log".into())
            .spawn(move || loop {
                std::thread::sleep(FLUSH_INTERVAL);
                let _ = flusher.flush();
            })
            .expect("spawn the log flush thread");
        sink
    });
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(sink.clone());
    if io::stderr().is_terminal() {
        fmt.with_ansi(true).init();
    } else {
        fmt.with_ansi(false).fmt_fields(fields::PlainFields).init();
    }
}

/// Batches stderr lines while `on` (the gateway is serving); off writes the buffer. A no-op
/// when [`init`] did not install the stderr sink (tests, embedders).
pub(crate) fn serving(on: bool) {
    if let Some(sink) = STDERR.get() {
        sink.set_batching(on);
    }
}

/// A log destination tests can read back.
#[cfg(test)]
pub(crate) mod testing {
    use parking_lot::Mutex;
    use std::io::{self, Write};
    use std::sync::Arc;

    /// Bytes written, shared between clones.
    #[derive(Clone, Default)]
    pub(crate) struct Shared(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        /// What was written, as text.
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().clone()).expect("log lines are UTF-8")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Shared;
    use super::*;

    fn subscriber(sink: &LogSink) -> impl tracing::Subscriber {
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(Level::INFO)
            .with_writer(sink.clone())
            .finish()
    }

    #[test]
    fn lines_are_written_at_once_until_batching_starts() {
        let out = Shared::default();
        let sink = LogSink::new(Box::new(out.clone()));
        tracing::subscriber::with_default(subscriber(&sink), || tracing::info!("first"));
        assert!(
            out.text().contains("first"),
            "not batching: written at once"
        );
        sink.set_batching(true);
        tracing::subscriber::with_default(subscriber(&sink), || tracing::info!("second"));
        assert!(!out.text().contains("second"), "batched: held back");
        sink.flush().unwrap();
        assert!(out.text().contains("second"), "written by the flush");
    }

    #[test]
    fn a_warning_is_written_at_once_after_the_buffered_lines() {
        let out = Shared::default();
        let sink = LogSink::new(Box::new(out.clone()));
        sink.set_batching(true);
        tracing::subscriber::with_default(subscriber(&sink), || {
            tracing::info!("routine");
            assert_eq!(out.text(), "");
            tracing::warn!("trouble");
        });
        let text = out.text();
        let (a, b) = (text.find("routine"), text.find("trouble"));
        assert!(a.is_some() && b.is_some() && a < b, "in order: {text}");
        assert!(!text.contains('\u{1b}'), "no escape codes: {text:?}");
    }

    #[test]
    fn credentials_are_redacted_before_they_are_written() {
        let out = Shared::default();
        let sink = LogSink::new(Box::new(out.clone()));
        tracing::subscriber::with_default(subscriber(&sink), || {
            tracing::error!(
                "bad header buf: GET / HTTP/1.1\\r\\nAuthorization: Bearer sk-canary-123456\\r\\n"
            );
        });
        let text = out.text();
        assert!(!text.contains("sk-canary-123456"), "{text}");
        assert!(text.contains(redact::REDACTED), "{text}");
    }

    #[test]
    fn a_full_buffer_is_written_and_turning_batching_off_empties_it() {
        let out = Shared::default();
        let sink = LogSink::new(Box::new(out.clone()));
        sink.set_batching(true);
        let line = [b'x'; 1000];
        let mut sent = 0;
        while sent + line.len() < FLUSH_BYTES {
            sink.write_line(&line, false).unwrap();
            sent += line.len();
        }
        assert!(out.0.lock().is_empty(), "below the threshold: held");
        sink.write_line(&line, false).unwrap();
        sent += line.len();
        assert_eq!(out.0.lock().len(), sent, "written at the threshold");
        sink.write_line(&line, false).unwrap();
        assert_eq!(out.0.lock().len(), sent, "a new batch starts");
        sink.set_batching(false);
        assert_eq!(out.0.lock().len(), sent + line.len(), "emptied");
    }
}
