//! The module dependency graph of one crate root and its cycles.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};

pub use crate::edge::EdgeExample;
use crate::layers::{self, Rule, Violation};
use crate::refs;
use crate::resolve::{resolve, Aliases};
use crate::tree::ModTree;

/// A strongly connected component of more than one module: its modules by name, and
/// every edge between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    pub modules: Vec<String>,
    pub edges: Vec<EdgeExample>,
}

/// What [`check`] found for one crate root.
#[derive(Debug)]
pub struct Report {
    pub root: PathBuf,
    pub modules: usize,
    pub edges: usize,
    pub cycles: Vec<Cycle>,
    /// Layering rules broken (see [`crate::layers`]).
    pub violations: Vec<Violation>,
}

impl Report {
    /// Whether the crate passes: no cycle and no broken rule.
    pub fn ok(&self) -> bool {
        self.cycles.is_empty() && self.violations.is_empty()
    }
}

/// Reads the crate whose root file is `root` and finds its module cycles.
pub fn check(root: &Path) -> Result<Report> {
    check_with(root, &[])
}

/// [`check`], and also the layering `rules`.
pub fn check_with(root: &Path, rules: &[Rule]) -> Result<Report> {
    let tree = ModTree::load(root)?;
    let edges = edges(&tree);
    let mut graph = DiGraph::<usize, ()>::new();
    let nodes: Vec<NodeIndex> = (0..tree.modules.len()).map(|m| graph.add_node(m)).collect();
    for &(from, to) in edges.keys() {
        graph.add_edge(nodes[from], nodes[to], ());
    }
    let mut cycles: Vec<Cycle> = tarjan_scc(&graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let members: Vec<usize> = scc.iter().map(|n| graph[*n]).collect();
            let mut modules: Vec<String> =
                members.iter().map(|&m| tree.modules[m].name()).collect();
            modules.sort();
            let edges = edges
                .iter()
                .filter(|((from, to), _)| members.contains(from) && members.contains(to))
                .map(|(&(from, to), (file, line))| EdgeExample {
                    from: tree.modules[from].name(),
                    to: tree.modules[to].name(),
                    file: file.clone(),
                    line: *line,
                })
                .collect::<Vec<_>>();
            let mut edges = edges;
            edges.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
            Cycle { modules, edges }
        })
        .collect();
    cycles.sort_by(|a, b| {
        b.modules
            .len()
            .cmp(&a.modules.len())
            .then(a.modules.cmp(&b.modules))
    });
    let named = edges
        .iter()
        .map(|(&(from, to), example)| {
            (
                (tree.modules[from].name(), tree.modules[to].name()),
                example.clone(),
            )
        })
        .collect();
    Ok(Report {
        root: root.to_path_buf(),
        modules: tree.modules.len(),
        edges: edges.len(),
        cycles,
        violations: layers::check(rules, &named),
    })
}

/// Every edge between distinct modules, with its first example `(file, line)`.
fn edges(tree: &ModTree) -> BTreeMap<(usize, usize), (PathBuf, usize)> {
    let mut edges = BTreeMap::new();
    for (from, module) in tree.modules.iter().enumerate() {
        let refs = refs::collect(&module.items);
        let mut aliases = Aliases::new();
        for leaf in &refs.uses {
            if let (Some(binding), Some(r)) =
                (&leaf.binding, resolve(tree, &aliases, from, &leaf.segments))
            {
                if r.exact {
                    aliases.insert(binding.clone(), r.module);
                }
            }
        }
        let named = refs
            .uses
            .iter()
            .map(|u| (&u.segments, u.line))
            .chain(refs.paths.iter().map(|(s, l)| (s, *l)));
        for (segments, line) in named {
            let Some(r) = resolve(tree, &aliases, from, segments) else {
                continue;
            };
            if r.module == from {
                continue;
            }
            let example = (module.file.clone(), line);
            edges
                .entry((from, r.module))
                .and_modify(|e: &mut (PathBuf, usize)| {
                    if example < *e {
                        *e = example.clone();
                    }
                })
                .or_insert(example);
        }
    }
    edges
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, cycle) in self.cycles.iter().enumerate() {
            writeln!(
                f,
                "cycle {} ({} modules): {}",
                i + 1,
                cycle.modules.len(),
                cycle.modules.join(", ")
            )?;
            for e in &cycle.edges {
                writeln!(f, "  {e}")?;
            }
        }
        for v in &self.violations {
            write!(f, "{v}")?;
        }
        write!(
            f,
            "modcycles: {}: {} modules, {} edges, {} cycles",
            self.root.display(),
            self.modules,
            self.edges,
            self.cycles.len()
        )?;
        if !self.violations.is_empty() {
            write!(f, ", {} layering rules broken", self.violations.len())?;
        }
        Ok(())
    }
}
