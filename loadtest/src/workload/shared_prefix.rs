//! SGLang's generated-shared-prefix workload: `groups` system prompts, each followed by
//! `prompts_per_group` unique questions; shuffled unless `--ordered`.

use super::args::WorkloadArgs;
use super::spec::{RequestSpec, WorkloadError};
use crate::prompt::{Prompt, Segment};
use crate::rng::{mix, seeded, Draw};

const TAG_SYSTEM: u64 = 0x5157;
const TAG_QUESTION: u64 = 0x5158;

/// Builds the requests (arrival times are assigned later).
pub(super) fn build(args: &WorkloadArgs, seed: u64) -> Result<Vec<RequestSpec>, WorkloadError> {
    let sys = args.system_prompt_len.unwrap_or(2048);
    let q = args.question_len.unwrap_or(128);
    let out = args.output_len.unwrap_or(256);
    if args.groups == 0 || args.prompts_per_group == 0 || q == 0 || out == 0 {
        return Err(WorkloadError::Invalid(
            "groups, prompts per group, question and output lengths must be > 0".into(),
        ));
    }
    let mut v = Vec::with_capacity((args.groups * args.prompts_per_group) as usize);
    for g in 0..args.groups as u64 {
        let system = Segment::new(&[seed, TAG_SYSTEM, g], sys, true);
        for i in 0..args.prompts_per_group as u64 {
            let question = Segment::new(&[seed, TAG_QUESTION, g, i], q, false);
            let segments = if sys > 0 {
                vec![system, question]
            } else {
                vec![question]
            };
            v.push(RequestSpec {
                id: 0,
                group: g,
                arrival_ms: 0.0,
                prompt: Prompt { segments },
                output_tokens: out,
                class: None,
                system_segments: 0,
            });
        }
    }
    if !args.ordered {
        seeded(mix(&[seed, 0x5AFF])).shuffle(&mut v);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use crate::workload::{build, test_args::args};

    #[test]
    fn defaults_match_sglang_and_groups_share_prefixes() {
        let w = build(&args(&["--workload", "shared-prefix"]), 1).unwrap();
        assert_eq!(w.requests.len(), 64 * 16);
        let r = &w.requests[0];
        assert_eq!(r.prompt_tokens(), 2048 + 128);
        assert_eq!(r.output_tokens, 256);
        let same: Vec<_> = w.requests.iter().filter(|x| x.group == r.group).collect();
        assert_eq!(same.len(), 16);
        assert!(same
            .iter()
            .all(|x| x.prompt.segments[0] == r.prompt.segments[0]));
        let other = w.requests.iter().find(|x| x.group != r.group).unwrap();
        assert_ne!(other.prompt.segments[0].key, r.prompt.segments[0].key);
        // Shuffled: the first 16 are not all one group.
        assert!(w.requests[..16]
            .iter()
            .any(|x| x.group != w.requests[0].group));
        let again = build(&args(&["--workload", "shared-prefix"]), 1).unwrap();
        assert!(again
            .requests
            .iter()
            .zip(&w.requests)
            .all(|(a, b)| a.prompt == b.prompt));
    }
}
