//! The `tojson` filter Hugging Face installs in chat templates: Python's
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`,
//! written out exactly (separators `", "`/`": "`, or `","`/`": "` with an indent; no HTML
//! escaping, unlike Jinja's own filter; floats as Python's `repr`).

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};
use std::fmt::Write;

/// The filter: `value|tojson(indent=None, separators=None, sort_keys=False, ensure_ascii=False)`.
pub(crate) fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match kwargs.get::<Option<Value>>("indent")? {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match (v.as_i64(), v.as_str()) {
            (Some(n), _) => Some(" ".repeat(usize::try_from(n).unwrap_or(0))),
            (_, Some(s)) => Some(s.to_string()),
            _ => return Err(Error::new(ErrorKind::InvalidOperation, "bad indent")),
        },
    };
    let (item_sep, key_sep) = match kwargs.get::<Option<Value>>("separators")? {
        Some(v) if !v.is_none() => {
            let parts: Vec<String> = v
                .try_iter()?
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| Error::new(ErrorKind::InvalidOperation, "bad separators"))?;
            match parts.as_slice() {
                [a, b] => (a.clone(), b.clone()),
                _ => return Err(Error::new(ErrorKind::InvalidOperation, "bad separators")),
            }
        }
        _ if indent.is_some() => (",".to_string(), ": ".to_string()),
        _ => (", ".to_string(), ": ".to_string()),
    };
    let opts = Opts {
        indent,
        item_sep,
        key_sep,
        sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
        ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_value(&mut out, value, &opts, 0)?;
    Ok(Value::from_safe_string(out))
}

/// `json.dumps(value)` with the default options (tests and diagnostics).
#[cfg(test)]
pub(crate) fn write_compact(out: &mut String, value: &Value) {
    let opts = Opts {
        indent: None,
        item_sep: ", ".into(),
        key_sep: ": ".into(),
        sort_keys: false,
        ensure_ascii: false,
    };
    let _ = write_value(out, value, &opts, 0);
}

struct Opts {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

fn newline(out: &mut String, opts: &Opts, depth: usize) {
    if let Some(ind) = &opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn write_value(out: &mut String, v: &Value, opts: &Opts, depth: usize) -> Result<(), Error> {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, v),
        ValueKind::String | ValueKind::Bytes => {
            write_string(out, v.as_str().unwrap_or_default(), opts.ensure_ascii)
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&opts.item_sep);
                }
                newline(out, opts, depth + 1);
                write_value(out, item, opts, depth + 1)?;
            }
            newline(out, opts, depth);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if opts.sort_keys {
                keys.sort();
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&opts.item_sep);
                }
                newline(out, opts, depth + 1);
                match k.as_str() {
                    Some(s) => write_string(out, s, opts.ensure_ascii),
                    None => write_string(out, &k.to_string(), opts.ensure_ascii),
                }
                out.push_str(&opts.key_sep);
                write_value(out, &v.get_item(k)?, opts, depth + 1)?;
            }
            newline(out, opts, depth);
            out.push('}');
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("Object of type {} is not JSON serializable", v.kind()),
            ))
        }
    }
    Ok(())
}

fn write_number(out: &mut String, v: &Value) {
    if v.is_integer() {
        let _ = write!(out, "{v}");
        return;
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    out.push_str(&python_float(f));
}

/// Python's `repr(float)`: the shortest round-trip digits, in fixed notation for exponents
/// -4..16 (always with a fraction), else as `1e-05` / `1.5e+16`.
pub(crate) fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let s = format!("{f}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

fn write_string(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !c.is_ascii() => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dumps(json: &str, kw: &[(&str, Value)]) -> String {
        let v: Value = serde_json::from_str(json).unwrap();
        let kwargs = Kwargs::from_iter(kw.iter().map(|(k, v)| (*k, v.clone())));
        tojson(&v, kwargs).unwrap().to_string()
    }

    #[test]
    fn writes_what_python_json_dumps_writes() {
        // Expected strings from Python 3.11 `json.dumps(..., ensure_ascii=False)`.
        assert_eq!(
            dumps(r#"{"b": [1, 2.5, true, null], "a": "é<>\n"}"#, &[]),
            r#"{"b": [1, 2.5, true, null], "a": "é<>\n"}"#
        );
        assert_eq!(
            dumps(
                r#"{"a": {"x": []}, "b": {}}"#,
                &[("indent", Value::from(2))]
            ),
            "{\n  \"a\": {\n    \"x\": []\n  },\n  \"b\": {}\n}"
        );
        assert_eq!(
            dumps(
                r#"{"b": 1, "a": "日"}"#,
                &[
                    ("sort_keys", Value::from(true)),
                    ("ensure_ascii", Value::from(true))
                ]
            ),
            r#"{"a": "\u65e5", "b": 1}"#
        );
        assert_eq!(
            dumps(r#"[1, 2]"#, &[("separators", Value::from(vec![",", ":"]))]),
            "[1,2]"
        );
    }

    #[test]
    fn floats_are_python_reprs() {
        for (f, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (123456.789, "123456.789"),
            (-2.5e-7, "-2.5e-07"),
        ] {
            assert_eq!(python_float(f), s);
        }
    }
}
