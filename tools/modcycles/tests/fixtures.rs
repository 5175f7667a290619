//! The checker on tiny fake crates under tests/fixtures (files only, never compiled).

use std::path::PathBuf;

use modcycles::{check, Cycle, Report};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("src/lib.rs")
}

fn report(name: &str) -> Report {
    check(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

/// The one cycle the fixture must have.
fn only_cycle(name: &str) -> Cycle {
    let report = report(name);
    assert_eq!(report.cycles.len(), 1, "{name}: {report}");
    report.cycles[0].clone()
}

/// `from -> to` edges of a cycle, each with its example `file_name:line`.
fn edges(cycle: &Cycle) -> Vec<String> {
    cycle
        .edges
        .iter()
        .map(|e| {
            let file = e.file.file_name().map(|f| f.to_string_lossy().into_owned());
            format!(
                "{} -> {} {}:{}",
                e.from,
                e.to,
                file.unwrap_or_default(),
                e.line
            )
        })
        .collect()
}

#[test]
fn acyclic_tree_passes() {
    let report = report("acyclic");
    assert!(report.cycles.is_empty(), "{report}");
    // crate, a, b, c, c::d
    assert_eq!(report.modules, 5, "{report}");
    // crate->a (re-export), a->b, a->c, b->c::d, c::d->c
    assert_eq!(report.edges, 5, "{report}");
}

#[test]
fn use_crate_cycle_names_both_modules() {
    let cycle = only_cycle("use_cycle");
    assert_eq!(cycle.modules, ["a", "b"]);
    assert_eq!(edges(&cycle), ["a -> b a.rs:1", "b -> a b.rs:3"]);
}

#[test]
fn use_group_leaves_are_separate_edges() {
    let cycle = only_cycle("group_cycle");
    assert_eq!(cycle.modules, ["a", "b", "c"]);
    assert_eq!(
        edges(&cycle),
        [
            "a -> c a.rs:3",
            "b -> c b.rs:4",
            "c -> a c.rs:3",
            "c -> b c.rs:3"
        ]
    );
}

#[test]
fn parent_reexporting_a_child_that_uses_super_is_a_cycle() {
    let cycle = only_cycle("super_cycle");
    assert_eq!(cycle.modules, ["facade", "facade::child"]);
    assert_eq!(
        edges(&cycle),
        [
            "facade -> facade::child mod.rs:3",
            "facade::child -> facade child.rs:1"
        ]
    );
    // `thin` declares its child and the child uses `super::Base`: one edge, no cycle.
}

#[test]
fn cfg_test_code_is_not_counted() {
    let report = report("test_mod");
    assert!(report.cycles.is_empty(), "{report}");
    // crate, a, b: neither `mod tests;` nor `mod inline_tests` is a module of the graph.
    assert_eq!(report.modules, 3, "{report}");
    // b -> a only; a's test code naming b is left out.
    assert_eq!(report.edges, 1, "{report}");
}

#[test]
fn path_attribute_loads_the_named_file() {
    let report = report("path_attr");
    // crate, engine (impls/engine_impl.rs), engine::helper (impls/helper.rs), other
    assert_eq!(report.modules, 4, "{report}");
    let cycle = only_cycle("path_attr");
    assert_eq!(cycle.modules, ["engine", "other"]);
    assert_eq!(
        edges(&cycle),
        [
            "engine -> other engine_impl.rs:5",
            "other -> engine other.rs:1"
        ]
    );
}

#[test]
fn inline_modules_are_nodes_of_their_own() {
    let report = report("inline_mod");
    // crate, outer, outer::filechild (src/outer/filechild.rs), outer::inner, leaf
    assert_eq!(report.modules, 5, "{report}");
    let cycle = only_cycle("inline_mod");
    assert_eq!(cycle.modules, ["outer", "outer::inner"]);
    assert_eq!(
        edges(&cycle),
        [
            "outer -> outer::inner lib.rs:13",
            "outer::inner -> outer lib.rs:6"
        ]
    );
}

#[test]
fn a_module_imported_by_name_resolves_through_the_import() {
    // `use crate::b;` then `b::inner::g()`: the path points into `b::inner`.
    let cycle = only_cycle("alias");
    assert_eq!(cycle.modules, ["a", "b::inner"]);
    assert_eq!(
        edges(&cycle),
        ["a -> b::inner a.rs:4", "b::inner -> a inner.rs:4"]
    );
}

#[test]
fn this_tool_is_acyclic() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let report = check(&root).expect("reads its own source");
    assert!(report.cycles.is_empty(), "{report}");
    assert!(report.modules >= 7, "{report}");
}

#[test]
fn a_missing_module_file_is_an_error() {
    let dir = std::env::temp_dir().join(format!("modcycles-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("lib.rs"), "mod gone;\n").expect("write");
    let err = check(&dir.join("lib.rs")).expect_err("gone.rs does not exist");
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert!(format!("{err:#}").contains("module `gone`"), "{err:#}");
}
