//! The docs cannot name a path that is not there: every repository path that
//! ARCHITECTURE.md, README.md, docs/*.md and BENCHMARKS.md's "Current figures" (the part
//! above its lab notebook, which records history as it was) mention in inline code or as a
//! link target must exist.
//!
//! - Link targets (`[text](target)`) resolve against the document's own folder, as a Markdown
//!   renderer resolves them; URLs and in-page anchors are skipped, `#anchor` is cut off.
//! - Inline code is split into words; a word is a path when it contains a `/` or ends in
//!   `.rs`, `.md`, `.sh`, `.py`, `.yaml`, `.toml` or `.json`, and it is checked (relative to
//!   the repository root) only when its first segment is an entry at the top of the
//!   repository, so `/v1/chat/completions`, `~/.cache/...`, `kv.rs` said in a section about
//!   one folder, and `../shared/...` outside the repository are left alone. Globs and
//!   placeholders (`configs/profiles/*.json`, `<build>/gateway`, `tests/tests/NAME.rs`) too.
//! - `file.rs::name` (a test named in docs/security.md's matrix) also needs `fn name` in
//!   that file.
//! - Fenced code blocks are not read: they are commands and output, not references.
//!
//! This lives with `modcycles` because it is the workspace's lightest crate of checks; it
//! reads files only.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

const EXTENSIONS: &[&str] = &[".rs", ".md", ".sh", ".py", ".yaml", ".toml", ".json"];

