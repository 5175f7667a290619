//! Offered load against what a simulated cluster can serve, estimated before a run, so an
//! overloaded configuration (say a GPU-scale trace on CPU replicas) is named at once instead
//! of grinding through hours of virtual queueing.
//!
//! The model is the simulator's own cost model ([`CostProfile`]) run at steady state: a
//! replica spends `uncached prompt tokens / prefill rate` on prefill and `decode_ms(b) / b`
//! per output token on decode at batch `b`, where `b` is the profile's `max_batch` capped
//! by how many average requests fit in its KV capacity. Utilisation is the sum of the two
//! shares over the replicas; above 1 queues grow without bound. It is optimistic (full
//! batches, the oracle's hit rate, no step overheads), so a warning is never a false alarm.

use super::profile::CostProfile;
use crate::workload::{LoadShape, Workload};
use std::fmt::Write;

/// Utilisation a suggested configuration is sized for (headroom for bursts).
pub const TARGET_UTILISATION: f64 = 0.8;

/// What a workload asks for, per second of its arrival span.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OfferedLoad {
    /// First to last arrival, seconds.
    pub span_s: f64,
    /// Requests.
    pub requests: usize,
    /// Prompt tokens per second.
    pub prompt_tokens_per_s: f64,
    /// Output tokens per second.
    pub output_tokens_per_s: f64,
    /// Mean prompt tokens per request.
    pub mean_prompt_tokens: f64,
    /// Mean output tokens per request.
    pub mean_output_tokens: f64,
}

impl OfferedLoad {
    /// The load of an open-loop workload with an arrival span; `None` for a closed loop (it
    /// cannot overload: it waits for completions) or a burst (no rate: all at t = 0).
    pub fn of(w: &Workload) -> Option<Self> {
        if !w.shape.is_open_loop() || w.requests.is_empty() {
            return None;
        }
        let (lo, hi) = w
            .requests
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r.arrival_ms), hi.max(r.arrival_ms))
            });
        let span_s = (hi - lo) / 1000.0;
        if span_s <= 0.0 {
            return None;
        }
        let prompt: f64 = w
            .requests
            .iter()
            .map(|r| f64::from(r.prompt_tokens()))
            .sum();
        let output: f64 = w.requests.iter().map(|r| f64::from(r.output_tokens)).sum();
        let n = w.requests.len() as f64;
        Some(Self {
            span_s,
            requests: w.requests.len(),
            prompt_tokens_per_s: prompt / span_s,
            output_tokens_per_s: output / span_s,
            mean_prompt_tokens: prompt / n,
            mean_output_tokens: output / n,
        })
    }
}

/// One replica of a profile under a given load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplicaRates {
    /// Prefill tokens per second.
    pub prefill_tokens_per_s: f64,
    /// Decode batch the KV capacity and `max_batch` allow for the load's mean request.
    pub decode_batch: u32,
    /// Output tokens per second at that batch.
    pub decode_tokens_per_s: f64,
}

impl ReplicaRates {
    /// The rates of one replica of `p` serving requests the size of `load`'s mean.
    pub fn of(p: &CostProfile, load: &OfferedLoad) -> Self {
        let bs = f64::from(p.block_size.max(1));
        let blocks = ((load.mean_prompt_tokens + load.mean_output_tokens) / bs)
            .ceil()
            .max(1.0);
        let fit = (p.kv_capacity_blocks as f64 / blocks).floor().max(1.0);
        let decode_batch = (fit as u32).clamp(1, p.max_batch.max(1));
        Self {
            prefill_tokens_per_s: p.prefill_tokens_per_s,
            decode_batch,
            decode_tokens_per_s: f64::from(decode_batch) * 1000.0 / p.decode_ms(decode_batch),
        }
    }

    /// Fraction of one replica's time the load takes, with `hit_rate` of prompt tokens cached.
    pub fn utilisation(&self, load: &OfferedLoad, hit_rate: f64) -> f64 {
        let uncached = load.prompt_tokens_per_s * (1.0 - hit_rate.clamp(0.0, 1.0));
        uncached / self.prefill_tokens_per_s + load.output_tokens_per_s / self.decode_tokens_per_s
    }

