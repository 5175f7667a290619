//! Reading the gateway's Prometheus counters back for the dashboard: every series of a
//! counter vector with its labels, sums by one label, totals, and ratios.

use prometheus::core::Collector;
use std::collections::BTreeMap;

/// `(labels, value)` of every series of an integer counter vector.
pub(crate) fn series(c: &impl Collector) -> Vec<(BTreeMap<String, String>, u64)> {
    let mut out = Vec::new();
    for fam in c.collect() {
        for m in fam.get_metric() {
            let labels = m
                .get_label()
                .iter()
                .map(|l| (l.get_name().to_string(), l.get_value().to_string()))
                .collect();
            out.push((labels, m.get_counter().get_value() as u64));
        }
    }
    out
}

/// Sums of every series by the value of `label`.
pub(crate) fn sum_by(c: &impl Collector, label: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (labels, v) in series(c) {
        let key = labels.get(label).cloned().unwrap_or_default();
        *out.entry(key).or_insert(0) += v;
    }
    out
}

/// The sum of every series.
pub(crate) fn total(c: &impl Collector) -> u64 {
    series(c).iter().map(|(_, v)| v).sum()
}

/// `num / den`, when `den` is not 0.
pub(crate) fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}
