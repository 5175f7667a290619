//! Progress of `loadtest simulate` on stderr: an indicatif bar on a terminal, else a plain
//! line every few seconds of wall time (so CI logs show the run is alive); nothing with
//! `--quiet`.

use crate::sim::{ProgressSink, SimProgress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Wall time between two plain progress lines.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Where progress goes.
#[derive(Debug)]
enum Output {
    Quiet,
    Bar(ProgressBar),
    Plain { last: Instant },
}

/// The progress display of one simulated run.
#[derive(Debug)]
pub struct ProgressUi {
    label: String,
    started: Instant,
    out: Output,
}

impl ProgressUi {
    /// A display for the run labelled `label`: a bar when stderr is a terminal, plain lines
    /// otherwise, nothing when `quiet`.
    pub fn new(label: &str, total: usize, quiet: bool) -> Self {
        let out = if quiet {
            Output::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(
                Some(total as u64),
                ProgressDrawTarget::stderr_with_hz(4),
            );
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} requests, {msg}, wall {elapsed}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix(label.to_string());
            bar.set_message("virtual 0.0 s");
            Output::Bar(bar)
        } else {
            Output::Plain {
                last: Instant::now(),
            }
        };
        Self {
            label: label.to_string(),
            started: Instant::now(),
            out,
        }
    }

    /// Clears the bar (the caller prints its own summary line).
    pub fn finish(&mut self) {
        if let Output::Bar(bar) = &self.out {
            bar.finish_and_clear();
        }
    }
}

/// `simulate warm: 1234/3993 requests, virtual 345.6 s, wall 10.0 s`.
pub fn plain_line(label: &str, p: &SimProgress, wall: Duration) -> String {
    format!(
        "simulate {label}: {}/{} requests, virtual {:.1} s, wall {:.1} s",
        p.done,
        p.total,
        p.virtual_ms / 1000.0,
        wall.as_secs_f64()
    )
}

impl ProgressSink for ProgressUi {
    fn update(&mut self, p: &SimProgress) {
        match &mut self.out {
            Output::Quiet => {}
            Output::Bar(bar) => {
                bar.set_position(p.done as u64);
                bar.set_message(format!("virtual {:.1} s", p.virtual_ms / 1000.0));
            }
            Output::Plain { last } => {
                if last.elapsed() >= PLAIN_EVERY {
                    *last = Instant::now();
                    eprintln!("{}", plain_line(&self.label, p, self.started.elapsed()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_line_names_requests_and_both_clocks() {
        let p = SimProgress {
            done: 12,
            total: 40,
            virtual_ms: 2500.0,
        };
        assert_eq!(
            plain_line("warm", &p, Duration::from_millis(1500)),
            "simulate warm: 12/40 requests, virtual 2.5 s, wall 1.5 s"
        );
        let mut quiet = ProgressUi::new("warm", 40, true);
        quiet.update(&p);
        assert!(matches!(quiet.out, Output::Quiet));
    }
}
