//! The per-class table of a class-labelled workload (mixed: `short` / `long`): one row per
//! (policy, class) and one for all requests, with TTFT and TPOT p50/p99 and ITL p99.

use crate::metrics::Summary;
use std::fmt::Write;

/// Formats the per-class figures of `summaries` (empty when none has any).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    if summaries.iter().all(|s| s.classes.is_empty()) {
        return out;
    }
    let header = format!(
        "{:<20} {:<6} {:>8} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "policy",
        "class",
        "done",
        "fail",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "ITL p99"
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    let row = |out: &mut String, policy: &str, class: &str, f: [f64; 5], done, fail| {
        let _ = writeln!(
            out,
            "{:<20} {:<6} {:>8} {:>6} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}ms",
            policy, class, done, fail, f[0], f[1], f[2], f[3], f[4]
        );
    };
    for s in summaries.iter().filter(|s| !s.classes.is_empty()) {
        for (name, c) in &s.classes {
            let f = [
                c.median_ttft_ms,
                c.p99_ttft_ms,
                c.median_tpot_ms,
                c.p99_tpot_ms,
                c.p99_itl_ms,
            ];
            row(&mut out, &s.policy, name, f, c.completed, c.failed);
        }
        let f = [
            s.median_ttft_ms,
            s.p99_ttft_ms,
            s.median_tpot_ms,
            s.p99_tpot_ms,
            s.p99_itl_ms,
        ];
        row(&mut out, &s.policy, "all", f, s.completed, s.failed);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::classes::ClassStats;

    #[test]
    fn one_row_per_class_and_one_for_all() {
        let mut s = Summary {
            policy: "colocated".into(),
            completed: 9,
            median_tpot_ms: 31.5,
            ..Summary::default()
        };
        for (name, tpot, done) in [("short", 42.26, 8), ("long", 12.74, 1)] {
            let c = ClassStats {
                completed: done,
                median_tpot_ms: tpot,
                ..ClassStats::default()
            };
            s.classes.insert(name.into(), c);
        }
        let t = render(&[&s, &Summary::default()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[0].contains("TPOT p50") && lines[0].contains("TTFT p99"));
        assert!(lines[2].starts_with("colocated") && lines[2].contains(" long "));
        assert!(lines[2].contains("12.7ms"));
        assert!(lines[3].contains(" short ") && lines[3].contains("42.3ms"));
        assert!(lines[4].contains(" all ") && lines[4].contains("31.5ms"));
        assert!(render(&[&Summary::default()]).is_empty());
    }
}
