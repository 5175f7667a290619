//! `${NAME}` in a string value of the config is replaced with the environment variable
//! `NAME`, so secrets can come from the environment (a Kubernetes Secret, a systemd
//! credential) while the file itself holds none. `$${` writes a literal `${`. Only string
//! values are expanded (a number or a boolean is written as itself); an unset variable,
//! an unterminated `${` or an empty name is an error naming the key.

use super::error::ConfigError;
use serde_yaml::Value;

/// Expands every `${NAME}` in the string values of `v`, looking names up with `lookup`.
pub(crate) fn expand(
    v: &mut Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    walk(v, &mut String::new(), lookup)
}

fn walk(
    v: &mut Value,
    key: &mut String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    match v {
        Value::String(s) if s.contains('$') => *s = expand_str(s, key, lookup)?,
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = key.len();
                key.push_str(&format!("[{i}]"));
                walk(item, key, lookup)?;
                key.truncate(len);
            }
        }
        Value::Mapping(m) => {
            for (k, item) in m.iter_mut() {
                let len = key.len();
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(k.as_str().unwrap_or("?"));
                walk(item, key, lookup)?;
                key.truncate(len);
            }
        }
        Value::Tagged(t) => walk(&mut t.value, key, lookup)?,
        _ => {}
    }
    Ok(())
}

fn expand_str(
    s: &str,
    key: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        key: key.to_string(),
        reason,
    };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after
                .find('}')
                .ok_or_else(|| invalid(format!("unterminated `${{` in {s:?}")))?;
            let name = &after[..end];
            if name.is_empty() {
                return Err(invalid("`${}` names no environment variable".into()));
            }
            let value = lookup(name)
                .ok_or_else(|| invalid(format!("environment variable {name} is not set")))?;
            out.push_str(&value);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SALT" => Some("s3cret: with a colon".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn run(yaml: &str) -> Result<Value, ConfigError> {
        let mut v: Value = serde_yaml::from_str(yaml).unwrap();
        expand(&mut v, &env).map(|()| v)
    }

    #[test]
    fn names_are_replaced_in_strings_anywhere() {
        let v = run("auth: {salt_secret: \"${SALT}\"}\nlist: [\"a${EMPTY}b\", \"$${SALT}\", \"$5\"]\nn: 3\n")
            .unwrap();
        assert_eq!(
            v["auth"]["salt_secret"],
            Value::from("s3cret: with a colon")
        );
        assert_eq!(v["list"][0], Value::from("ab"));
        assert_eq!(v["list"][1], Value::from("${SALT}"));
        assert_eq!(v["list"][2], Value::from("$5"));
        assert_eq!(v["n"], Value::from(3));
    }

    #[test]
    fn an_unset_or_malformed_name_is_refused_naming_the_key() {
        for (yaml, key, words) in [
            (
                "auth: {salt_secret: \"${NOPE}\"}",
                "auth.salt_secret",
                "NOPE is not set",
            ),
            (
                "tenants: [{id: \"${SALT\"}]",
                "tenants[0].id",
                "unterminated",
            ),
            (
                "admin: {key_sha256: \"${}\"}",
                "admin.key_sha256",
                "names no",
            ),
        ] {
            let e = run(yaml).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(words), "{yaml}: {e}");
        }
    }
}
