//! Per-region figures of a multi-region run: how many requests each region sent, how many
//! its replicas served, the fraction of its requests served in another region, and its
//! TTFT (round trip included) and hit rate.

use super::record::RequestRecord;
use super::stats::percentile;
use serde::Serialize;
use std::collections::BTreeMap;

/// One origin region.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RegionStats {
    /// Requests that came from the region.
    pub requests: usize,
    /// Their share of all requests.
    pub origin_share: f64,
    /// Completed requests (any origin) its replicas served.
    pub served: usize,
    /// Of its completed requests, the fraction served in another region.
    pub cross_region_fraction: f64,
    /// Median TTFT of its completed requests, ms (round trip included).
    pub median_ttft_ms: f64,
    /// p99 TTFT of its completed requests, ms (round trip included).
    pub p99_ttft_ms: f64,
    /// Token-weighted hit rate of its completed requests.
    pub cache_hit_rate: f64,
}

/// The fraction of completed requests served outside their origin region, and the
/// per-origin figures; `None` when no record carries an origin region.
pub fn regional(records: &[RequestRecord]) -> Option<(f64, BTreeMap<String, RegionStats>)> {
    if records.iter().all(|r| r.origin_region.is_none()) {
        return None;
    }
    let mut by: BTreeMap<String, (RegionStats, Vec<f64>, u64, u64, usize)> = BTreeMap::new();
    let (mut ok, mut crossed) = (0usize, 0usize);
    for r in records {
        let Some(origin) = &r.origin_region else {
            continue;
        };
        let e = by.entry(origin.to_string()).or_default();
        e.0.requests += 1;
        if !r.ok() {
            continue;
        }
        ok += 1;
        if let Some(t) = r.ttft_ms {
            e.1.push(t);
        }
        e.2 += u64::from(r.cached_tokens.min(r.prompt_tokens));
        e.3 += u64::from(r.prompt_tokens);
        if r.served_region.as_ref() != Some(origin) {
            crossed += 1;
            e.4 += 1;
        }
        if let Some(s) = &r.served_region {
            by.entry(s.to_string()).or_default().0.served += 1;
        }
    }
    let total: usize = by.values().map(|e| e.0.requests).sum();
    let out = by
        .into_iter()
        .map(|(name, (mut st, mut ttft, cached, prompt, cross))| {
            ttft.sort_by(f64::total_cmp);
            st.origin_share = st.requests as f64 / total.max(1) as f64;
            st.cross_region_fraction = cross as f64 / ttft.len().max(1) as f64;
            st.median_ttft_ms = percentile(&ttft, 50.0);
            st.p99_ttft_ms = percentile(&ttft, 99.0);
            st.cache_hit_rate = cached as f64 / prompt.max(1) as f64;
            (name, st)
        })
        .collect();
    Some((crossed as f64 / ok.max(1) as f64, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use warmpath_core::RegionId;

    fn rec(origin: &str, served: &str, ttft: f64) -> RequestRecord {
        RequestRecord {
            origin_region: Some(RegionId::new(origin)),
            served_region: Some(RegionId::new(served)),
            ttft_ms: Some(ttft),
            prompt_tokens: 100,
            cached_tokens: if origin == served { 50 } else { 0 },
            ..RequestRecord::default()
        }
    }

    #[test]
    fn counts_cross_region_traffic_by_origin() {
        let recs = vec![
            rec("eu", "eu", 10.0),
            rec("eu", "us", 90.0),
            rec("eu", "eu", 20.0),
            rec("us", "us", 5.0),
        ];
        let (frac, by) = regional(&recs).unwrap();
        assert!((frac - 0.25).abs() < 1e-12);
        let eu = &by["eu"];
        assert_eq!((eu.requests, eu.served), (3, 2));
        assert!((eu.cross_region_fraction - 1.0 / 3.0).abs() < 1e-12);
        assert!((eu.origin_share - 0.75).abs() < 1e-12);
        assert_eq!(eu.median_ttft_ms, 20.0);
        assert!((eu.cache_hit_rate - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!((by["us"].served, by["us"].cross_region_fraction), (2, 0.0));
        assert!(regional(&[RequestRecord::default()]).is_none());
    }
}
