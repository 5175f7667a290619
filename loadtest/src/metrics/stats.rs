//! Plain statistics (numpy semantics: linear-interpolated percentiles, population std).

use serde::Serialize;

/// Arithmetic mean; 0 for an empty slice.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Population standard deviation (numpy's default); 0 for an empty slice.
pub fn std_dev(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64).sqrt()
}

/// `p`-th percentile (0..=100) of an ascending-sorted slice with linear interpolation, like
/// `numpy.percentile`; 0 for an empty slice.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil() as usize;
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

/// Mean, median, std and tail percentiles of one metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Population standard deviation.
    pub std: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Distribution {
    /// Summarises `xs` (any order; sorted in place).
    pub fn of(xs: &mut [f64]) -> Self {
        xs.sort_by(f64::total_cmp);
        Self {
            mean: mean(xs),
            median: percentile(xs, 50.0),
            std: std_dev(xs),
            p90: percentile(xs, 90.0),
            p99: percentile(xs, 99.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&xs, 50.0), 2.5);
        assert!((percentile(&xs, 90.0) - 3.7).abs() < 1e-12);
        assert!((percentile(&xs, 99.0) - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&xs, 0.0), 1.0);
        assert_eq!(percentile(&xs, 100.0), 4.0);
        assert!((std_dev(&xs) - 1.118_033_988_749_895).abs() < 1e-12);
        let mut v = vec![4.0, 1.0, 3.0, 2.0];
        let d = Distribution::of(&mut v);
        assert_eq!((d.mean, d.median), (2.5, 2.5));
        assert_eq!(Distribution::of(&mut []).p99, 0.0);
    }
}
