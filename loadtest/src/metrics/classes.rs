//! Per-class figures of a workload whose requests carry a class label (mixed: `short` /
//! `long`): counts and the TTFT, TPOT and ITL distributions of each class's completed
//! requests, with the same definitions as the summary.

use super::record::RequestRecord;
use super::stats::Distribution;
use serde::Serialize;
use std::collections::BTreeMap;

/// One request class. Field names are the JSON keys (vLLM's, as in the summary).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassStats {
    /// Requests of the class.
    pub num_prompts: usize,
    /// Completed ones.
    pub completed: usize,
    /// Failed ones.
    pub failed: usize,
    /// Mean prompt tokens of the completed ones.
    pub mean_input_tokens: f64,
    /// TTFT mean, ms.
    pub mean_ttft_ms: f64,
    /// TTFT median, ms.
    pub median_ttft_ms: f64,
    /// TTFT p90, ms.
    pub p90_ttft_ms: f64,
    /// TTFT p99, ms.
    pub p99_ttft_ms: f64,
    /// TPOT mean, ms.
    pub mean_tpot_ms: f64,
    /// TPOT median, ms.
    pub median_tpot_ms: f64,
    /// TPOT p90, ms.
    pub p90_tpot_ms: f64,
    /// TPOT p99, ms.
    pub p99_tpot_ms: f64,
    /// ITL median (gaps pooled over the class), ms.
    pub median_itl_ms: f64,
    /// ITL p99, ms.
    pub p99_itl_ms: f64,
    /// E2E latency median, ms.
    pub median_e2el_ms: f64,
    /// E2E latency p99, ms.
    pub p99_e2el_ms: f64,
}

/// Figures per class label; empty when no record carries one (unlabelled records are left
/// out).
pub fn classes(records: &[RequestRecord]) -> BTreeMap<String, ClassStats> {
    let mut by: BTreeMap<&str, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        if let Some(c) = r.class {
            by.entry(c).or_default().push(r);
        }
    }
    by.into_iter()
        .map(|(name, recs)| (name.to_string(), stats(&recs)))
        .collect()
}

fn stats(recs: &[&RequestRecord]) -> ClassStats {
    let ok: Vec<&RequestRecord> = recs.iter().copied().filter(|r| r.ok()).collect();
    let ttft = Distribution::of(&mut ok.iter().filter_map(|r| r.ttft_ms).collect::<Vec<_>>());
    let tpot = Distribution::of(&mut ok.iter().filter_map(|r| r.tpot_ms()).collect::<Vec<_>>());
    let e2el = Distribution::of(&mut ok.iter().map(|r| r.e2el_ms).collect::<Vec<_>>());
    let mut gaps: Vec<f64> = ok
        .iter()
        .flat_map(|r| r.itls_ms.iter().map(|&x| f64::from(x)))
        .collect();
    let itl = Distribution::of(&mut gaps);
    let input: u64 = ok.iter().map(|r| u64::from(r.prompt_tokens)).sum();
    ClassStats {
        num_prompts: recs.len(),
        completed: ok.len(),
        failed: recs.len() - ok.len(),
        mean_input_tokens: input as f64 / ok.len().max(1) as f64,
        mean_ttft_ms: ttft.mean,
        median_ttft_ms: ttft.median,
        p90_ttft_ms: ttft.p90,
        p99_ttft_ms: ttft.p99,
        mean_tpot_ms: tpot.mean,
        median_tpot_ms: tpot.median,
        p90_tpot_ms: tpot.p90,
        p99_tpot_ms: tpot.p99,
        median_itl_ms: itl.median,
        p99_itl_ms: itl.p99,
        median_e2el_ms: e2el.median,
        p99_e2el_ms: e2el.p99,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{ErrorKind, Slo, Summary};

    /// A `class` request: first token at `ttft`, then `out - 1` tokens `gap` apart.
    fn rec(class: &'static str, ttft: f64, out: u32, gap: f32) -> RequestRecord {
        RequestRecord {
            class: Some(class),
            ttft_ms: Some(ttft),
            e2el_ms: ttft + f64::from(gap) * f64::from(out - 1),
            itls_ms: vec![gap; out as usize - 1],
            output_tokens: out,
            prompt_tokens: if class == "long" { 2048 } else { 50 },
            ..RequestRecord::default()
        }
    }

    #[test]
    fn each_class_gets_its_own_ttft_and_tpot() {
        let mut recs = vec![
            rec("short", 100.0, 11, 20.0),
            rec("short", 200.0, 11, 40.0),
            rec("short", 300.0, 11, 60.0),
            rec("long", 2500.0, 5, 10.0),
            rec("long", 3500.0, 5, 30.0),
        ];
        recs.push(RequestRecord {
            class: Some("long"),
            error: Some(ErrorKind::Timeout),
            ..RequestRecord::default()
        });
        recs.push(rec("short", 1.0, 2, 1.0));
        recs.last_mut().unwrap().class = None; // unlabelled: only in the totals

        let by = classes(&recs);
        assert_eq!(by.keys().collect::<Vec<_>>(), vec!["long", "short"]);
        let s = &by["short"];
        assert_eq!((s.num_prompts, s.completed, s.failed), (3, 3, 0));
        assert_eq!((s.median_ttft_ms, s.mean_ttft_ms), (200.0, 200.0));
        // numpy p99 over [100, 200, 300] and TPOTs [20, 40, 60].
        assert!((s.p99_ttft_ms - 298.0).abs() < 1e-9);
        assert_eq!(s.median_tpot_ms, 40.0);
        assert!((s.p99_tpot_ms - 59.6).abs() < 1e-9);
        assert_eq!(s.median_itl_ms, 40.0);
        assert_eq!(s.mean_input_tokens, 50.0);
        let l = &by["long"];
        assert_eq!((l.num_prompts, l.completed, l.failed), (3, 2, 1));
        assert_eq!(l.median_ttft_ms, 3000.0);
        assert!((l.p99_ttft_ms - 3490.0).abs() < 1e-9);
        assert_eq!((l.median_tpot_ms, l.p90_tpot_ms), (20.0, 28.0));
        assert_eq!(l.mean_input_tokens, 2048.0);
        assert!(classes(&[RequestRecord::default()]).is_empty());

        // The summary carries them under `classes`, keeping its overall keys.
        let sum = Summary::compute(&recs, &Slo::default());
        assert_eq!(sum.classes, by);
        assert_eq!(sum.completed, 6);
        let json = serde_json::to_value(&sum).unwrap();
        assert_eq!(json["classes"]["short"]["median_tpot_ms"], 40.0);
        assert_eq!(json["classes"]["long"]["failed"], 1);
        assert!(json.get("p99_ttft_ms").is_some());
        let plain = Summary::compute(&recs[6..], &Slo::default());
        assert!(serde_json::to_value(&plain)
            .unwrap()
            .get("classes")
            .is_none());
    }
}
