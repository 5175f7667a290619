//! Two-sample Kolmogorov–Smirnov test, for timing-isolation checks.

/// The two-sample KS statistic D (largest gap between the empirical CDFs) and its
/// asymptotic two-sided p-value (Kolmogorov distribution with Stephens' small-sample
/// correction, as in Numerical Recipes' `kstwo`).
pub fn ks_two_sample(a: &[f64], b: &[f64]) -> (f64, f64) {
    assert!(!a.is_empty() && !b.is_empty(), "empty sample");
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    let ne = n * m / (n + m);
    let sq = ne.sqrt();
    (d, kolmogorov_q((sq + 0.12 + 0.11 / sq) * d))
}

/// Q_KS(λ) = 2 Σ_{k≥1} (-1)^{k-1} e^{-2k²λ²}: the probability of a gap at least this large.
fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 1e-3 {
        return 1.0;
    }
    let mut sum = 0.0;
    let mut sign = 1.0;
    for k in 1..=200 {
        let k = k as f64;
        let term = sign * (-2.0 * k * k * lambda * lambda).exp();
        sum += term;
        if term.abs() < 1e-16 {
            break;
        }
        sign = -sign;
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_samples_pass_and_separated_samples_fail() {
        let a: Vec<f64> = (0..40).map(|i| i as f64).collect();
        let (d, p) = ks_two_sample(&a, &a);
        assert_eq!(d, 0.0);
        assert!(p > 0.99);
        let b: Vec<f64> = (0..40).map(|i| 100.0 + i as f64).collect();
        let (d, p) = ks_two_sample(&a, &b);
        assert_eq!(d, 1.0);
        assert!(p < 1e-10, "{p}");
        // Interleaved samples from one distribution: no evidence of a difference.
        let odd: Vec<f64> = (0..40).map(|i| (2 * i + 1) as f64).collect();
        let even: Vec<f64> = (0..40).map(|i| (2 * i) as f64).collect();
        assert!(ks_two_sample(&odd, &even).1 > 0.5);
        // Reference value: D = 0.5 with n = m = 30 gives p ~ 0.00076 (scipy's asymptotic).
        let q = kolmogorov_q((15f64.sqrt() + 0.12 + 0.11 / 15f64.sqrt()) * 0.5);
        assert!((0.0003..0.002).contains(&q), "{q}");
    }
}
