//! The pre-run load check of `loadtest simulate`: estimates the offered load against the
//! simulated cluster ([`crate::sim::capacity`]) and warns on stderr when it cannot keep up,
//! suggesting the other profiles found next to `--profile`.

use crate::sim::capacity::{Alternative, LoadEstimate};
use crate::sim::CostProfile;
use crate::workload::Workload;
use std::path::Path;

/// Profiles in the directory of `profile_path` (its siblings), named as the user would pass
/// them (the directory as given, joined with the file name). Unreadable files are skipped.
pub fn sibling_profiles(profile_path: &Path) -> Vec<Alternative> {
    let dir = profile_path.parent().unwrap_or(Path::new("."));
    let shown = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(shown) else {
        return Vec::new();
    };
    let mut v: Vec<Alternative> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let profile = CostProfile::load(&p).ok()?;
            let name = p.file_name()?.to_owned();
            Some(Alternative {
                path: dir.join(name).display().to_string(),
                profile,
            })
        })
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

/// Estimates the load and prints the warning (always) or the estimate (unless `quiet`).
/// Returns the estimate, `None` when the workload has no arrival rate.
pub fn check(
    workload: &Workload,
    profile: &CostProfile,
    profile_path: &Path,
    replicas: u32,
    hit_rate: Option<f64>,
    quiet: bool,
) -> Option<LoadEstimate> {
    let est = LoadEstimate::of(workload, profile, replicas, hit_rate)?;
    match est.warning(&sibling_profiles(profile_path)) {
        Some(w) => eprintln!("{w}"),
        None if !quiet => eprintln!("load check: {}", est.describe()),
        None => {}
    }
    Some(est)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_shipped_profiles_next_to_one_of_them() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/profiles/smollm2-cpu.json");
        let alts = sibling_profiles(&p);
        let names: Vec<&str> = alts.iter().map(|a| a.profile.name.as_str()).collect();
        assert!(names.contains(&"gpu-h100-class"), "{names:?}");
        assert!(alts
            .iter()
            .any(|a| a.path.ends_with("profiles/gpu-h100-class.json")));
        assert!(sibling_profiles(Path::new("/nonexistent/dir/p.json")).is_empty());
    }
}
