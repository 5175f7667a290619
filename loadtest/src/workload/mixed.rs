//! Mixed short chats and long prompts (a prefill/decode disaggregation benchmark): mostly short
//! chats (a common system prompt plus a short user message, `--short-output-len` tokens
//! streamed back) and, every `--long-every`-th request, a long prompt (the same system prompt
//! plus `--long-input-len` tokens of text no other request has, `--long-output-len` tokens
//! back). Each request carries its class (`short` / `long`) into the report. Arrivals: one
//! stream for both classes (`--request-rate`, default [`DEFAULT_RATE`], or `--concurrency`).

use super::args::WorkloadArgs;
use super::spec::{RequestSpec, WorkloadError};
use crate::prompt::{Prompt, Segment};
use crate::rng::{mix, seeded, Draw};

/// Class label of a short chat.
pub const CLASS_SHORT: &str = "short";
/// Class label of a long prompt.
pub const CLASS_LONG: &str = "long";

/// Requests generated when neither `--num-requests` nor `--duration` says how many.
pub const DEFAULT_REQUESTS: usize = 120;
/// Open-loop rate (requests/s) when neither `--request-rate` nor `--concurrency` is given.
pub const DEFAULT_RATE: f64 = 1.0;
/// Default common system prompt, tokens.
pub const DEFAULT_SYSTEM_LEN: u32 = 16;

const TAG_SYSTEM: u64 = 0x41A0;
const TAG_SHORT: u64 = 0x41A1;
const TAG_LONG: u64 = 0x41A2;
const TAG_LENGTHS: u64 = 0x41A3;
/// Closed loop for a `--duration` without `--num-requests`: more than any run can send.
const CLOSED_LOOP_REQUESTS: usize = 100_000;

/// True when request `i` (send order) is a long prompt: every `long_every`-th, none for 0.
pub fn is_long(i: usize, long_every: u32) -> bool {
    long_every > 0 && (i + 1).is_multiple_of(long_every as usize)
}

/// Inclusive bounds of a short chat's user message: `--short-input-len` +/- the range ratio.
pub fn short_bounds(args: &WorkloadArgs) -> (u32, u32) {
    let len = f64::from(args.short_input_len);
    let r = args.short_range_ratio;
    let lo = (len * (1.0 - r)).round().max(1.0) as u32;
    let hi = (len * (1.0 + r)).round().max(lo as f64) as u32;
    (lo, hi)
}

/// How many requests to generate: `--num-requests`, else enough to cover `--duration`, else
/// [`DEFAULT_REQUESTS`].
fn count(args: &WorkloadArgs) -> usize {
    if let Some(n) = args.num_requests {
        return n;
    }
    match (args.duration, args.concurrency) {
        (Some(_), Some(_)) => CLOSED_LOOP_REQUESTS,
        (Some(d), None) => {
            let rate = args.request_rate.unwrap_or(DEFAULT_RATE);
            if rate.is_finite() {
                // Twice the expected count: a Poisson stream almost never runs past it.
                (rate * d * 2.0).ceil() as usize + 16
            } else {
                DEFAULT_REQUESTS
            }
        }
        (None, _) => DEFAULT_REQUESTS,
    }
}

