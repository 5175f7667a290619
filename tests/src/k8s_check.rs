//! The offline manifest check the Kubernetes tests share: `scripts/k8s-check.sh` on a
//! kustomize directory, its rendered objects read back, and one object found by kind and
//! name.

use serde::Deserialize;
use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the check script on `dir`; the rendered objects, or the script's error output.
pub fn check(dir: &Path) -> Result<Vec<Value>, String> {
    let out = Command::new(root().join("scripts/k8s-check.sh"))
        .arg(dir)
        .output()
        .expect("run scripts/k8s-check.sh (needs python3 with venv: scripts/ci-deps.sh)");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let path = String::from_utf8(out.stdout).expect("the script prints a path");
    let text = std::fs::read_to_string(path.trim()).expect("the rendered objects");
    let _ = std::fs::remove_file(path.trim());
    Ok(serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("a YAML document"))
        .collect())
}

/// The object of `kind` whose name starts with `name_prefix` (kustomize may suffix it).
pub fn object<'a>(objs: &'a [Value], kind: &str, name_prefix: &str) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name_prefix))
        })
        .unwrap_or_else(|| panic!("no {kind} {name_prefix}"))
}
