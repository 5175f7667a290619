//! The shared-tier table of a `--kv-tier` run: one row per (policy, arm), the hit rate split
//! into the replica's own cache (`local %`) and the shared tier (`tier %`), and TTFT.

use crate::metrics::Summary;
use std::fmt::Write;

/// Formats the tier figures of `summaries` (empty when none has any).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    if summaries.iter().all(|s| s.kv_tier.is_none()) {
        return out;
    }
    let header = format!(
        "{:<28} {:>5} {:>8} {:>7} {:>7} {:>10} {:>10} {:>10}",
        "policy / tier", "tier", "local %", "tier %", "hit %", "TTFT p50", "TTFT p99", "TTFT mean"
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for s in summaries {
        let Some(t) = &s.kv_tier else { continue };
        let _ = writeln!(
            out,
            "{:<28} {:>5} {:>8.1} {:>7.1} {:>7.1} {:>8.1}ms {:>8.1}ms {:>8.1}ms",
            s.policy,
            if t.on { "on" } else { "off" },
            t.local_hit_rate * 100.0,
            t.tier_hit_rate * 100.0,
            s.cache_hit_rate * 100.0,
            s.median_ttft_ms,
            s.p99_ttft_ms,
            s.mean_ttft_ms
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tier::TierSummary;

    #[test]
    fn only_tier_runs_get_rows() {
        let plain = Summary::default();
        assert!(render(&[&plain]).is_empty());
        let on = Summary {
            policy: "warm/tier-on".into(),
            cache_hit_rate: 0.65,
            median_ttft_ms: 127.0,
            p99_ttft_ms: 3826.5,
            kv_tier: Some(TierSummary {
                on: true,
                local_hit_rate: 0.272,
                tier_hit_rate: 0.378,
                ..TierSummary::default()
            }),
            ..Summary::default()
        };
        let t = render(&[&plain, &on]);
        assert_eq!(t.lines().count(), 3, "{t}");
        let row = t.lines().nth(2).unwrap();
        for needle in [
            "warm/tier-on",
            " on ",
            "27.2",
            "37.8",
            "65.0",
            "127.0ms",
            "3826.5ms",
        ] {
            assert!(row.contains(needle), "{needle:?} missing from {row:?}");
        }
    }
}
