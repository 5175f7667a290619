//! How Jinja2 (Python) prints a value with `{{ value }}`: `str()` of the Python object, so
//! `None`, `True`, `{'a': 1}`, `[1, 'x']` and float `repr`s, where minijinja would print
//! `none`, `true` and JSON. Installed as the template environment's formatter.

use crate::hf_json::python_float;
use minijinja::value::ValueKind;
use minijinja::{Output, State, Value};
use std::fmt::Write;

/// The environment formatter: strings as they are, other values as Python prints them.
pub(crate) fn format(
    out: &mut Output<'_>,
    _state: &State<'_, '_>,
    v: &Value,
) -> Result<(), minijinja::Error> {
    let mut s = String::new();
    match v.kind() {
        ValueKind::Undefined => {}
        ValueKind::String => s.push_str(v.as_str().unwrap_or_default()),
        _ => repr(&mut s, v),
    }
    out.write_str(&s).map_err(minijinja::Error::from)
}

/// Python's `repr` of the value (its `str` for a number, a boolean or `None`).
fn repr(out: &mut String, v: &Value) {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number if v.is_integer() => {
            let _ = write!(out, "{v}");
        }
        ValueKind::Number => {
            out.push_str(&python_float(f64::try_from(v.clone()).unwrap_or(f64::NAN)))
        }
        ValueKind::String => quote(out, v.as_str().unwrap_or_default()),
        ValueKind::Seq => {
            out.push('[');
            for (i, item) in v.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(out, &item);
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, k) in v.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(out, &k);
                out.push_str(": ");
                repr(out, &v.get_item(&k).unwrap_or_default());
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{v}");
        }
    }
}

/// A Python string literal: single quotes unless the text has one and no double quote.
fn quote(out: &mut String, s: &str) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

#[cfg(test)]
mod tests {
    use super::repr;
    use minijinja::Value;

    #[test]
    fn prints_what_python_prints() {
        let v: Value =
            serde_json::from_str(r#"{"a": null, "b": [true, 1.5, "it's", "q\"", "x\ny"]}"#)
                .unwrap();
        let mut s = String::new();
        repr(&mut s, &v);
        assert_eq!(s, r#"{'a': None, 'b': [True, 1.5, "it's", 'q"', 'x\ny']}"#);
    }
}