/// Builds the requests (arrival times are assigned later).
pub(super) fn build(args: &WorkloadArgs, seed: u64) -> Result<Vec<RequestSpec>, WorkloadError> {
    let sys = args.system_prompt_len.unwrap_or(DEFAULT_SYSTEM_LEN);
    if args.short_input_len == 0
        || args.long_input_len == 0
        || args.short_output_len == 0
        || args.long_output_len == 0
    {
        return Err(WorkloadError::Invalid(
            "mixed: input and output lengths must be > 0".into(),
        ));
    }
    if !(0.0..1.0).contains(&args.short_range_ratio) {
        return Err(WorkloadError::Invalid(format!(
            "--short-range-ratio must be in [0, 1), got {}",
            args.short_range_ratio
        )));
    }
    let (lo, hi) = short_bounds(args);
    let system = Segment::new(&[seed, TAG_SYSTEM], sys, true);
    let mut lengths = seeded(mix(&[seed, TAG_LENGTHS]));
    let n = count(args);
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let long = is_long(i, args.long_every);
        let (user, output_tokens, class) = if long {
            let seg = Segment::new(&[seed, TAG_LONG, i as u64], args.long_input_len, false);
            (seg, args.long_output_len, CLASS_LONG)
        } else {
            let len = lengths.range_inclusive(u64::from(lo), u64::from(hi)) as u32;
            let seg = Segment::new(&[seed, TAG_SHORT, i as u64], len, false);
            (seg, args.short_output_len, CLASS_SHORT)
        };
        let segments = if sys > 0 {
            vec![system, user]
        } else {
            vec![user]
        };
        v.push(RequestSpec {
            id: 0,
            group: i as u64,
            arrival_ms: 0.0,
            prompt: Prompt { segments },
            output_tokens,
            class: Some(class),
            system_segments: usize::from(sys > 0),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{build, test_args::args, LoadShape};

    #[test]
    fn every_kth_is_long_and_lengths_stay_in_bounds() {
        let w = build(
            &args(&[
                "--workload",
                "mixed",
                "--num-requests",
                "80",
                "--long-every",
                "5",
            ]),
            7,
        )
        .unwrap();
        assert_eq!(w.requests.len(), 80);
        let long: Vec<_> = w
            .requests
            .iter()
            .filter(|r| r.class == Some(CLASS_LONG))
            .collect();
        assert_eq!(long.len(), 16);
        assert!(long.iter().all(|r| r.id % 5 == 4));
        let sys = DEFAULT_SYSTEM_LEN;
        for r in &w.requests {
            assert_eq!(r.system_segments, 1);
            assert_eq!(r.prompt.segments[0], w.requests[0].prompt.segments[0]);
            if r.class == Some(CLASS_LONG) {
                assert_eq!(r.prompt_tokens(), sys + 2048);
                assert_eq!(r.output_tokens, 16);
            } else {
                assert_eq!(r.class, Some(CLASS_SHORT));
                // 48 +/- 50% user tokens after the system prompt: 40..88 in all.
                assert!((sys + 24..=sys + 72).contains(&r.prompt_tokens()));
                assert_eq!(r.output_tokens, 64);
            }
        }
        let short_lens: std::collections::BTreeSet<u32> =
            w.requests.iter().map(|r| r.prompt_tokens()).collect();
        assert!(short_lens.len() > 10, "short lengths do not vary");
        // Long prompts share nothing beyond the system prompt.
        let (a, b) = (long[0].prompt.token_ids(), long[1].prompt.token_ids());
        let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        assert!(
            common < sys as usize + 4,
            "long prompts share {common} tokens"
        );
        // Open loop at the default rate.
        assert_eq!(w.shape, LoadShape::Poisson { rate: DEFAULT_RATE });
    }

    #[test]
    fn same_seed_same_requests_other_seed_differs() {
        let flags = ["--workload", "mixed", "--request-rate", "2"];
        let a = build(&args(&flags), 3).unwrap();
        let b = build(&args(&flags), 3).unwrap();
        let c = build(&args(&flags), 4).unwrap();
        assert_eq!(a.requests.len(), DEFAULT_REQUESTS);
        let same = |x: &crate::workload::Workload, y: &crate::workload::Workload| {
            x.requests.iter().zip(&y.requests).all(|(p, q)| {
                p.prompt == q.prompt && p.arrival_ms == q.arrival_ms && p.class == q.class
            })
        };
        assert!(same(&a, &b));
        assert!(!same(&a, &c));
        assert_eq!(a.shape, LoadShape::Poisson { rate: 2.0 });
    }

    #[test]
    fn knobs_and_their_limits() {
        let w = build(
            &args(&[
                "--workload",
                "mixed",
                "--long-every",
                "0",
                "--system-prompt-len",
                "0",
                "--short-input-len",
                "10",
                "--short-range-ratio",
                "0",
                "--duration",
                "30",
                "--request-rate",
                "2",
            ]),
            1,
        )
        .unwrap();
        assert!(w.requests.iter().all(|r| r.class == Some(CLASS_SHORT)));
        assert!(w
            .requests
            .iter()
            .all(|r| r.prompt_tokens() == 10 && r.system_segments == 0));
        // Enough requests for 30 s at 2/s, all within the duration.
        assert!(w.requests.len() > 40, "{}", w.requests.len());
        assert!(w.requests.iter().all(|r| r.arrival_ms <= 30_000.0));
        assert!(build(
            &args(&["--workload", "mixed", "--short-range-ratio", "1.5"]),
            1
        )
        .is_err());
        assert!(build(&args(&["--workload", "mixed", "--long-output-len", "0"]), 1).is_err());
        let closed = build(&args(&["--workload", "mixed", "--concurrency", "4"]), 1).unwrap();
        assert_eq!(closed.shape, LoadShape::Closed { concurrency: 4 });
    }
}
