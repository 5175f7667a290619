//! A path named in module `from` to the module it points into: the longest prefix of
//! the path that is a module of the crate.
//!
//! The path's start decides where it begins: `crate` (or `$crate` in a macro) at the
//! root, `self` at `from`, each leading `super` one module up, a child module of
//! `from` at that child, and a name that `from` imported as a module (`use
//! crate::a::b;`, `use super::b::{self, ..}`) at that module. Any other start (another
//! crate, a local item, a type parameter) is not a path into this crate's modules.
//! Re-exports are not followed: `crate::a::Thing` points into `a` even when `a`
//! re-exports `Thing` from a child, so a facade module depends on what it re-exports.

use std::collections::HashMap;

use crate::tree::ModTree;

/// Names a module imported as modules, to the module: `use crate::a::b;` binds `b`.
pub type Aliases = HashMap<String, usize>;

/// Where a path points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub module: usize,
    /// The whole path is a module (it names the module itself, not an item in it).
    pub exact: bool,
}

/// Resolves `segments` named in module `from`; `None` when the path does not start
/// inside this crate.
pub fn resolve(
    tree: &ModTree,
    aliases: &Aliases,
    from: usize,
    segments: &[String],
) -> Option<Resolved> {
    let first = segments.first()?;
    let (start, rest) = match first.as_str() {
        "crate" | "$crate" => (0, &segments[1..]),
        "self" => (from, &segments[1..]),
        "super" => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let mut module = from;
            for _ in 0..ups {
                module = tree.parent(module)?;
            }
            (module, &segments[ups..])
        }
        name if tree.child(from, name).is_some() => (from, segments),
        name => (*aliases.get(name)?, &segments[1..]),
    };
    let mut module = start;
    let mut consumed = 0;
    for segment in rest {
        match tree.child(module, segment) {
            Some(child) => {
                module = child;
                consumed += 1;
            }
            None => break,
        }
    }
    Some(Resolved {
        module,
        exact: consumed == rest.len(),
    })
}
