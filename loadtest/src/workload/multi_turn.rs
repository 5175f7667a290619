//! Multi-round QA (vLLM production-stack shape): every user shares one system prompt, has its
//! own context, and each round appends the previous question and answer to the history.
//! Requests are issued round-major (all users' round 1, then round 2, ...).

use super::args::WorkloadArgs;
use super::spec::{RequestSpec, WorkloadError};
use crate::prompt::{Prompt, Segment};

const TAG_SYSTEM: u64 = 0x3117;
const TAG_HISTORY: u64 = 0x3118;
const TAG_QUESTION: u64 = 0x3119;
const TAG_ANSWER: u64 = 0x311A;

/// Builds the requests (arrival times are assigned later).
pub(super) fn build(args: &WorkloadArgs, seed: u64) -> Result<Vec<RequestSpec>, WorkloadError> {
    let sys = args.system_prompt_len.unwrap_or(1000);
    let q = args.question_len.unwrap_or(64);
    let answer = args.output_len.unwrap_or(100);
    if args.users == 0 || args.rounds == 0 || q == 0 || answer == 0 {
        return Err(WorkloadError::Invalid(
            "users, rounds, question and answer lengths must be > 0".into(),
        ));
    }
    let system = Segment::new(&[seed, TAG_SYSTEM], sys, true);
    let mut v = Vec::with_capacity((args.users * args.rounds) as usize);
    for round in 0..args.rounds as u64 {
        for user in 0..args.users as u64 {
            let mut segments = Vec::with_capacity(3 + 2 * round as usize);
            if sys > 0 {
                segments.push(system);
            }
            if args.history_len > 0 {
                segments.push(Segment::new(
                    &[seed, TAG_HISTORY, user],
                    args.history_len,
                    true,
                ));
            }
            for past in 0..round {
                segments.push(Segment::new(&[seed, TAG_QUESTION, user, past], q, true));
                segments.push(Segment::new(&[seed, TAG_ANSWER, user, past], answer, true));
            }
            segments.push(Segment::new(&[seed, TAG_QUESTION, user, round], q, true));
            v.push(RequestSpec {
                id: 0,
                group: user,
                arrival_ms: 0.0,
                prompt: Prompt { segments },
                output_tokens: answer,
                class: None,
                system_segments: 0,
            });
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use crate::workload::{build, test_args::args};

    #[test]
    fn history_grows_and_extends_the_previous_round() {
        let w = build(
            &args(&["--workload", "multi-turn", "--users", "3", "--rounds", "2"]),
            5,
        )
        .unwrap();
        assert_eq!(w.requests.len(), 6);
        let r1 = &w.requests[1]; // user 1, round 0
        let r2 = &w.requests[4]; // user 1, round 1
        assert_eq!((r1.group, r2.group), (1, 1));
        assert_eq!(r1.prompt_tokens(), 1000 + 2000 + 64);
        assert_eq!(r2.prompt_tokens(), 1000 + 2000 + 64 + 100 + 64);
        assert_eq!(r2.prompt.segments[..3], r1.prompt.segments[..3]);
        assert_eq!(r1.prompt.segments[0], w.requests[0].prompt.segments[0]);
        assert_ne!(r1.prompt.segments[1], w.requests[0].prompt.segments[1]);
    }
}
