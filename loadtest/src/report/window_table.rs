//! The over-time table of a rollout: one row per window of virtual time around the start,
//! one column per run (TTFT p99, hit rate, share on the new checkpoint), and each run's
//! worst p99 just after the start.

use crate::metrics::Summary;
use std::fmt::Write;

/// Windows shown before the start.
pub const BEFORE: i64 = 3;
/// Windows shown from the start on.
pub const AFTER: i64 = 12;
/// Windows after the start whose worst p99 is summed up (the cold spike).
pub const SPIKE_WINDOWS: usize = 3;

/// Worst TTFT p99 among the first `n` windows from the start (t >= 0).
pub fn peak_after(s: &Summary, n: usize) -> f64 {
    s.windows
        .iter()
        .filter(|w| w.t_s >= 0.0)
        .take(n)
        .map(|w| w.p99_ttft_ms)
        .fold(0.0, f64::max)
}

/// Formats the windows of `summaries` (empty when none has any).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    let runs: Vec<&&Summary> = summaries.iter().filter(|s| !s.windows.is_empty()).collect();
    let Some(first) = runs.first() else {
        return out;
    };
    let width = match first.windows.as_slice() {
        [a, b, ..] => b.t_s - a.t_s,
        _ => 0.0,
    };
    let _ = writeln!(
        out,
        "rollout windows ({width:.0} s of arrivals each, t relative to the start): TTFT p99 ms / hit % / % on the new checkpoint"
    );
    let mut header = format!("{:>7}", "t (s)");
    for s in &runs {
        let _ = write!(header, " {:>24}", s.policy);
    }
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for k in -BEFORE..AFTER {
        let t = k as f64 * width;
        let mut line = format!("{t:>7.0}");
        for s in &runs {
            let cell =
                s.windows
                    .iter()
                    .find(|w| (w.t_s - t).abs() < 1e-6)
                    .map_or("-".to_string(), |w| {
                        format!(
                            "{:.0} / {:.1} / {:.0}",
                            w.p99_ttft_ms,
                            w.cache_hit_rate * 100.0,
                            w.new_checkpoint_share * 100.0
                        )
                    });
            let _ = write!(line, " {cell:>24}");
        }
        let _ = writeln!(out, "{line}");
    }
    for s in &runs {
        let done = s
            .rollout
            .as_ref()
            .and_then(|r| r.prewarm_done_after_s)
            .map_or(String::new(), |d| format!(", pre-warm done {d:.1} s after"));
        let _ = writeln!(
            out,
            "{}: worst TTFT p99 in the first {SPIKE_WINDOWS} windows after the start {:.0} ms{done}",
            s.policy,
            peak_after(s, SPIKE_WINDOWS)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::windows::WindowStats;

    fn run(name: &str, p99: &[f64]) -> Summary {
        Summary {
            policy: name.into(),
            windows: p99
                .iter()
                .enumerate()
                .map(|(i, &p)| WindowStats {
                    t_s: (i as f64 - 1.0) * 10.0,
                    p99_ttft_ms: p,
                    ..WindowStats::default()
                })
                .collect(),
            ..Summary::default()
        }
    }

    #[test]
    fn rows_per_window_and_the_spike_per_run() {
        let a = run("warm/naive", &[100.0, 900.0, 400.0, 100.0, 5000.0]);
        let b = run("warm/prewarm", &[100.0, 150.0, 120.0, 100.0]);
        assert_eq!(peak_after(&a, 3), 900.0, "windows 0, 10, 20 only");
        let t = render(&[&a, &b]);
        assert!(
            t.contains("warm/naive: worst TTFT p99 in the first 3 windows after the start 900 ms")
        );
        assert!(t
            .lines()
            .any(|l| l.trim_start().starts_with("0 ") && l.contains("900 / 0.0 / 0")));
        assert!(t
            .lines()
            .any(|l| l.trim_start().starts_with("-30 ") && l.contains('-')));
        assert!(render(&[&Summary::default()]).is_empty());
    }
}
