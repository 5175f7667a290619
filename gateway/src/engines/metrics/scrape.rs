//! One `/metrics` page parsed with a Prometheus text-format parser (`prom_text_format_parser`)
//! into plain series (name, labels, value), read back one metric at a time with its series
//! combined per engine instance ([`Scrape::sum`], [`Scrape::mean`]).
//!
//! An engine instance is one set of label values once the model-parallel rank labels
//! ([`RANK_LABELS`]) are left out: vLLM's `engine` (its data-parallel index), SGLang's
//! `dp_rank` and any `model_name` tell instances apart, each with its own requests and KV
//! cache; the tensor, pipeline and expert-parallel ranks of one instance repeat its
//! scheduler's numbers (SGLang with metrics on every scheduler), so they count once, at
//! their maximum.

use super::error::MetricsError;
use prom_text_format_parser::{parse_scrape, ScrapeParseError, Type};
use std::collections::HashMap;

/// Labels that tell apart the ranks of one model-parallel engine instance.
pub(super) const RANK_LABELS: &[&str] = &["tp_rank", "pp_rank", "moe_ep_rank"];

/// What one metric's series give, combined over engine instances.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Found {
    /// The page has no series of that name.
    Absent,
    /// A series holds a value no count, ratio or counter can take (negative, NaN, infinite).
    Invalid(f64),
    /// The combined value.
    Value(f64),
}

/// One series: its labels (sorted by name) and its value.
#[derive(Debug)]
struct Series {
    labels: Vec<(String, String)>,
    value: f64,
}

/// A parsed page: every counter, gauge and untyped series by metric name (histograms and
/// summaries are left out: no load figure comes from them).
#[derive(Debug)]
pub(super) struct Scrape {
    series: HashMap<String, Vec<Series>>,
}

impl Scrape {
    /// Parses a page. A line the text format does not allow fails the whole page; a family
    /// that is well formed line by line but not as a whole (a `HELP` or `TYPE` without
    /// samples) is skipped with a debug log, as Prometheus itself accepts it.
    pub(super) fn parse(text: &str) -> Result<Self, MetricsError> {
        if text.trim().is_empty() {
            return Err(MetricsError::Empty);
        }
        let (metrics, error) = parse_scrape(text);
        match error {
            Some(ScrapeParseError::Parse(detail)) => return Err(MetricsError::Syntax(detail)),
            Some(ScrapeParseError::Collect(errors)) => {
                for e in errors {
                    tracing::debug!(lines = ?e.line_no, error = %e.error, "metrics family skipped");
                }
            }
            None => {}
        }
        let mut series: HashMap<String, Vec<Series>> = HashMap::new();
        for metric in metrics {
            if matches!(metric.kind, Type::Histogram | Type::Summary) {
                continue;
            }
            let entry = series.entry(metric.name.clone()).or_default();
            for sample in metric.samples {
                let raw = sample.value.value.as_str();
                let value = raw.parse::<f64>().map_err(|_| MetricsError::Value {
                    metric: metric.name.clone(),
                    value: raw.to_string(),
                })?;
                let mut labels: Vec<(String, String)> = sample
                    .labels
                    .iter()
                    .map(|l| (l.key.clone(), l.value.clone()))
                    .collect();
                labels.sort();
                entry.push(Series { labels, value });
            }
        }
        Ok(Self { series })
    }

    /// Whether the page has at least one series named `name`.
    pub(super) fn has(&self, name: &str) -> bool {
        self.series.get(name).is_some_and(|s| !s.is_empty())
    }

    /// The sum over engine instances of `name` (requests, tokens, capacity).
    pub(super) fn sum(&self, name: &str) -> Found {
        self.per_instance(name, |v| v.iter().sum())
    }

    /// The mean over engine instances of `name` (usage ratios): with equal KV pools, as data
    /// parallel engines have, the fraction of all their blocks in use.
    pub(super) fn mean(&self, name: &str) -> Found {
        self.per_instance(name, |v| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The labels of each series of `name` (sorted by label name), for info-style metrics
    /// whose facts are in their labels.
    pub(super) fn labels_of<'a>(
        &'a self,
        name: &str,
    ) -> impl Iterator<Item = &'a [(String, String)]> + 'a {
        self.series
            .get(name)
            .into_iter()
            .flatten()
            .map(|s| s.labels.as_slice())
    }

    /// The labels and value of each series of `name` (info gauges whose value orders them).
    pub(super) fn labelled<'a>(
        &'a self,
        name: &str,
    ) -> impl Iterator<Item = (&'a [(String, String)], f64)> + 'a {
        self.series
            .get(name)
            .into_iter()
            .flatten()
            .map(|s| (s.labels.as_slice(), s.value))
    }

    /// `name`'s series grouped into engine instances (maximum over ranks), then combined.
    fn per_instance(&self, name: &str, combine: impl Fn(&[f64]) -> f64) -> Found {
        let Some(series) = self.series.get(name).filter(|s| !s.is_empty()) else {
            return Found::Absent;
        };
        if let Some(bad) = series
            .iter()
            .find(|s| !s.value.is_finite() || s.value < 0.0)
        {
            return Found::Invalid(bad.value);
        }
        let mut instances: Vec<(String, f64)> = Vec::new();
        for s in series {
            let key = instance_key(&s.labels);
            match instances.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => *v = v.max(s.value),
                None => instances.push((key, s.value)),
            }
        }
        let values: Vec<f64> = instances.into_iter().map(|(_, v)| v).collect();
        Found::Value(combine(&values))
    }
}

/// The labels of a series that name its engine instance, as one comparable string.
fn instance_key(labels: &[(String, String)]) -> String {
    let mut key = String::new();
    for (k, v) in labels {
        if RANK_LABELS.contains(&k.as_str()) {
            continue;
        }
        key.push_str(k);
        key.push('=');
        key.push_str(v);
        key.push('\u{0}');
    }
    key
}
