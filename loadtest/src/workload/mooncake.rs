//! Mooncake trace replay: each hash id becomes a deterministic run of 512 tokens (divided by
//! `--token-scale`), seeded by the id, so equal ids give equal tokens; the last block is cut
//! to the remaining length.

use super::args::WorkloadArgs;
use super::spec::{scale_len, RequestSpec, WorkloadError};
use crate::prompt::{Prompt, Segment};
use crate::trace::{parse_mooncake, read_trace_text, MOONCAKE_BLOCK_TOKENS};
use std::path::Path;

const TAG_BLOCK: u64 = 0x300C;

/// Builds the requests with trace offsets (ms since the first used row) in `arrival_ms`.
pub(super) fn build(args: &WorkloadArgs, path: &Path) -> Result<Vec<RequestSpec>, WorkloadError> {
    let rows = parse_mooncake(path, &read_trace_text(path)?)?;
    let start = args.start_index.min(rows.len());
    let t0 = rows.get(start).map_or(0, |r| r.timestamp);
    let full = scale_len(MOONCAKE_BLOCK_TOKENS, args.token_scale);
    let v = rows[start..]
        .iter()
        .map(|row| {
            let n = row.hash_ids.len();
            let segments = row
                .hash_ids
                .iter()
                .enumerate()
                .map(|(i, &id)| {
                    let tokens = if i + 1 == n {
                        let rest = row.input_length - MOONCAKE_BLOCK_TOKENS * (n as u32 - 1);
                        if rest == MOONCAKE_BLOCK_TOKENS {
                            full
                        } else {
                            scale_len(rest, args.token_scale)
                        }
                    } else {
                        full
                    };
                    Segment::new(&[TAG_BLOCK, id], tokens, true)
                })
                .collect();
            RequestSpec {
                id: 0,
                group: row.hash_ids.first().copied().unwrap_or(0),
                arrival_ms: (row.timestamp - t0) as f64,
                prompt: Prompt { segments },
                output_tokens: scale_len(row.output_length, args.token_scale),
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
    fn hash_ids_map_to_equal_blocks_and_scale() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "{{\"timestamp\": 100, \"input_length\": 1100, \"output_length\": 40, \"hash_ids\": [7, 8, 9]}}").unwrap();
        writeln!(f, "{{\"timestamp\": 300, \"input_length\": 1024, \"output_length\": 8, \"hash_ids\": [7, 8]}}").unwrap();
        let path = f.path().to_str().unwrap().to_string();
        let w = build(&args(&["--workload", "mooncake", "--trace", &path]), 0).unwrap();
        let (a, b) = (&w.requests[0], &w.requests[1]);
        assert_eq!(a.prompt_tokens(), 1100);
        assert_eq!(b.prompt_tokens(), 1024);
        assert_eq!(a.prompt.segments[..2], b.prompt.segments[..2]);
        assert_eq!(a.prompt.token_ids()[..1024], b.prompt.token_ids()[..]);
        assert_eq!((a.arrival_ms, b.arrival_ms), (0.0, 200.0));

        let w = build(
            &args(&[
                "--workload",
                "mooncake",
                "--trace",
                &path,
                "--token-scale",
                "8",
                "--time-scale",
                "0.5",
            ]),
            0,
        )
        .unwrap();
        assert_eq!(w.requests[0].prompt_tokens(), 64 + 64 + 10);
        assert_eq!(w.requests[0].output_tokens, 5);
        assert_eq!(w.requests[1].arrival_ms, 100.0);
    }
}
