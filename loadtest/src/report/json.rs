//! JSON outputs: the summary array (`--json`) and per-request lines (`--requests-jsonl`).

use super::RunReport;
use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// Writes every run's summary as one JSON array.
pub fn write_summaries(path: &Path, runs: &[RunReport]) -> anyhow::Result<()> {
    let arr: Vec<&crate::metrics::Summary> = runs.iter().map(|r| &r.summary).collect();
    let text = serde_json::to_string_pretty(&arr)?;
    create_parent(path)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Writes one JSON object per request, each with the run's `policy`.
pub fn write_requests(path: &Path, runs: &[RunReport]) -> anyhow::Result<()> {
    create_parent(path)?;
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    for run in runs {
        for r in &run.records {
            let mut v = serde_json::to_value(r)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("policy".into(), run.summary.policy.clone().into());
                o.insert("tpot_ms".into(), r.tpot_ms().into());
            }
            serde_json::to_writer(&mut w, &v)?;
            w.write_all(b"\n")?;
        }
    }
    w.flush()?;
    Ok(())
}

fn create_parent(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{RequestRecord, Summary};

    #[test]
    fn array_with_policy_keys_and_one_line_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let runs = vec![
            RunReport {
                summary: Summary {
                    policy: "warm".into(),
                    completed: 1,
                    ..Summary::default()
                },
                records: vec![RequestRecord {
                    id: 0,
                    ttft_ms: Some(1.0),
                    output_tokens: 3,
                    e2el_ms: 5.0,
                    ..RequestRecord::default()
                }],
            },
            RunReport {
                summary: Summary {
                    policy: "round_robin".into(),
                    ..Summary::default()
                },
                records: vec![],
            },
        ];
        let j = dir.path().join("sub/out.json");
        write_summaries(&j, &runs).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[1]["policy"], "round_robin");
        assert_eq!(v[0]["completed"], 1);
        let l = dir.path().join("req.jsonl");
        write_requests(&l, &runs).unwrap();
        let text = std::fs::read_to_string(&l).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["policy"], "warm");
        assert_eq!(line["tpot_ms"], 2.0);
        assert_eq!(text.lines().count(), 1);
    }
}
