//! Mooncake FAST'25 trace rows:
//! `{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [..]}`.

use super::error::TraceError;
use serde::Deserialize;
use std::path::Path;

/// Tokens per trace hash id (the trace's block size, not the replica's).
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// One request of a Mooncake trace.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MooncakeRow {
    /// Arrival, milliseconds since the trace start.
    pub timestamp: u64,
    /// Prompt tokens.
    pub input_length: u32,
    /// Output tokens.
    pub output_length: u32,
    /// One chained id per 512-token block of the prompt.
    pub hash_ids: Vec<u64>,
}

/// Parses JSONL text. Blank lines are skipped; every other line must be a valid row whose
/// `hash_ids` has `ceil(input_length / 512)` entries, with non-decreasing timestamps.
pub fn parse_mooncake(path: &Path, text: &str) -> Result<Vec<MooncakeRow>, TraceError> {
    let mut rows = Vec::new();
    let mut last_ts = 0u64;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let row: MooncakeRow = serde_json::from_str(line)
            .map_err(|e| TraceError::line(path, lineno, format!("invalid Mooncake row: {e}")))?;
        let want = row.input_length.div_ceil(MOONCAKE_BLOCK_TOKENS) as usize;
        if row.hash_ids.len() != want {
            return Err(TraceError::line(
                path,
                lineno,
                format!(
                    "input_length {} needs {want} hash ids of {MOONCAKE_BLOCK_TOKENS} tokens, found {}",
                    row.input_length,
                    row.hash_ids.len()
                ),
            ));
        }
        if row.timestamp < last_ts {
            return Err(TraceError::line(
                path,
                lineno,
                format!(
                    "timestamp {} goes back in time (previous {last_ts})",
                    row.timestamp
                ),
            ));
        }
        last_ts = row.timestamp;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_and_names_the_bad_line() {
        let p = Path::new("t.jsonl");
        let good = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n\n\
                    {\"timestamp\": 10, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [0]}\n";
        let rows = parse_mooncake(p, good).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].hash_ids, vec![0, 1]);
        assert_eq!(rows[1].timestamp, 10);

        let bad =
            format!("{good}{{\"timestamp\": 11, \"input_length\": 5, \"output_length\": }}\n");
        let err = parse_mooncake(p, &bad).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, TraceError::Line { line: 4, .. }), "{msg}");
        assert!(msg.starts_with("t.jsonl:4: invalid Mooncake row"), "{msg}");

        let wrong_len = "{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 5, \"hash_ids\": [0, 1]}";
        let err = parse_mooncake(p, wrong_len).unwrap_err().to_string();
        assert!(
            err.contains(":1:") && err.contains("needs 3 hash ids"),
            "{err}"
        );

        let backwards = "{\"timestamp\": 9, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n\
                         {\"timestamp\": 3, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}";
        assert!(matches!(
            parse_mooncake(p, backwards),
            Err(TraceError::Line { line: 2, .. })
        ));
        assert!(matches!(
            parse_mooncake(p, "\n\n"),
            Err(TraceError::Empty { .. })
        ));
    }

    #[test]
    fn parses_the_shared_synthetic_trace_when_present() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/workloads/mooncake_synthetic_trace.jsonl");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let rows = parse_mooncake(&path, &text).unwrap();
        assert_eq!(rows.len(), 3993);
        assert!(rows.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    }
}
