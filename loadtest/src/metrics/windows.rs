//! Fixed windows of virtual time around an instant (a rollout's start): per window, the
//! requests that arrived in it, their TTFT median and p99, hit rate, and the share served
//! by the new checkpoint.

use super::record::RequestRecord;
use super::stats::percentile;
use serde::Serialize;
use warmpath_core::CheckpointId;

/// One window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WindowStats {
    /// Window start, seconds relative to the instant (negative: before it).
    pub t_s: f64,
    /// Requests that arrived in the window.
    pub requests: usize,
    /// Of them, completed.
    pub completed: usize,
    /// TTFT median of the completed ones, ms.
    pub median_ttft_ms: f64,
    /// TTFT p99 of the completed ones, ms.
    pub p99_ttft_ms: f64,
    /// Token-weighted hit rate of the completed ones.
    pub cache_hit_rate: f64,
    /// Fraction of the completed ones served on `new` (0 without checkpoints).
    pub new_checkpoint_share: f64,
}

/// Windows of `width_ms` aligned on `at_ms`, covering every request's arrival, in order.
pub fn windows(
    records: &[RequestRecord],
    at_ms: f64,
    width_ms: f64,
    new: Option<&CheckpointId>,
) -> Vec<WindowStats> {
    if records.is_empty() || width_ms <= 0.0 {
        return Vec::new();
    }
    let slot = |t: f64| ((t - at_ms) / width_ms).floor() as i64;
    let lo = records.iter().map(|r| slot(r.start_ms)).min().unwrap_or(0);
    let hi = records.iter().map(|r| slot(r.start_ms)).max().unwrap_or(0);
    let n = (hi - lo + 1) as usize;
    let mut ttft: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut acc = vec![(0usize, 0u64, 0u64, 0usize); n];
    for r in records {
        let i = (slot(r.start_ms) - lo) as usize;
        acc[i].0 += 1;
        if !r.ok() {
            continue;
        }
        if let Some(t) = r.ttft_ms {
            ttft[i].push(t);
        }
        acc[i].1 += u64::from(r.cached_tokens.min(r.prompt_tokens));
        acc[i].2 += u64::from(r.prompt_tokens);
        if new.is_some() && r.checkpoint.as_ref() == new {
            acc[i].3 += 1;
        }
    }
    (0..n)
        .map(|i| {
            let t = &mut ttft[i];
            t.sort_by(f64::total_cmp);
            let (requests, cached, prompt, on_new) = acc[i];
            WindowStats {
                t_s: (lo + i as i64) as f64 * width_ms / 1000.0,
                requests,
                completed: t.len(),
                median_ttft_ms: percentile(t, 50.0),
                p99_ttft_ms: percentile(t, 99.0),
                cache_hit_rate: cached as f64 / prompt.max(1) as f64,
                new_checkpoint_share: on_new as f64 / t.len().max(1) as f64,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start: f64, ttft: f64, cached: u32, ck: &str) -> RequestRecord {
        RequestRecord {
            start_ms: start,
            ttft_ms: Some(ttft),
            prompt_tokens: 100,
            cached_tokens: cached,
            checkpoint: Some(CheckpointId::new(ck)),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn windows_are_aligned_on_the_instant() {
        let recs = vec![
            rec(500.0, 10.0, 100, "a"),
            rec(1500.0, 20.0, 0, "b"),
            rec(1900.0, 40.0, 50, "a"),
            rec(3100.0, 5.0, 100, "b"),
        ];
        let new = CheckpointId::new("b");
        let w = windows(&recs, 1000.0, 1000.0, Some(&new));
        let starts: Vec<f64> = w.iter().map(|x| x.t_s).collect();
        assert_eq!(starts, vec![-1.0, 0.0, 1.0, 2.0]);
        assert_eq!((w[1].requests, w[1].completed), (2, 2));
        assert_eq!(w[1].median_ttft_ms, 30.0);
        assert!((w[1].p99_ttft_ms - 39.8).abs() < 1e-9);
        assert_eq!(w[1].cache_hit_rate, 0.25);
        assert_eq!(w[1].new_checkpoint_share, 0.5);
        assert_eq!((w[2].requests, w[2].p99_ttft_ms), (0, 0.0));
        assert_eq!(w[3].new_checkpoint_share, 1.0);
    }
}
