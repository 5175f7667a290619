//! Arrival processes: open loop (Poisson, trace timestamps, all at once) or closed loop.

use super::args::WorkloadArgs;
use super::spec::{RequestSpec, WorkloadError};
use crate::rng::{mix, seeded, Draw};

/// How requests are issued.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LoadShape {
    /// Open loop, every request at t = 0 (vLLM's `--request-rate inf`).
    Burst,
    /// Open loop, Poisson arrivals.
    Poisson {
        /// Mean requests per second.
        rate: f64,
    },
    /// Open loop, the trace's timestamps multiplied by `time_scale`.
    Trace {
        /// Timestamp multiplier.
        time_scale: f64,
    },
    /// Closed loop with a fixed number of requests in flight.
    Closed {
        /// Requests in flight.
        concurrency: usize,
    },
}

impl LoadShape {
    /// Picks the shape from the flags: concurrency wins, then an explicit rate, then the
    /// trace's own timestamps, else a burst.
    pub fn from_args(args: &WorkloadArgs, has_trace_times: bool) -> Result<Self, WorkloadError> {
        if let Some(c) = args.concurrency {
            if c == 0 {
                return Err(WorkloadError::Invalid(
                    "--concurrency must be at least 1".into(),
                ));
            }
            return Ok(Self::Closed { concurrency: c });
        }
        if let Some(rate) = args.request_rate {
            if rate.is_infinite() && rate > 0.0 {
                return Ok(Self::Burst);
            }
            if rate <= 0.0 || rate.is_nan() {
                return Err(WorkloadError::Invalid(format!(
                    "--request-rate must be > 0, got {rate}"
                )));
            }
            return Ok(Self::Poisson { rate });
        }
        if has_trace_times {
            return Ok(Self::Trace {
                time_scale: args.time_scale,
            });
        }
        Ok(Self::Burst)
    }

    /// True unless closed loop.
    pub fn is_open_loop(&self) -> bool {
        !matches!(self, Self::Closed { .. })
    }
}

/// Sets `arrival_ms` on every request (in order) for the shape. Trace workloads arrive with
/// their trace offsets already in `arrival_ms`.
pub fn assign_arrivals(requests: &mut [RequestSpec], shape: &LoadShape, seed: u64) {
    match *shape {
        LoadShape::Burst | LoadShape::Closed { .. } => {
            requests.iter_mut().for_each(|r| r.arrival_ms = 0.0)
        }
        LoadShape::Trace { time_scale } => {
            requests.iter_mut().for_each(|r| r.arrival_ms *= time_scale)
        }
        LoadShape::Poisson { rate } => {
            let mut rng = seeded(mix(&[seed, 0xA77])); // arrivals stream, independent of content
            let mut t = 0.0;
            for r in requests.iter_mut() {
                r.arrival_ms = t;
                t += rng.exp(1000.0 / rate);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Prompt;

    fn reqs(n: usize) -> Vec<RequestSpec> {
        (0..n)
            .map(|i| RequestSpec {
                id: i as u64,
                group: 0,
                arrival_ms: i as f64 * 10.0,
                prompt: Prompt::default(),
                output_tokens: 1,
                class: None,
                system_segments: 0,
            })
            .collect()
    }

    #[test]
    fn poisson_has_the_requested_rate_and_trace_scales() {
        let mut r = reqs(20_000);
        assign_arrivals(&mut r, &LoadShape::Poisson { rate: 50.0 }, 3);
        assert!(r.windows(2).all(|w| w[0].arrival_ms <= w[1].arrival_ms));
        let span_s = r.last().unwrap().arrival_ms / 1000.0;
        let rate = 20_000.0 / span_s;
        assert!((rate - 50.0).abs() < 2.0, "rate {rate}");

        let mut t = reqs(3);
        assign_arrivals(&mut t, &LoadShape::Trace { time_scale: 0.5 }, 0);
        assert_eq!(
            t.iter().map(|r| r.arrival_ms).collect::<Vec<_>>(),
            vec![0.0, 5.0, 10.0]
        );
    }
}
