//! `warmpath-fuzz TARGET|all [SECONDS] [--replay]`: a mutation fuzzer on stable Rust.
//!
//! Each target (`targets::ALL`) starts from its committed seeds (`fuzz/corpus/TARGET/`),
//! and for SECONDS (default 10) runs inputs made from them by random edits: bit flips,
//! byte inserts, deletes and overwrites, interesting values, dictionary tokens spliced in,
//! pieces of other seeds, truncation. Inputs that panic are written to
//! `fuzz/crashes/TARGET-HASH` and the run fails. `--replay` runs only the seeds and the
//! saved crashes (the regression check). `SEED=` fixes the random stream.
//!
//! No coverage feedback: neither `cargo fuzz` (nightly sanitizers) nor `cargo afl` (an
//! AFL++ toolchain) is available on the stable toolchain the project builds with, so the
//! driver trades guidance for running anywhere the workspace builds (BENCHMARKS.md).

mod kv;
mod targets;

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use targets::Target;

/// Longest input tried.
const MAX_LEN: usize = 4096;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let replay = args.iter().any(|a| a == "--replay");
    let mut plain = args.iter().filter(|a| !a.starts_with("--"));
    let which = plain.next().map_or("all", String::as_str);
    let secs: f64 = plain
        .next()
        .map_or(Ok(10.0), |s| s.parse())
        .context("SECONDS")?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seed = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let chosen: Vec<&Target> = targets::ALL
        .iter()
        .filter(|t| which == "all" || t.name == which)
        .collect();
    if chosen.is_empty() {
        bail!("no target {which}; targets: {}", names());
    }
    // Panics are expected findings: report them once, as a crash file.
    std::panic::set_hook(Box::new(|_| {}));
    let mut failed = false;
    for t in chosen {
        let seeds = read_dir(&dir.join("corpus").join(t.name), "")?;
        let saved = read_dir(&dir.join("crashes"), &format!("{}-", t.name))?;
        let mut execs = 0u64;
        let mut crashes = 0u64;
        let started = Instant::now();
        for input in seeds.iter().chain(&saved) {
            execs += 1;
            if !runs(t, input) {
                crashes += 1;
                save(dir, t, input)?;
            }
        }
        if !replay {
            let mut rng = StdRng::seed_from_u64(seed);
            let until = started + Duration::from_secs_f64(secs);
            while Instant::now() < until {
                for _ in 0..256 {
                    let input = mutate(&mut rng, &seeds, t.dictionary);
                    execs += 1;
                    if !runs(t, &input) {
                        crashes += 1;
                        save(dir, t, &input)?;
                    }
                }
            }
        }
        let s = started.elapsed().as_secs_f64();
        println!(
            "{:<16} execs={execs} exec_per_s={:.0} seconds={s:.1} seeds={} crashes={crashes} seed={seed}",
            t.name,
            execs as f64 / s.max(1e-9),
            seeds.len()
        );
        failed |= crashes > 0;
    }
    if failed {
        bail!("crashes saved under {}", dir.join("crashes").display());
    }
    Ok(())
}

fn names() -> String {
    targets::ALL
        .iter()
        .map(|t| t.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `input` runs without a panic.
fn runs(t: &Target, input: &[u8]) -> bool {
    catch_unwind(AssertUnwindSafe(|| (t.run)(input))).is_ok()
}

/// Writes a crashing input (named by its hash, so one input is saved once).
fn save(dir: &Path, t: &Target, input: &[u8]) -> Result<()> {
    let crashes = dir.join("crashes");
    std::fs::create_dir_all(&crashes)?;
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let path: PathBuf = crashes.join(format!("{}-{hash:016x}", t.name));
    eprintln!("{}: crash, input saved to {}", t.name, path.display());
    std::fs::write(path, input)?;
    Ok(())
}

/// The files of `dir` whose names start with `prefix` (none when it does not exist).
fn read_dir(dir: &Path, prefix: &str) -> Result<Vec<Vec<u8>>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    paths
        .iter()
        .filter(|p| p.is_file())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|p| std::fs::read(p).with_context(|| p.display().to_string()))
        .collect()
}

/// A new input: a seed (or nothing) with a few random edits.
fn mutate(rng: &mut StdRng, seeds: &[Vec<u8>], dict: &[&[u8]]) -> Vec<u8> {
    let mut out = if seeds.is_empty() {
        Vec::new()
    } else {
        seeds[rng.gen_range(0..seeds.len())].clone()
    };
    for _ in 0..rng.gen_range(1..=8) {
        let len = out.len();
        match rng.gen_range(0..9) {
            0 if len > 0 => {
                let i = rng.gen_range(0..len);
                out[i] ^= 1 << rng.gen_range(0..8);
            }
            1 => out.insert(rng.gen_range(0..=len), rng.gen()),
            2 if len > 0 => {
                let i = rng.gen_range(0..len);
                let n = rng.gen_range(1..=(len - i).min(16));
                out.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = rng.gen_range(0..len);
                out[i] = *[0u8, 0x7f, 0x80, 0xff, b'\r', b'\n', b'"', b'\\', b'0', b'9']
                    .get(rng.gen_range(0..10))
                    .unwrap_or(&0);
            }
            4 | 5 if !dict.is_empty() => {
                let word = dict[rng.gen_range(0..dict.len())];
                let at = rng.gen_range(0..=len);
                out.splice(at..at, word.iter().copied());
            }
            6 if !seeds.is_empty() => {
                let other = &seeds[rng.gen_range(0..seeds.len())];
                if !other.is_empty() {
                    let a = rng.gen_range(0..other.len());
                    let b = rng.gen_range(a..=other.len());
                    let at = rng.gen_range(0..=len);
                    out.splice(at..at, other[a..b].iter().copied());
                }
            }
            7 if len > 0 => out.truncate(rng.gen_range(0..len)),
            8 if len > 0 => {
                // Repeat a piece: long runs find length and nesting bounds.
                let a = rng.gen_range(0..len);
                let b = rng.gen_range(a..=len.min(a + 8));
                let piece = out[a..b].to_vec();
                for _ in 0..rng.gen_range(1..64) {
                    out.splice(b..b, piece.iter().copied());
                }
            }
            _ => {}
        }
    }
    out.truncate(MAX_LEN);
    out
}