/// The heading that starts BENCHMARKS.md's lab notebook; only the text above it is checked.
const NOTEBOOK_HEADING: &str = "\n# Lab notebook";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// The documents checked, relative to the root, with the text of each that is checked.
fn documents(root: &Path) -> Vec<(String, String)> {
    let mut names = vec!["ARCHITECTURE.md".to_string(), "README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| {
            e.expect("a docs/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    let mut out: Vec<(String, String)> = names
        .into_iter()
        .map(|n| {
            let text =
                std::fs::read_to_string(root.join(&n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, text)
        })
        .collect();
    let bench = std::fs::read_to_string(root.join("BENCHMARKS.md")).expect("BENCHMARKS.md");
    let head = match bench.find(NOTEBOOK_HEADING) {
        Some(at) => bench[..at].to_string(),
        None => panic!("BENCHMARKS.md has no `{}` heading", NOTEBOOK_HEADING.trim()),
    };
    out.push(("BENCHMARKS.md".to_string(), head));
    out
}

/// The text with fenced code blocks blanked (newlines kept, so line numbers hold).
fn without_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let fence = line.trim_start().starts_with("```");
        if fence {
            fenced = !fenced;
        }
        if fence || fenced {
            out.extend(line.chars().filter(|&c| c == '\n'));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Inline code spans: (line, content), and the text with the spans blanked.
fn code_spans(text: &str) -> (Vec<(usize, String)>, String) {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut rest = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let open = i;
        while i < b.len() && b[i] == b'`' {
            i += 1;
        }
        let ticks = i - open;
        // The closing run of exactly `ticks` backticks.
        let mut j = i;
        let mut close = None;
        while j < b.len() {
            if b[j] == b'`' {
                let start = j;
                while j < b.len() && b[j] == b'`' {
                    j += 1;
                }
                if j - start == ticks {
                    close = Some(start);
                    break;
                }
            } else {
                j += 1;
            }
        }
        let Some(close) = close else { continue };
        let line = text[..open].matches('\n').count() + 1;
        spans.push((line, text[i..close].replace('\n', " ")));
        rest.push_str(&text[copied..open]);
        rest.extend(
            text[open..j]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        copied = j;
        i = j;
    }
    rest.push_str(&text[copied..]);
    (spans, rest)
}

/// Link targets `](target)`: (line, target).
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("](") {
        let start = from + at + 2;
        let end = text[start..].find(')').map_or(text.len(), |e| start + e);
        let target = text[start..end]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let line = text[..start].matches('\n').count() + 1;
        out.push((line, target));
        from = end.min(text.len());
        if from == start {
            from += 1;
        }
    }
    out
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn looks_like_path(word: &str) -> bool {
    word.contains('/') || EXTENSIONS.iter().any(|e| word.ends_with(e))
}

/// A glob, an elided or templated part, or a placeholder segment (`NAME.rs`, `PATH`).
fn is_placeholder(word: &str) -> bool {
    if word.contains(['*', '?', '<', '>', '{', '}', '[', ']', '$', '%', '\\', '|'])
        || word.contains("...")
        || word.contains('…')
    {
        return true;
    }
    word.split('/').any(|seg| {
        let stem = seg.split('.').next().unwrap_or("");
        stem.len() >= 2
            && stem.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            && !matches!(
                stem,
                "README" | "ARCHITECTURE" | "BENCHMARKS" | "LICENSE" | "CHANGELOG"
            )
    })
}

/// `a/./b/../c` to `a/c`; `None` when it climbs out of the root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(s) => out.push(s),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every path `doc` (at `doc_rel` under `root`) names that does not exist, as
/// `DOC:LINE: `PATH` ...` lines.
fn stale_paths(root: &Path, doc_rel: &str, text: &str) -> Vec<String> {
    let top: BTreeSet<String> = std::fs::read_dir(root)
        .expect("the repository root")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        // Hidden entries, and `target/`: build output, whose files exist only once built
        // (`target/release/warmpath` in the README is an instruction, not a repository path).
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    let text = without_fences(text);
    let (spans, prose) = code_spans(&text);
    let mut stale = Vec::new();

    for (line, span) in spans {
        for word in span.split_whitespace() {
            let word = word.rsplit('=').next().unwrap_or(word);
            let word = word.trim_start_matches(['(', '"', '\'']);
            let word = word.trim_end_matches([',', ';', ':', ')', '"', '\'', '.']);
            // `file.rs:42`, `file.rs::test_name`, `path#anchor`.
            let (word, item) = match word.split_once("::") {
                Some((file, item)) => (file, Some(item)),
                None => (word, None),
            };
            let word = word.split('#').next().unwrap_or(word);
            let word = match word.rsplit_once(':') {
                Some((p, n)) if n.chars().all(|c| c.is_ascii_digit()) => p,
                _ => word,
            };
            if word.is_empty()
                || word.contains("://")
                || !looks_like_path(word)
                || is_placeholder(word)
            {
                continue;
            }
            let first = word.split('/').next().unwrap_or("");
            if !top.contains(first) {
                continue;
            }
            if !root.join(word).exists() {
                stale.push(format!("{doc_rel}:{line}: `{word}` does not exist"));
            } else if let Some(item) = item.filter(|i| word.ends_with(".rs") && is_ident(i)) {
                // `file.rs::name`: the file defines `fn name`.
                let code = std::fs::read_to_string(root.join(word)).unwrap_or_default();
                if !code.contains(&format!("fn {item}(")) && !code.contains(&format!("fn {item}<"))
                {
                    stale.push(format!("{doc_rel}:{line}: `{word}` has no `fn {item}`"));
                }
            }
        }
    }

    let doc_dir = Path::new(doc_rel).parent().unwrap_or(Path::new(""));
    for (line, target) in link_targets(&prose) {
        if target.is_empty()
            || target.starts_with('#')
            || target.contains("://")
            || target.starts_with("mailto:")
            || is_placeholder(&target)
        {
            continue;
        }
        let path = target.split('#').next().unwrap_or(&target);
        match normalise(&doc_dir.join(path)) {
            Some(rel) if root.join(&rel).exists() => {}
            Some(rel) => stale.push(format!(
                "{doc_rel}:{line}: link `{target}` ({}) does not exist",
                rel.display()
            )),
            None => stale.push(format!(
                "{doc_rel}:{line}: link `{target}` leaves the repository"
            )),
        }
    }
    stale
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = repo_root();
    let mut stale = Vec::new();
    for (name, text) in documents(&root) {
        stale.extend(stale_paths(&root, &name, &text));
    }
    assert!(
        stale.is_empty(),
        "{} stale path(s) in the docs (fix the doc, or the path if it moved):\n{}",
        stale.len(),
        stale.join("\n")
    );
}

#[test]
fn a_bogus_path_fails_and_non_paths_do_not() {
    let root = repo_root();
    let doc = "\
Real: `core/src/hash.rs`, `core/src/hash.rs::block_hashes`, `scripts/test.sh --quick`, [docs](docs/engines.md#anchor), `README.md`.
Gone: `replica/src/engine/kv.rs` and `router-policy/src/hash.rs:12`, `core/src/hash.rs::no_such_test`,
and a [link](docs/nope.md), and `CARGO_TARGET_DIR=x scripts/nope.sh`.
Not paths: `/v1/chat/completions`, `~/.cache/warmpath/models`, `configs/profiles/*.json`,
`tests/tests/NAME.rs`, `<before>/gateway`, `kv.rs`, `../shared/workloads/x.jsonl`,
[site](https://example.com/a.md), [here](#section).
```
scripts/gone-in-a-fence.sh
```
";
    let stale = stale_paths(&root, "README.md", doc);
    assert_eq!(
        stale,
        vec![
            "README.md:2: `replica/src/engine/kv.rs` does not exist",
            "README.md:2: `router-policy/src/hash.rs` does not exist",
            "README.md:2: `core/src/hash.rs` has no `fn no_such_test`",
            "README.md:3: `scripts/nope.sh` does not exist",
            "README.md:3: link `docs/nope.md` (docs/nope.md) does not exist",
        ],
        "{stale:#?}"
    );
    // From docs/, a link resolves against docs/.
    let stale = stale_paths(
        &root,
        "docs/x.md",
        "[a](engines.md) [b](../README.md) [c](../gone.md)",
    );
    assert_eq!(
        stale,
        vec!["docs/x.md:1: link `../gone.md` (gone.md) does not exist"],
        "{stale:#?}"
    );
}
