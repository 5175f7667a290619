//! The run summary, serialised with `vllm bench serve --save-result` key names plus
//! `policy`, `cache_hit_rate`, `oracle_hit_rate` (simulate), `replica_share`, `errors` and,
//! for class-labelled workloads, `classes`.

use super::classes::{classes, ClassStats};
use super::disagg::DisaggSummary;
use super::record::RequestRecord;
use super::regional::{regional, RegionStats};
use super::rollout::RolloutSummary;
use super::stats::Distribution;
use super::windows::WindowStats;
use serde::Serialize;
use std::collections::BTreeMap;

/// Goodput SLOs (vLLM `--goodput ttft:ms tpot:ms e2el:ms`); unset ones are not checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Slo {
    /// TTFT bound, ms.
    pub ttft_ms: Option<f64>,
    /// TPOT bound, ms.
    pub tpot_ms: Option<f64>,
    /// E2E latency bound, ms.
    pub e2el_ms: Option<f64>,
}

impl Slo {
    /// True when any bound is set.
    pub fn is_set(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some() || self.e2el_ms.is_some()
    }

    /// True when a completed request meets every set bound.
    pub fn met_by(&self, r: &RequestRecord) -> bool {
        if !r.ok() {
            return false;
        }
        let ok = |bound: Option<f64>, v: Option<f64>| match (bound, v) {
            (Some(b), Some(v)) => v <= b,
            (Some(_), None) => false,
            (None, _) => true,
        };
        // A single-token request has no TPOT: vLLM counts it as meeting the TPOT SLO.
        let tpot = r.tpot_ms().or(if r.output_tokens <= 1 {
            Some(0.0)
        } else {
            None
        });
        ok(self.ttft_ms, r.ttft_ms) && ok(self.tpot_ms, tpot) && ok(self.e2el_ms, Some(r.e2el_ms))
    }
}

/// One run's summary. Field names are the JSON keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Routing policy (simulate) or the label given to `run`.
    pub policy: String,
    /// `openai-completions`, `openai-chat` or `simulator`.
    pub backend: String,
    /// Workload name.
    pub workload: String,
    /// Requests issued.
    pub num_prompts: usize,
    /// Open-loop rate (req/s), `inf` as null.
    pub request_rate: Option<f64>,
    /// Closed-loop concurrency.
    pub max_concurrency: Option<usize>,
    /// Seconds from the first send to the last completion.
    pub duration: f64,
    /// Completed requests.
    pub completed: usize,
    /// Failed requests.
    pub failed: usize,
    /// Prompt tokens of completed requests.
    pub total_input_tokens: u64,
    /// Output tokens of completed requests.
    pub total_output_tokens: u64,
    /// Completed requests per second.
    pub request_throughput: f64,
    /// Requests meeting the SLOs per second (null without SLOs).
    pub request_goodput: Option<f64>,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// (Prompt + output) tokens per second.
    pub total_token_throughput: f64,
    /// TTFT mean, ms.
    pub mean_ttft_ms: f64,
    /// TTFT median, ms.
    pub median_ttft_ms: f64,
    /// TTFT std, ms.
    pub std_ttft_ms: f64,
    /// TTFT p90, ms.
    pub p90_ttft_ms: f64,
    /// TTFT p99, ms.
    pub p99_ttft_ms: f64,
    /// TPOT mean, ms.
    pub mean_tpot_ms: f64,
    /// TPOT median, ms.
    pub median_tpot_ms: f64,
    /// TPOT std, ms.
    pub std_tpot_ms: f64,
    /// TPOT p90, ms.
    pub p90_tpot_ms: f64,
    /// TPOT p99, ms.
    pub p99_tpot_ms: f64,
    /// ITL mean, ms.
    pub mean_itl_ms: f64,
    /// ITL median, ms.
    pub median_itl_ms: f64,
    /// ITL std, ms.
    pub std_itl_ms: f64,
    /// ITL p90, ms.
    pub p90_itl_ms: f64,
    /// ITL p99, ms.
    pub p99_itl_ms: f64,
    /// E2E latency mean, ms.
    pub mean_e2el_ms: f64,
    /// E2E latency median, ms.
    pub median_e2el_ms: f64,
    /// E2E latency std, ms.
    pub std_e2el_ms: f64,
    /// E2E latency p90, ms.
    pub p90_e2el_ms: f64,
    /// E2E latency p99, ms.
    pub p99_e2el_ms: f64,
    /// Token-weighted cache hit rate over completed requests, in [0, 1].
    pub cache_hit_rate: f64,
    /// Hit rate of one cache of N x capacity on the same requests (simulate only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle_hit_rate: Option<f64>,
    /// Share of completed requests per replica.
    pub replica_share: BTreeMap<String, f64>,
    /// Most-loaded replica's share divided by the mean share (1 = perfectly even).
    pub max_mean_share: f64,
    /// Failures by kind.
    pub errors: BTreeMap<String, usize>,
    /// Routing decisions by policy branch (simulate only; e.g. `cache_hit`, `cold_home`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub route_branches: BTreeMap<String, usize>,
    /// Fraction of completed requests served outside their origin region (simulate with
    /// `--regions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_region_fraction: Option<f64>,
    /// Per origin region (simulate with `--regions`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub regions: BTreeMap<String, RegionStats>,
    /// Per request class (workloads that label their requests, e.g. mixed's `short` /
    /// `long`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, ClassStats>,
    /// The checkpoint rollout (simulate with `--rollout-at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSummary>,
    /// Windows of virtual time aligned on the rollout's start (simulate with `--rollout-at`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowStats>,
    /// The role split and its KV transfers (simulate with `--prefill-replicas`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disagg: Option<DisaggSummary>,
    /// The shared KV tier and the hit rate split it makes (simulate with `--kv-tier`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_tier: Option<super::tier::TierSummary>,
    /// The replicas' prefill order against the no-queueing floor (simulate with
    /// `--replica-order`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_order: Option<super::order::OrderSummary>,
    /// The gateway's admission and goodput per tenant and class (simulate with
    /// `--admission`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<super::admission::AdmissionSummary>,
}

