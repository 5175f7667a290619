//! A crate's module tree, read from its root file by following `mod` declarations the
//! way rustc does (2018 edition rules):
//!
//! - `mod x;` in a "mod-rs" file (the root, a `mod.rs`, or a file loaded through
//!   `#[path]`) is `x.rs` or `x/mod.rs` next to it; in any other file `foo.rs` it is
//!   `foo/x.rs` or `foo/x/mod.rs`.
//! - `#[path = "p"] mod x;` is `p` relative to the declaring file's directory, or,
//!   inside an inline module, relative to the directory the inline modules name.
//! - `mod x { .. }` is an inline module: same file, its own node.
//!
//! Modules under `#[cfg(test)]` are left out (with everything below them).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use syn::Item;

use crate::cfg;

/// One module: its path from the crate root, the file its code is in, and its own items
/// (nested `mod` declarations taken out; those are modules of their own).
pub struct Module {
    /// Path segments from the crate root; empty for the root itself.
    pub segments: Vec<String>,
    pub file: PathBuf,
    pub parent: Option<usize>,
    pub children: BTreeMap<String, usize>,
    pub items: Vec<Item>,
}

impl Module {
    /// `crate` for the root, else `a::b`.
    pub fn name(&self) -> String {
        if self.segments.is_empty() {
            "crate".to_string()
        } else {
            self.segments.join("::")
        }
    }
}

/// The module tree; index 0 is the crate root.
#[derive(Default)]
pub struct ModTree {
    pub modules: Vec<Module>,
}

/// Where a module's children live: `mod x;` looks in `children_dir`, and a `#[path]`
/// on it is relative to `path_base`.
struct Dirs {
    children_dir: PathBuf,
    path_base: PathBuf,
}

impl ModTree {
    /// Reads the tree from a crate root file (`src/lib.rs`, `src/main.rs`, ...).
    pub fn load(root: &Path) -> Result<ModTree> {
        let mut tree = ModTree::default();
        tree.load_file(root, Vec::new(), None, true)?;
        if tree.modules.is_empty() {
            bail!("{}: the whole crate root is #[cfg(test)]", root.display());
        }
        Ok(tree)
    }

    pub fn child(&self, module: usize, name: &str) -> Option<usize> {
        self.modules[module].children.get(name).copied()
    }

    pub fn parent(&self, module: usize) -> Option<usize> {
        self.modules[module].parent
    }

    fn load_file(
        &mut self,
        file: &Path,
        segments: Vec<String>,
        parent: Option<usize>,
        mod_rs: bool,
    ) -> Result<()> {
        let src =
            fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let ast = syn::parse_file(&src).with_context(|| format!("parsing {}", file.display()))?;
        if cfg::is_test_only(&ast.attrs) {
            return Ok(());
        }
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        let children_dir = if mod_rs {
            dir.clone()
        } else {
            let stem = file.file_stem().context("module file without a name")?;
            dir.join(stem)
        };
        let dirs = Dirs {
            children_dir,
            path_base: dir,
        };
        self.add_module(file, segments, parent, ast.items, &dirs)
    }

    fn add_module(
        &mut self,
        file: &Path,
        segments: Vec<String>,
        parent: Option<usize>,
        items: Vec<Item>,
        dirs: &Dirs,
    ) -> Result<()> {
        let id = self.modules.len();
        if let (Some(p), Some(last)) = (parent, segments.last()) {
            self.modules[p].children.insert(last.clone(), id);
        }
        self.modules.push(Module {
            segments: segments.clone(),
            file: file.to_path_buf(),
            parent,
            children: BTreeMap::new(),
            items: Vec::new(),
        });
        let mut own = Vec::new();
        for item in items {
            let Item::Mod(m) = item else {
                own.push(item);
                continue;
            };
            if cfg::is_test_only(&m.attrs) {
                continue;
            }
            let name = unraw(&m.ident.to_string());
            let mut child_segments = segments.clone();
            child_segments.push(name.clone());
            match (m.content, cfg::path_attr(&m.attrs)) {
                (Some((_, inner)), _) => {
                    let dir = dirs.children_dir.join(&name);
                    let inner_dirs = Dirs {
                        children_dir: dir.clone(),
                        path_base: dir,
                    };
                    self.add_module(file, child_segments, Some(id), inner, &inner_dirs)?;
                }
                (None, Some(path)) => {
                    let path = dirs.path_base.join(path);
                    self.load_file(&path, child_segments, Some(id), true)?;
                }
                (None, None) => {
                    let (path, mod_rs) = find_module_file(&dirs.children_dir, &name)?;
                    self.load_file(&path, child_segments, Some(id), mod_rs)?;
                }
            }
        }
        self.modules[id].items = own;
        Ok(())
    }
}

/// `dir/name.rs` (not mod-rs) or `dir/name/mod.rs` (mod-rs).
fn find_module_file(dir: &Path, name: &str) -> Result<(PathBuf, bool)> {
    let flat = dir.join(format!("{name}.rs"));
    let nested = dir.join(name).join("mod.rs");
    match (flat.is_file(), nested.is_file()) {
        (true, false) => Ok((flat, false)),
        (false, true) => Ok((nested, true)),
        (true, true) => bail!(
            "module `{name}` is both {} and {}",
            flat.display(),
            nested.display()
        ),
        (false, false) => bail!(
            "module `{name}`: neither {} nor {} exists",
            flat.display(),
            nested.display()
        ),
    }
}

/// `r#type` -> `type`.
pub fn unraw(ident: &str) -> String {
    ident.strip_prefix("r#").unwrap_or(ident).to_string()
}
