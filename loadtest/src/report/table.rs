//! The terminal table: one row per run/policy.

use crate::metrics::Summary;
use std::fmt::Write;

/// Formats summaries as a fixed-width table.
pub fn render(summaries: &[&Summary]) -> String {
    let oracle = summaries.iter().any(|s| s.oracle_hit_rate.is_some());
    let regional = summaries.iter().any(|s| s.cross_region_fraction.is_some());
    let mut out = String::new();
    let mut header = format!(
        "{:<20} {:>7} {:>6} {:>9} {:>10} {:>10} {:>10} {:>9} {:>10} {:>7}",
        "policy",
        "done",
        "fail",
        "req/s",
        "out tok/s",
        "TTFT mean",
        "TTFT p99",
        "TPOT mean",
        "E2E p99",
        "hit %"
    );
    if oracle {
        header.push_str(&format!(" {:>8}", "oracle %"));
    }
    header.push_str(&format!(" {:>8}", "max/mean"));
    if regional {
        header.push_str(&format!(" {:>10}", "x-region %"));
    }
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for s in summaries {
        let mut line = format!(
            "{:<20} {:>7} {:>6} {:>9.2} {:>10.1} {:>8.1}ms {:>8.1}ms {:>7.1}ms {:>8.1}ms {:>7.1}",
            truncate(&s.policy, 20),
            s.completed,
            s.failed,
            s.request_throughput,
            s.output_throughput,
            s.mean_ttft_ms,
            s.p99_ttft_ms,
            s.mean_tpot_ms,
            s.p99_e2el_ms,
            s.cache_hit_rate * 100.0
        );
        if oracle {
            line.push_str(&format!(
                " {:>8.1}",
                s.oracle_hit_rate.unwrap_or(0.0) * 100.0
            ));
        }
        line.push_str(&format!(" {:>8.2}", s.max_mean_share));
        if regional {
            line.push_str(&format!(
                " {:>10.1}",
                s.cross_region_fraction.unwrap_or(0.0) * 100.0
            ));
        }
        let _ = writeln!(out, "{line}");
    }
    for s in summaries.iter().filter(|s| !s.errors.is_empty()) {
        let errs: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "errors[{}]: {}", s.policy, errs.join(" "));
    }
    out
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_policy_with_oracle_column() {
        let a = Summary {
            policy: "warm".into(),
            completed: 10,
            cache_hit_rate: 0.5,
            oracle_hit_rate: Some(0.9),
            ..Summary::default()
        };
        let b = Summary {
            policy: "round_robin".into(),
            completed: 9,
            failed: 1,
            ..Summary::default()
        };
        let t = render(&[&a, &b]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].contains("oracle %"));
        assert!(
            lines[2].starts_with("warm") && lines[2].contains("50.0") && lines[2].contains("90.0")
        );
        assert!(lines[3].starts_with("round_robin"));
    }
}