impl Summary {
    /// Computes the summary of `records`. Labels (`policy`, `backend`, ...) are left empty
    /// for the caller to fill.
    pub fn compute(records: &[RequestRecord], slo: &Slo) -> Self {
        let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
        let first = records
            .iter()
            .map(|r| r.start_ms)
            .fold(f64::INFINITY, f64::min);
        let last = records
            .iter()
            .map(RequestRecord::end_ms)
            .fold(f64::NEG_INFINITY, f64::max);
        let duration = if records.is_empty() {
            0.0
        } else {
            ((last - first) / 1000.0).max(0.0)
        };
        let per_s = |x: f64| if duration > 0.0 { x / duration } else { 0.0 };

        let input: u64 = ok.iter().map(|r| r.prompt_tokens as u64).sum();
        let output: u64 = ok.iter().map(|r| r.output_tokens as u64).sum();
        let cached: u64 = ok
            .iter()
            .map(|r| r.cached_tokens.min(r.prompt_tokens) as u64)
            .sum();

        let ttft = Distribution::of(&mut ok.iter().filter_map(|r| r.ttft_ms).collect::<Vec<_>>());
        let tpot = Distribution::of(&mut ok.iter().filter_map(|r| r.tpot_ms()).collect::<Vec<_>>());
        let e2el = Distribution::of(&mut ok.iter().map(|r| r.e2el_ms).collect::<Vec<_>>());
        let mut itls: Vec<f64> = ok
            .iter()
            .flat_map(|r| r.itls_ms.iter().map(|&x| x as f64))
            .collect();
        let itl = Distribution::of(&mut itls);

        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for r in &ok {
            *counts
                .entry(r.replica.clone().unwrap_or_else(|| "unknown".into()))
                .or_default() += 1;
        }
        let replica_share: BTreeMap<String, f64> = counts
            .iter()
            .map(|(k, &v)| (k.clone(), v as f64 / ok.len() as f64))
            .collect();
        let max_mean_share = if counts.is_empty() {
            0.0
        } else {
            let max = counts.values().copied().max().unwrap_or(0) as f64;
            max / (ok.len() as f64 / counts.len() as f64)
        };
        let mut errors: BTreeMap<String, usize> = BTreeMap::new();
        for r in records.iter().filter(|r| !r.ok()) {
            if let Some(e) = r.error {
                *errors.entry(e.as_str().to_string()).or_default() += 1;
            }
        }
        let good = ok.iter().filter(|r| slo.met_by(r)).count();
        let mut route_branches: BTreeMap<String, usize> = BTreeMap::new();
        for b in records.iter().filter_map(|r| r.route_branch) {
            *route_branches.entry(b.to_string()).or_default() += 1;
        }
        let (cross_region_fraction, regions) = match regional(records) {
            Some((f, by)) => (Some(f), by),
            None => (None, BTreeMap::new()),
        };

        Summary {
            num_prompts: records.len(),
            duration,
            completed: ok.len(),
            failed: records.len() - ok.len(),
            total_input_tokens: input,
            total_output_tokens: output,
            request_throughput: per_s(ok.len() as f64),
            request_goodput: slo.is_set().then(|| per_s(good as f64)),
            output_throughput: per_s(output as f64),
            total_token_throughput: per_s((input + output) as f64),
            mean_ttft_ms: ttft.mean,
            median_ttft_ms: ttft.median,
            std_ttft_ms: ttft.std,
            p90_ttft_ms: ttft.p90,
            p99_ttft_ms: ttft.p99,
            mean_tpot_ms: tpot.mean,
            median_tpot_ms: tpot.median,
            std_tpot_ms: tpot.std,
            p90_tpot_ms: tpot.p90,
            p99_tpot_ms: tpot.p99,
            mean_itl_ms: itl.mean,
            median_itl_ms: itl.median,
            std_itl_ms: itl.std,
            p90_itl_ms: itl.p90,
            p99_itl_ms: itl.p99,
            mean_e2el_ms: e2el.mean,
            median_e2el_ms: e2el.median,
            std_e2el_ms: e2el.std,
            p90_e2el_ms: e2el.p90,
            p99_e2el_ms: e2el.p99,
            cache_hit_rate: if input > 0 {
                cached as f64 / input as f64
            } else {
                0.0
            },
            replica_share,
            max_mean_share,
            errors,
            route_branches,
            cross_region_fraction,
            regions,
            classes: classes(records),
            ..Summary::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ErrorKind;

    /// A request sent at `start`, first token at `start + ttft`, then one token every `gap`.
    #[allow(clippy::too_many_arguments)]
    fn timeline(
        id: u64,
        start: f64,
        ttft: f64,
        gap: f64,
        out: u32,
        prompt: u32,
        cached: u32,
        rep: &str,
    ) -> RequestRecord {
        let itls: Vec<f32> = (1..out).map(|_| gap as f32).collect();
        RequestRecord {
            id,
            replica: Some(rep.into()),
            start_ms: start,
            ttft_ms: Some(ttft),
            e2el_ms: ttft + gap * (out - 1) as f64,
            itls_ms: itls,
            prompt_tokens: prompt,
            output_tokens: out,
            cached_tokens: cached,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn vllm_definitions_on_hand_built_timelines() {
        let recs = vec![
            // 100 ms TTFT, 10 tokens 20 ms apart: E2E 280, TPOT 20.
            timeline(0, 0.0, 100.0, 20.0, 10, 1000, 800, "r0"),
            // 300 ms TTFT, 5 tokens 50 ms apart: E2E 500, TPOT 50.
            timeline(1, 500.0, 300.0, 50.0, 5, 3000, 0, "r1"),
            // Single token: no TPOT, no ITL.
            timeline(2, 1000.0, 1000.0, 0.0, 1, 1000, 1000, "r0"),
            RequestRecord {
                id: 3,
                start_ms: 100.0,
                e2el_ms: 50.0,
                prompt_tokens: 7,
                error: Some(ErrorKind::Http5xx),
                ..RequestRecord::default()
            },
        ];
        let slo = Slo {
            ttft_ms: Some(400.0),
            tpot_ms: Some(30.0),
            e2el_ms: None,
        };
        let s = Summary::compute(&recs, &slo);
        assert_eq!((s.completed, s.failed, s.num_prompts), (3, 1, 4));
        // Duration: first send 0 ms .. last completion 2000 ms.
        assert!((s.duration - 2.0).abs() < 1e-12);
        assert!((s.request_throughput - 1.5).abs() < 1e-12);
        assert_eq!(s.total_output_tokens, 16);
        assert!((s.output_throughput - 8.0).abs() < 1e-12);
        assert!((s.total_token_throughput - (5016.0 / 2.0)).abs() < 1e-9);
        assert!((s.mean_ttft_ms - 1400.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.median_ttft_ms, 300.0);
        // numpy percentiles over [100, 300, 1000] and TPOTs [20, 50].
        assert!((s.p99_ttft_ms - (300.0 + 700.0 * 0.98)).abs() < 1e-9);
        assert!((s.p90_ttft_ms - (300.0 + 700.0 * 0.8)).abs() < 1e-9);
        assert!((s.p99_tpot_ms - 49.7).abs() < 1e-9);
        assert!((recs[0].tpot_ms().unwrap() - 20.0).abs() < 1e-12);
        assert_eq!(recs[2].tpot_ms(), None);
        assert_eq!(recs[3].tpot_ms(), None);
        assert_eq!((s.mean_tpot_ms, s.median_tpot_ms), (35.0, 35.0));
        // ITL pooled: 9 gaps of 20 and 4 of 50.
        assert!((s.mean_itl_ms - (9.0 * 20.0 + 4.0 * 50.0) / 13.0).abs() < 1e-6);
        assert_eq!(s.median_itl_ms, 20.0);
        assert!((s.mean_e2el_ms - (280.0 + 500.0 + 1000.0) / 3.0).abs() < 1e-9);
        // Hit rate: (800 + 0 + 1000) / (1000 + 3000 + 1000).
        assert!((s.cache_hit_rate - 0.36).abs() < 1e-12);
        // Goodput: r0 meets both; r1 misses TPOT; r2 misses TTFT.
        assert!((s.request_goodput.unwrap() - 0.5).abs() < 1e-12);
        assert!((s.replica_share["r0"] - 2.0 / 3.0).abs() < 1e-12);
        assert!((s.max_mean_share - (2.0 / 1.5)).abs() < 1e-12);
        assert_eq!(s.errors["http_5xx"], 1);

        let json = serde_json::to_value(&s).unwrap();
        for k in [
            "completed",
            "request_throughput",
            "output_throughput",
            "mean_ttft_ms",
            "median_ttft_ms",
            "p99_ttft_ms",
            "mean_tpot_ms",
            "p99_tpot_ms",
            "mean_itl_ms",
            "mean_e2el_ms",
            "p99_e2el_ms",
            "cache_hit_rate",
            "replica_share",
            "errors",
            "policy",
        ] {
            assert!(json.get(k).is_some(), "missing key {k}");
        }
        assert!(json.get("oracle_hit_rate").is_none());
        assert!(Summary::compute(&recs, &Slo::default())
            .request_goodput
            .is_none());
    }
}
