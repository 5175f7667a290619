//! SVG plots with plotters (the SVG backend writes text as `<text>` elements, so no system
//! fonts are needed): TTFT CDF per run, output throughput and cache hit rate over time, and
//! for a rollout the TTFT p99 per window around its start.

use super::RunReport;
use crate::metrics::timeseries::{over_time, Bucket};
use anyhow::{anyhow, Context};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes `ttft_cdf.svg`, `throughput.svg` and `hit_rate.svg` into `dir`; returns the paths.
pub fn write_plots(dir: &Path, runs: &[RunReport]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cdfs = Vec::new();
    let mut series: Vec<(String, Vec<Bucket>)> = Vec::new();
    for run in runs {
        let mut t: Vec<f64> = run
            .records
            .iter()
            .filter(|r| r.ok())
            .filter_map(|r| r.ttft_ms)
            .collect();
        t.sort_by(f64::total_cmp);
        let n = t.len().max(1) as f64;
        let pts: Vec<(f64, f64)> = t
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, (i + 1) as f64 / n))
            .collect();
        cdfs.push((run.summary.policy.clone(), pts));
        series.push((run.summary.policy.clone(), over_time(&run.records, 60, 1.0)));
    }
    let p1 = dir.join("ttft_cdf.svg");
    line_chart(&p1, "TTFT CDF", "TTFT (ms)", "fraction of requests", &cdfs)?;
    let thr: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(n, b)| {
            (
                n.clone(),
                b.iter().map(|b| (b.t_s, b.output_throughput)).collect(),
            )
        })
        .collect();
    let p2 = dir.join("throughput.svg");
    line_chart(
        &p2,
        "Output throughput over time",
        "time (s)",
        "output tokens/s",
        &thr,
    )?;
    let hit: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(n, b)| {
            (
                n.clone(),
                b.iter()
                    .map(|b| (b.t_s, b.cache_hit_rate * 100.0))
                    .collect(),
            )
        })
        .collect();
    let p3 = dir.join("hit_rate.svg");
    line_chart(
        &p3,
        "Cache hit rate over time",
        "time (s)",
        "hit rate (%)",
        &hit,
    )?;
    let mut paths = vec![p1, p2, p3];
    let windows: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .filter(|r| !r.summary.windows.is_empty())
        .map(|r| {
            let pts = r.summary.windows.iter().map(|w| (w.t_s, w.p99_ttft_ms));
            (r.summary.policy.clone(), pts.collect())
        })
        .collect();
    if !windows.is_empty() {
        let p4 = dir.join("rollout_ttft_p99.svg");
        line_chart(
            &p4,
            "TTFT p99 per window around the rollout start",
            "window start, s from the rollout start",
            "TTFT p99 (ms)",
            &windows,
        )?;
        paths.push(p4);
    }
    Ok(paths)
}

fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let max_x = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.02;
    let min_x = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .fold(0.0_f64, f64::min);
    let max_y = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.05;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)
        .map_err(|e| anyhow!("plot {}: {e}", path.display()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(min_x..max_x, 0.0..max_y)
        .map_err(|e| anyhow!("plot {}: {e}", path.display()))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| anyhow!("plot {}: {e}", path.display()))?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| anyhow!("plot {}: {e}", path.display()))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| anyhow!("plot {}: {e}", path.display()))?;
    root.present()
        .map_err(|e| anyhow!("plot {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{RequestRecord, Summary};

    #[test]
    fn writes_three_svgs_with_a_line_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let recs: Vec<RequestRecord> = (0..20)
            .map(|i| RequestRecord {
                id: i,
                start_ms: i as f64 * 100.0,
                ttft_ms: Some(10.0 + i as f64),
                e2el_ms: 500.0,
                output_tokens: 10,
                prompt_tokens: 100,
                cached_tokens: 50,
                ..RequestRecord::default()
            })
            .collect();
        let runs = vec![
            RunReport {
                summary: Summary {
                    policy: "warm".into(),
                    ..Summary::default()
                },
                records: recs.clone(),
            },
            RunReport {
                summary: Summary {
                    policy: "round_robin".into(),
                    ..Summary::default()
                },
                records: recs,
            },
        ];
        let paths = write_plots(dir.path(), &runs).unwrap();
        assert_eq!(paths.len(), 3);
        for p in paths {
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(
                svg.starts_with("<svg") || svg.contains("<svg"),
                "{}",
                p.display()
            );
            assert!(
                svg.contains("round_robin") && svg.contains("<polyline"),
                "{}",
                p.display()
            );
        }
    }
}
