//! Azure LLM inference trace 2023 rows: `TIMESTAMP,ContextTokens,GeneratedTokens` with
//! wall-clock timestamps like `2023-11-16 18:15:46.6805900`.

use super::error::TraceError;
use std::path::Path;

/// One request of an Azure trace, with its arrival relative to the first row.
#[derive(Clone, Debug, PartialEq)]
pub struct AzureRow {
    /// Milliseconds since the first row's timestamp.
    pub offset_ms: f64,
    /// Prompt tokens.
    pub context_tokens: u32,
    /// Output tokens.
    pub generated_tokens: u32,
}

/// Parses `YYYY-MM-DD HH:MM:SS[.fffffff]` into milliseconds since 1970-01-01 (UTC, no zone).
pub fn parse_azure_timestamp_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let (date, time) = s.split_once(' ')?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let mo: i64 = d.next()?.parse().ok()?;
    let da: i64 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (time, None),
    };
    let mut t = hms.split(':');
    let h: i64 = t.next()?.parse().ok()?;
    let mi: i64 = t.next()?.parse().ok()?;
    let se: i64 = t.next()?.parse().ok()?;
    if t.next().is_some() || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let frac_s = match frac {
        Some(f) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
            format!("0.{f}").parse::<f64>().ok()?
        }
        Some(_) => return None,
        None => 0.0,
    };
    let days = days_from_civil(y, mo, da);
    Some(((days * 86_400 + h * 3600 + mi * 60 + se) as f64 + frac_s) * 1000.0)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses CSV text with the header `TIMESTAMP,ContextTokens,GeneratedTokens`.
pub fn parse_azure(path: &Path, text: &str) -> Result<Vec<AzureRow>, TraceError> {
    let mut lines = text.lines().enumerate();
    let header = loop {
        match lines.next() {
            Some((_, l)) if l.trim().is_empty() => continue,
            Some((i, l)) => break (i + 1, l.trim()),
            None => {
                return Err(TraceError::Empty {
                    path: path.to_path_buf(),
                })
            }
        }
    };
    let cols: Vec<&str> = header.1.split(',').map(str::trim).collect();
    if cols != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"] {
        return Err(TraceError::line(
            path,
            header.0,
            format!(
                "expected header TIMESTAMP,ContextTokens,GeneratedTokens, found {:?}",
                header.1
            ),
        ));
    }
    let mut rows = Vec::new();
    let mut first: Option<f64> = None;
    let mut last = f64::MIN;
    for (i, line) in lines {
        let lineno = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 3 {
            return Err(TraceError::line(
                path,
                lineno,
                format!("expected 3 fields, found {}", f.len()),
            ));
        }
        let ts = parse_azure_timestamp_ms(f[0])
            .ok_or_else(|| TraceError::line(path, lineno, format!("bad TIMESTAMP {:?}", f[0])))?;
        let ctx: u32 = f[1]
            .parse()
            .map_err(|_| TraceError::line(path, lineno, format!("bad ContextTokens {:?}", f[1])))?;
        let gen: u32 = f[2].parse().map_err(|_| {
            TraceError::line(path, lineno, format!("bad GeneratedTokens {:?}", f[2]))
        })?;
        if ts < last {
            return Err(TraceError::line(
                path,
                lineno,
                "TIMESTAMP goes back in time",
            ));
        }
        last = ts;
        let base = *first.get_or_insert(ts);
        rows.push(AzureRow {
            offset_ms: ts - base,
            context_tokens: ctx,
            generated_tokens: gen,
        });
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
    fn timestamps_parse_to_epoch_millis() {
        assert_eq!(
            parse_azure_timestamp_ms("1970-01-01 00:00:01"),
            Some(1000.0)
        );
        let a = parse_azure_timestamp_ms("2023-11-16 18:15:46.6805900").unwrap();
        let b = parse_azure_timestamp_ms("2023-11-16 18:15:47.1805900").unwrap();
        assert!((b - a - 500.0).abs() < 1e-3);
        // 2023-11-16 is day 19677 since the epoch.
        assert_eq!(
            parse_azure_timestamp_ms("2023-11-16 00:00:00"),
            Some(19_677.0 * 86_400_000.0)
        );
        assert_eq!(parse_azure_timestamp_ms("2023-13-16 00:00:00"), None);
        assert_eq!(parse_azure_timestamp_ms("2023-11-16T00:00:00"), None);
    }

    #[test]
    fn parses_rows_and_names_the_bad_line() {
        let p = Path::new("a.csv");
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                    2023-11-16 18:15:46.6805900,374,44\n\
                    2023-11-16 18:15:50.9951690,396,109\n";
        let rows = parse_azure(p, text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].offset_ms, 0.0);
        assert!((rows[1].offset_ms - 4314.579).abs() < 0.01);
        assert_eq!(rows[1].context_tokens, 396);

        let bad = format!("{text}2023-11-16 18:15:51.0,12x,3\n");
        let err = parse_azure(p, &bad).unwrap_err();
        assert!(matches!(err, TraceError::Line { line: 4, .. }));
        assert!(
            err.to_string().contains("a.csv:4: bad ContextTokens"),
            "{err}"
        );
        let err = parse_azure(p, "time,a,b\n").unwrap_err().to_string();
        assert!(err.contains("a.csv:1: expected header"), "{err}");
    }

    #[test]
    fn parses_the_shared_traces_when_present() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/workloads");
        for (f, n) in [
            ("AzureLLMInferenceTrace_code.csv", 8819),
            ("AzureLLMInferenceTrace_conv.csv", 19_366),
        ] {
            let path = dir.join(f);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let rows = parse_azure(&path, &text).unwrap();
            assert_eq!(rows.len(), n);
        }
    }
}
