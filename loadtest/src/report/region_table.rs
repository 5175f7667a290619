//! The per-region table of a multi-region run: one row per (policy, origin region).

use crate::metrics::Summary;
use std::fmt::Write;

/// Formats the regional figures of `summaries` (empty when none has any).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    if summaries.iter().all(|s| s.regions.is_empty()) {
        return out;
    }
    let header = format!(
        "{:<20} {:<6} {:>8} {:>8} {:>7} {:>10} {:>10} {:>10} {:>7}",
        "policy",
        "origin",
        "requests",
        "share %",
        "served",
        "x-region %",
        "TTFT p50",
        "TTFT p99",
        "hit %"
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for s in summaries {
        for (name, r) in &s.regions {
            let _ = writeln!(
                out,
                "{:<20} {:<6} {:>8} {:>8.1} {:>7} {:>10.1} {:>8.1}ms {:>8.1}ms {:>7.1}",
                s.policy,
                name,
                r.requests,
                r.origin_share * 100.0,
                r.served,
                r.cross_region_fraction * 100.0,
                r.median_ttft_ms,
                r.p99_ttft_ms,
                r.cache_hit_rate * 100.0
            );
        }
        if let Some(f) = s.cross_region_fraction {
            let _ = writeln!(
                out,
                "{:<20} {:<6} {:>8} {:>8} {:>7} {:>10.1} {:>8.1}ms {:>8.1}ms {:>7.1}",
                s.policy,
                "all",
                s.num_prompts,
                "100.0",
                s.completed,
                f * 100.0,
                s.median_ttft_ms,
                s.p99_ttft_ms,
                s.cache_hit_rate * 100.0
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::regional::RegionStats;

    #[test]
    fn one_row_per_region_and_a_total() {
        let mut s = Summary {
            policy: "warm@spill".into(),
            cross_region_fraction: Some(0.25),
            ..Summary::default()
        };
        s.regions.insert(
            "eu".into(),
            RegionStats {
                requests: 3,
                cross_region_fraction: 0.5,
                ..RegionStats::default()
            },
        );
        let t = render(&[&s]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[2].starts_with("warm@spill") && lines[2].contains(" eu "));
        assert!(lines[2].contains("50.0") && lines[3].contains("25.0"));
        assert!(render(&[&Summary::default()]).is_empty());
    }
}
