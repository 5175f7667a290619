//! # modcycles
//!
//! Finds import cycles between the modules of one crate, without compiling it: the
//! module tree is read with `syn` from a crate root (`lib.rs`, or any root file), and
//! module A depends on module B when A's code names a path into B.
//!
//! - [`tree`]: the module tree, followed from `mod x;` declarations (`x.rs`,
//!   `x/mod.rs`, `#[path]`) and inline `mod x { .. }` blocks. `#[cfg(test)]` modules
//!   are left out: test code is not the architecture.
//! - [`refs`]: the paths each module's code names (`use` trees, paths in expressions,
//!   types, patterns and macro invocations), skipping `#[cfg(test)]` items.
//! - [`resolve`]: a path to the module it points into, the longest prefix that is a
//!   module (`crate::proxy::ctx::RequestCtx` -> `proxy::ctx`).
//! - [`graph`]: the dependency graph and its cycles (strongly connected components of
//!   more than one module), each edge with one example `file:line`.
//! - [`layers`]: layering rules (`--forbid control=proxy`): no module under one path may
//!   depend on one under another, directly or through others.
//!
//! A `main.rs` next to a `lib.rs` is a separate crate whose `crate_name::` paths name
//! the library as an external crate; check it as its own root when it has modules.

pub mod cfg;
pub mod edge;
pub mod graph;
pub mod layers;
pub mod refs;
pub mod resolve;
pub mod tokens;
pub mod tree;

pub use graph::{check, check_with, Cycle, EdgeExample, Report};
pub use layers::{Rule, Violation};
