//! Throughput and cache hit rate over time, bucketed by completion time.

use super::RequestRecord;
use serde::Serialize;

/// One time bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Bucket {
    /// Bucket start, seconds since the benchmark start.
    pub t_s: f64,
    /// Completed requests per second.
    pub request_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Token-weighted hit rate of the requests completing in the bucket (0 if none).
    pub cache_hit_rate: f64,
}

/// Buckets completed requests into about `target_buckets` equal slices (at least `min_width_s`).
pub fn over_time(
    records: &[RequestRecord],
    target_buckets: usize,
    min_width_s: f64,
) -> Vec<Bucket> {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
    let Some(end) = ok
        .iter()
        .map(|r| r.end_ms() / 1000.0)
        .max_by(f64::total_cmp)
    else {
        return Vec::new();
    };
    let width = (end / target_buckets.max(1) as f64).max(min_width_s);
    let n = (end / width).floor() as usize + 1;
    let mut req = vec![0u64; n];
    let mut out = vec![0u64; n];
    let mut prompt = vec![0u64; n];
    let mut cached = vec![0u64; n];
    for r in ok {
        let i = ((r.end_ms() / 1000.0 / width).floor() as usize).min(n - 1);
        req[i] += 1;
        out[i] += r.output_tokens as u64;
        prompt[i] += r.prompt_tokens as u64;
        cached[i] += r.cached_tokens.min(r.prompt_tokens) as u64;
    }
    (0..n)
        .map(|i| Bucket {
            t_s: i as f64 * width,
            request_throughput: req[i] as f64 / width,
            output_throughput: out[i] as f64 / width,
            cache_hit_rate: if prompt[i] > 0 {
                cached[i] as f64 / prompt[i] as f64
            } else {
                0.0
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_by_completion_time() {
        let rec = |start: f64, e2e: f64, out: u32, cached: u32| RequestRecord {
            start_ms: start,
            e2el_ms: e2e,
            ttft_ms: Some(1.0),
            output_tokens: out,
            prompt_tokens: 100,
            cached_tokens: cached,
            ..RequestRecord::default()
        };
        let recs = vec![
            rec(0.0, 500.0, 10, 100),
            rec(0.0, 900.0, 10, 0),
            rec(1000.0, 1500.0, 4, 50),
        ];
        let b = over_time(&recs, 10, 1.0);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].request_throughput, 2.0);
        assert_eq!(b[0].output_throughput, 20.0);
        assert_eq!(b[0].cache_hit_rate, 0.5);
        assert_eq!(b[1].request_throughput, 0.0);
        assert_eq!(b[2].cache_hit_rate, 0.5);
    }
}
