//! The paths one module's code names, with the line of each: the leaves of its `use`
//! trees (`use crate::{a::X, b::Y}` is `crate::a::X` and `crate::b::Y`), and every
//! other path (expressions, types, patterns, trait bounds, macro names and the paths
//! inside macro tokens). Items under `#[cfg(test)]` are skipped, and so are the
//! restrictions of `pub(in path)` (visibility is not a dependency) and nested `mod`
//! items (modules of their own, or, inside a function body, out of scope).

use syn::visit::{self, Visit};
use syn::{Attribute, ImplItem, Item, ItemUse, Path, TraitItem, UseTree, VisRestricted};

use crate::cfg;
use crate::tokens::{paths_in_tokens, TokenPath};
use crate::tree::unraw;

/// One leaf of a `use` tree: the full path, and the name it binds (`None` for a glob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseLeaf {
    pub segments: Vec<String>,
    pub binding: Option<String>,
    pub line: usize,
}

/// What a module's items name.
#[derive(Debug, Default)]
pub struct Refs {
    pub uses: Vec<UseLeaf>,
    pub paths: Vec<TokenPath>,
}

/// Collects the references in `items`.
pub fn collect(items: &[Item]) -> Refs {
    let mut refs = Refs::default();
    for item in items {
        refs.visit_item(item);
    }
    refs
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item(&mut self, item: &'ast Item) {
        if matches!(item, Item::Mod(_)) || item_attrs(item).is_some_and(cfg::is_test_only) {
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        if !impl_item_attrs(item).is_some_and(cfg::is_test_only) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        if !trait_item_attrs(item).is_some_and(cfg::is_test_only) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast ItemUse) {
        if item.leading_colon.is_none() {
            flatten(&item.tree, &mut Vec::new(), &mut self.uses);
        }
    }

    fn visit_path(&mut self, path: &'ast Path) {
        if path.leading_colon.is_none() {
            if let Some(first) = path.segments.first() {
                let segments = path
                    .segments
                    .iter()
                    .map(|s| unraw(&s.ident.to_string()))
                    .collect();
                self.paths.push((segments, first.ident.span().start().line));
            }
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        paths_in_tokens(mac.tokens.clone(), &mut self.paths);
    }

    fn visit_vis_restricted(&mut self, _: &'ast VisRestricted) {}
}

fn flatten(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(unraw(&p.ident.to_string()));
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => leaf(prefix, &n.ident, None, out),
        UseTree::Rename(r) => leaf(prefix, &r.ident, Some(&r.rename), out),
        UseTree::Glob(g) => out.push(UseLeaf {
            segments: prefix.clone(),
            binding: None,
            line: g.star_token.span.start().line,
        }),
        UseTree::Group(g) => {
            for tree in &g.items {
                flatten(tree, prefix, out);
            }
        }
    }
}

/// `a::b::name` or `a::b::{self}` (the path `a::b`, binding `b`), possibly renamed.
fn leaf(
    prefix: &[String],
    ident: &syn::Ident,
    rename: Option<&syn::Ident>,
    out: &mut Vec<UseLeaf>,
) {
    let name = unraw(&ident.to_string());
    let mut segments = prefix.to_vec();
    if name != "self" {
        segments.push(name);
    }
    let binding = match rename {
        Some(r) => Some(unraw(&r.to_string())),
        None => segments.last().cloned(),
    };
    if !segments.is_empty() {
        out.push(UseLeaf {
            segments,
            binding,
            line: ident.span().start().line,
        });
    }
}

fn item_attrs(item: &Item) -> Option<&[Attribute]> {
    Some(match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => return None,
    })
}

fn impl_item_attrs(item: &ImplItem) -> Option<&[Attribute]> {
    Some(match item {
        ImplItem::Const(i) => &i.attrs,
        ImplItem::Fn(i) => &i.attrs,
        ImplItem::Type(i) => &i.attrs,
        ImplItem::Macro(i) => &i.attrs,
        _ => return None,
    })
}

fn trait_item_attrs(item: &TraitItem) -> Option<&[Attribute]> {
    Some(match item {
        TraitItem::Const(i) => &i.attrs,
        TraitItem::Fn(i) => &i.attrs,
        TraitItem::Type(i) => &i.attrs,
        TraitItem::Macro(i) => &i.attrs,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(src: &str) -> Vec<(String, Option<String>)> {
        let file = syn::parse_file(src).expect("parses");
        collect(&file.items)
            .uses
            .into_iter()
            .map(|u| (u.segments.join("::"), u.binding))
            .collect()
    }

    #[test]
    fn use_groups_self_renames_and_globs() {
        let got = uses("use crate::{a::X, b::{self as bee, Y}}; use super::*; pub use c::Z as W;");
        let want = [
            ("crate::a::X", Some("X")),
            ("crate::b", Some("bee")),
            ("crate::b::Y", Some("Y")),
            ("super", None),
            ("c::Z", Some("W")),
        ]
        .map(|(p, b)| (p.to_string(), b.map(str::to_string)));
        assert_eq!(got, want);
    }

    #[test]
    fn paths_skip_test_items_and_visibility() {
        let file = syn::parse_file(
            "pub(in crate::v) fn f() -> crate::a::T { crate::b::g(); m!(crate::c::h) }
             #[cfg(test)] fn t() { crate::d::x(); }
             impl S { #[cfg(test)] fn u() { crate::e::y(); } }",
        )
        .expect("parses");
        let paths: Vec<String> = collect(&file.items)
            .paths
            .into_iter()
            .map(|(s, _)| s.join("::"))
            .collect();
        for p in ["crate::a::T", "crate::b::g", "crate::c::h"] {
            assert!(paths.contains(&p.to_string()), "{p} missing from {paths:?}");
        }
        for p in ["crate::v", "crate::d::x", "crate::e::y"] {
            assert!(!paths.contains(&p.to_string()), "{p} found in {paths:?}");
        }
    }
}