    /// Replicas that serve the load at [`TARGET_UTILISATION`].
    pub fn replicas_needed(&self, load: &OfferedLoad, hit_rate: f64) -> u32 {
        let n = (self.utilisation(load, hit_rate) / TARGET_UTILISATION).ceil();
        (n.max(1.0)).min(f64::from(u32::MAX)) as u32
    }
}

/// Another profile a warning may suggest.
#[derive(Clone, Debug)]
pub struct Alternative {
    /// How the user names it on the command line (`--profile` value).
    pub path: String,
    /// The profile.
    pub profile: CostProfile,
}

/// The estimate for one configuration.
#[derive(Clone, Debug)]
pub struct LoadEstimate {
    /// The offered load.
    pub load: OfferedLoad,
    /// Hit rate assumed (the oracle's when known, else 0).
    pub hit_rate: f64,
    /// Replicas simulated.
    pub replicas: u32,
    /// Profile name.
    pub profile: String,
    /// One replica's rates.
    pub rates: ReplicaRates,
    /// Offered work / cluster capacity (1 = saturated).
    pub utilisation: f64,
    /// The arrival shape (for the suggestions).
    pub shape: LoadShape,
}

impl LoadEstimate {
    /// Estimates `w` on `replicas` replicas of `p`; `None` when the workload has no rate.
    pub fn of(w: &Workload, p: &CostProfile, replicas: u32, hit_rate: Option<f64>) -> Option<Self> {
        let load = OfferedLoad::of(w)?;
        let hit_rate = hit_rate.unwrap_or(0.0);
        let rates = ReplicaRates::of(p, &load);
        let utilisation = rates.utilisation(&load, hit_rate) / f64::from(replicas.max(1));
        Some(Self {
            load,
            hit_rate,
            replicas,
            profile: p.name.clone(),
            rates,
            utilisation,
            shape: w.shape,
        })
    }

    /// True when the offered load exceeds what the cluster can serve.
    pub fn overloaded(&self) -> bool {
        self.utilisation > 1.0
    }

    /// One line: offered load and capacity.
    pub fn describe(&self) -> String {
        let n = f64::from(self.replicas.max(1));
        format!(
            "offered load {:.1}% of capacity: {} prompt tokens/s ({} uncached at a {:.1}% hit \
             rate) and {} output tokens/s over {:.1} s of arrivals; {} x {} prefill {} \
             tokens/s and decode {} tokens/s (batch {})",
            self.utilisation * 100.0,
            thousands(self.load.prompt_tokens_per_s),
            thousands(self.load.prompt_tokens_per_s * (1.0 - self.hit_rate)),
            self.hit_rate * 100.0,
            thousands(self.load.output_tokens_per_s),
            self.load.span_s,
            self.replicas,
            self.profile,
            thousands(self.rates.prefill_tokens_per_s * n),
            thousands(self.rates.decode_tokens_per_s * n),
            self.rates.decode_batch,
        )
    }

    /// The warning to print before an overloaded run (`None` when it fits): by how much it is
    /// over, and which `--replicas`, `--profile`, or arrival scaling would fit.
    pub fn warning(&self, alternatives: &[Alternative]) -> Option<String> {
        if !self.overloaded() {
            return None;
        }
        let mut s = format!(
            "WARNING: overloaded: the workload offers {:.1}x what {} replica{} of {} can serve \
             ({}). Queues grow without bound: latencies will measure the backlog, not the \
             router, and the run may take a long time.\n  would fit (<= {:.0}% busy): --replicas {}",
            self.utilisation,
            self.replicas,
            if self.replicas == 1 { "" } else { "s" },
            self.profile,
            self.describe(),
            TARGET_UTILISATION * 100.0,
            self.rates.replicas_needed(&self.load, self.hit_rate),
        );
        for alt in alternatives
            .iter()
            .filter(|a| a.profile.name != self.profile)
        {
            let r = ReplicaRates::of(&alt.profile, &self.load);
            let _ = write!(
                s,
                "; --profile {} --replicas {}",
                alt.path,
                r.replicas_needed(&self.load, self.hit_rate)
            );
        }
        let slow_by = self.utilisation / TARGET_UTILISATION;
        match self.shape {
            LoadShape::Trace { time_scale } => {
                let _ = write!(s, "; --time-scale {:.3}", time_scale * slow_by);
            }
            LoadShape::Poisson { rate } => {
                let _ = write!(s, "; --request-rate {:.3}", rate / slow_by);
            }
            LoadShape::Burst | LoadShape::Closed { .. } => {}
        }
        Some(s)
    }
}

