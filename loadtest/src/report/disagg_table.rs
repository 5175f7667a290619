//! The role-split table of a `--prefill-replicas` run: one row per (policy, split), with the
//! latencies P/D disaggregation trades, what its KV transfers cost and how much prefill
//! still lands on the decode replicas (`D comp`: prompt tokens a decode replica computed
//! per request it served; `-` when co-located, where every replica computes everything).

use crate::metrics::Summary;
use std::fmt::Write;

/// Formats the role-split figures of `summaries` (empty when none has any).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    if summaries.iter().all(|s| s.disagg.is_none()) {
        return out;
    }
    let header = format!(
        "{:<28} {:>4} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>7} {:>8} {:>10} {:>7}",
        "policy / split",
        "P",
        "D",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "E2E p99",
        "hit %",
        "split %",
        "KV tok",
        "xfer p99",
        "D comp"
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for s in summaries {
        let Some(d) = &s.disagg else { continue };
        let computed = match d.prefill_replicas {
            0 => "-".to_string(),
            _ => format!("{:.0}", d.mean_decode_computed_tokens),
        };
        let _ = writeln!(
            out,
            "{:<28} {:>4} {:>4} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.0}ms {:>6.1} {:>7.1} {:>8.0} {:>8.1}ms {:>7}",
            s.policy,
            d.prefill_replicas,
            d.decode_replicas,
            s.median_ttft_ms,
            s.p99_ttft_ms,
            s.median_tpot_ms,
            s.p99_tpot_ms,
            s.p99_e2el_ms,
            s.cache_hit_rate * 100.0,
            d.split_fraction * 100.0,
            d.mean_transferred_tokens,
            d.p99_exposed_transfer_ms,
            computed
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::disagg::DisaggSummary;

    #[test]
    fn only_split_runs_get_rows() {
        let plain = Summary::default();
        assert!(render(&[&plain]).is_empty());
        let split = Summary {
            policy: "warm/4P+12D".into(),
            p99_tpot_ms: 41.5,
            disagg: Some(DisaggSummary {
                prefill_replicas: 4,
                decode_replicas: 12,
                split_fraction: 0.5,
                mean_transferred_tokens: 3000.0,
                p99_exposed_transfer_ms: 12.25,
                mean_decode_computed_tokens: 87.4,
                ..DisaggSummary::default()
            }),
            ..Summary::default()
        };
        let t = render(&[&plain, &split]);
        assert_eq!(t.lines().count(), 3, "{t}");
        let row = t.lines().nth(2).unwrap();
        for needle in [
            "warm/4P+12D",
            " 4 ",
            " 12 ",
            "41.5ms",
            "50.0",
            "3000",
            "12.2ms",
            " 87",
        ] {
            assert!(row.contains(needle), "{needle:?} missing from {row:?}");
        }
    }
}
