//! Azure 2023 replay: the trace's arrival times and token counts, with a synthetic prefix
//! structure (each request is assigned to one of `--azure-groups` shared system prompts that
//! covers `--azure-prefix-fraction` of its prompt; the rest is unique).

use super::args::WorkloadArgs;
use super::spec::{scale_len, RequestSpec, WorkloadError};
use crate::prompt::{Prompt, Segment};
use crate::rng::{mix, seeded, Draw};
use crate::trace::{parse_azure, read_trace_text};
use std::path::Path;

const TAG_PREFIX: u64 = 0xA2;
const TAG_UNIQUE: u64 = 0xA3;

/// Builds the requests with trace offsets (ms since the first used row) in `arrival_ms`.
pub(super) fn build(
    args: &WorkloadArgs,
    path: &Path,
    seed: u64,
) -> Result<Vec<RequestSpec>, WorkloadError> {
    if !(0.0..=1.0).contains(&args.azure_prefix_fraction) || args.azure_groups == 0 {
        return Err(WorkloadError::Invalid(
            "--azure-prefix-fraction must be in [0, 1], --azure-groups > 0".into(),
        ));
    }
    let rows = parse_azure(path, &read_trace_text(path)?)?;
    let start = args.start_index.min(rows.len());
    let t0 = rows.get(start).map_or(0.0, |r| r.offset_ms);
    let mut rng = seeded(mix(&[seed, 0xA2A2]));
    let v = rows[start..]
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let total = scale_len(row.context_tokens, args.token_scale);
            let group = rng.below(args.azure_groups as u64);
            let shared = ((total as f64 * args.azure_prefix_fraction).round() as u32)
                .min(total.saturating_sub(1));
            let mut segments = Vec::with_capacity(2);
            if shared > 0 {
                segments.push(Segment::new(&[seed, TAG_PREFIX, group], shared, true));
            }
            segments.push(Segment::new(
                &[seed, TAG_UNIQUE, i as u64],
                total - shared,
                false,
            ));
            RequestSpec {
                id: 0,
                group,
                arrival_ms: row.offset_ms - t0,
                prompt: Prompt { segments },
                output_tokens: scale_len(row.generated_tokens, args.token_scale),
                class: None,
                system_segments: 0,
            }
        })
        .collect();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use crate::workload::{build, test_args::args};
    use std::io::Write;

    #[test]
    fn lengths_and_arrivals_come_from_the_trace() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "TIMESTAMP,ContextTokens,GeneratedTokens").unwrap();
        writeln!(f, "2023-11-16 18:15:46.5,400,40").unwrap();
        writeln!(f, "2023-11-16 18:15:47.0,200,10").unwrap();
        let path = f.path().to_str().unwrap().to_string();
        let w = build(
            &args(&[
                "--workload",
                "azure",
                "--trace",
                &path,
                "--azure-groups",
                "1",
            ]),
            0,
        )
        .unwrap();
        assert_eq!(w.requests[0].prompt_tokens(), 400);
        assert_eq!(w.requests[1].prompt_tokens(), 200);
        assert_eq!(w.requests[0].output_tokens, 40);
        assert!((w.requests[1].arrival_ms - 500.0).abs() < 1e-6);
        let (a, b) = (
            &w.requests[0].prompt.token_ids(),
            &w.requests[1].prompt.token_ids(),
        );
        assert_eq!(a[..100], b[..100], "one group: the shared prefix is common");
    }
}