/// `12345.6` as `12,346`.
fn thousands(x: f64) -> String {
    let v = x.round().max(0.0) as u64;
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{Prompt, Segment};
    use crate::workload::RequestSpec;

    fn profile() -> CostProfile {
        CostProfile {
            name: "p".into(),
            source: "test".into(),
            block_size: 16,
            kv_capacity_blocks: 1000,
            prefill_tokens_per_s: 1000.0,
            prefill_step_overhead_ms: 0.0,
            decode_step_ms: vec![(1, 10.0), (10, 20.0)],
            max_batch: 10,
            max_prefill_tokens_per_step: 512,
            kv_bytes_per_token: None,
        }
    }

    /// `n` requests of 160 prompt and 10 output tokens, one every `gap_ms`.
    fn workload(n: usize, gap_ms: f64) -> Workload {
        Workload {
            requests: (0..n)
                .map(|i| RequestSpec {
                    id: i as u64,
                    group: 0,
                    arrival_ms: i as f64 * gap_ms,
                    prompt: Prompt {
                        segments: vec![Segment::new(&[i as u64], 160, false)],
                    },
                    output_tokens: 10,
                    class: None,
                    system_segments: 0,
                })
                .collect(),
            shape: LoadShape::Poisson {
                rate: 1000.0 / gap_ms,
            },
            duration_ms: None,
        }
    }

    #[test]
    fn utilisation_adds_prefill_and_decode_shares() {
        // 11 requests over 10 s: 176 prompt tokens/s, 11 output tokens/s.
        let w = workload(11, 1000.0);
        let e = LoadEstimate::of(&w, &profile(), 1, None).unwrap();
        // 170 tokens = 11 blocks per request: 90 fit, capped at max_batch 10.
        assert_eq!(e.rates.decode_batch, 10);
        assert!((e.rates.decode_tokens_per_s - 500.0).abs() < 1e-9);
        let want = 176.0 / 1000.0 + 11.0 / 500.0;
        assert!((e.utilisation - want).abs() < 1e-9, "{}", e.utilisation);
        assert!(!e.overloaded() && e.warning(&[]).is_none());
        // A 50% hit rate halves the prefill share; two replicas halve everything.
        let h = LoadEstimate::of(&w, &profile(), 2, Some(0.5)).unwrap();
        assert!((h.utilisation - (88.0 / 1000.0 + 11.0 / 500.0) / 2.0).abs() < 1e-9);
    }

    #[test]
    fn an_overload_names_the_factor_and_what_would_fit() {
        // 101 requests in 1 s: 16,160 prompt tokens/s on 1,000 tokens/s replicas.
        let w = workload(101, 10.0);
        let e = LoadEstimate::of(&w, &profile(), 2, None).unwrap();
        assert!(e.overloaded());
        let fast = CostProfile {
            name: "fast".into(),
            prefill_tokens_per_s: 100_000.0,
            ..profile()
        };
        let alt = [Alternative {
            path: "fast.json".into(),
            profile: fast,
        }];
        let msg = e.warning(&alt).unwrap();
        // (16.16 + 1010/500) / 2 = 9.09x; 18.18 / 0.8 = 22.7 -> 23 replicas.
        assert!(msg.contains("9.1x what 2 replicas of p"), "{msg}");
        assert!(msg.contains("--replicas 23"), "{msg}");
        // fast: 0.16 + 2.02 = 2.18 -> 2.7 -> 3 replicas; 100/s at 0.8 / 9.09 = 8.8/s.
        assert!(msg.contains("--profile fast.json --replicas 3"), "{msg}");
        assert!(msg.contains("--request-rate 8.801"), "{msg}");
        assert_eq!(thousands(1234567.4), "1,234,567");
    }

    #[test]
    fn no_estimate_without_a_rate() {
        let mut w = workload(5, 0.0);
        assert!(LoadEstimate::of(&w, &profile(), 1, None).is_none());
        w.shape = LoadShape::Closed { concurrency: 2 };
        assert!(OfferedLoad::of(&w).is_none());
    }
}
