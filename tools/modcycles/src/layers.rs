//! Layering rules: `FROM=TO` says no module under `FROM` (the module itself or any of its
//! descendants) may depend on a module under `TO`, directly or through others. A broken
//! rule is reported with the chain of edges that breaks it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::edge::EdgeExample;

/// One rule, as given on the command line (`control=proxy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub from: String,
    pub to: String,
}

impl Rule {
    /// Parses `FROM=TO` (module paths as the report names them: `control`, `proxy::ctx`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.split_once('=') {
            Some((from, to)) if !from.is_empty() && !to.is_empty() && from != to => Ok(Self {
                from: from.to_string(),
                to: to.to_string(),
            }),
            _ => bail!("{s:?}: a rule is FROM=TO, two different module paths"),
        }
    }
}

/// A broken rule: the shortest chain of edges from a module under `from` to one under `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    pub chain: Vec<EdgeExample>,
}

/// Whether module `name` is `prefix` or lies under it.
fn under(name: &str, prefix: &str) -> bool {
    name == prefix
        || name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// Checks `rules` against the named edges (`(from, to) -> first example`).
pub fn check(
    rules: &[Rule],
    edges: &BTreeMap<(String, String), (PathBuf, usize)>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for rule in rules {
        // Breadth-first from every module under `from`, so the chain found is a shortest one.
        let mut seen: BTreeMap<&str, Option<(&str, &str)>> = BTreeMap::new();
        let mut queue = VecDeque::new();
        for (f, _) in edges.keys() {
            if under(f, &rule.from) && !seen.contains_key(f.as_str()) {
                seen.insert(f, None);
                queue.push_back(f.as_str());
            }
        }
        let mut hit = None;
        while let Some(m) = queue.pop_front() {
            if under(m, &rule.to) {
                hit = Some(m);
                break;
            }
            for (f, t) in edges.keys().filter(|(f, _)| f == m) {
                if !seen.contains_key(t.as_str()) {
                    seen.insert(t, Some((f, t)));
                    queue.push_back(t);
                }
            }
        }
        let Some(mut m) = hit else { continue };
        let mut chain = Vec::new();
        while let Some(Some((f, t))) = seen.get(m) {
            let (file, line) = &edges[&(f.to_string(), t.to_string())];
            chain.push(EdgeExample {
                from: f.to_string(),
                to: t.to_string(),
                file: file.clone(),
                line: *line,
            });
            m = f;
        }
        chain.reverse();
        out.push(Violation {
            rule: rule.clone(),
            chain,
        });
    }
    out
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "layering: {} must not depend on {}",
            self.rule.from, self.rule.to
        )?;
        for e in &self.chain {
            writeln!(f, "  {e}")?;
        }
        Ok(())
    }
}
