//! No import circles between the files of `src/` and of the workspace's crates (`crates/*/src/`).
//!
//! What it reads: every `src/**/*.rs` and `crates/*/src/**/*.rs`, as text, with comments, string
//! and char literals removed. One file is one node (`a/mod.rs` and `a.rs` are module `a`; `a/b.rs`
//! is `a::b`; an inline `mod x { … }` belongs to the file it is written in). A crate's files are
//! the modules the root crate re-exports it as: `crates/keys/src/lib.rs` is `keys`,
//! `crates/keys/src/tuple.rs` is `keys::tuple` (`tree.rs` says how), so the circles are looked for
//! across crates as within one. An edge `f → g` is one of:
//!
//! - a `use` item in `f` (any nesting, `{…}` groups expanded) that names an item of `g`, with the
//!   path starting at `crate::`, `super::`, `self::`, a workspace crate's name (`mosaic_keys::`) or
//!   a child module of the scope it is in;
//! - a path written inline in code (`crate::a::b::f(…)`, `super::X`, `child::f`, or `m::f` where
//!   `m` is a module brought in by a `use`) that reaches an item of `g`.
//!
//! Where a path goes through a `use` of another module (`crate::service::Result` is `use`d in
//! `service/mod.rs` from `service/error.rs`), it is followed to the file the name comes from, so a
//! `pub use` re-export is a passage, not an import: a `mod.rs` that only re-exports its children
//! does not import them, and a child that names `super::Result` imports `error.rs`, not its
//! parent. A `use` of a whole module is no edge by itself; the paths through it are. A `mod x;`
//! declaration is no edge. A child that uses an item its parent file defines (`super::ViewInfo`
//! from `views/read.rs`) is an edge child → parent, and a parent that calls into a child
//! (`read::readable(…)` in `views/mod.rs`) is an edge parent → child, so the two are a circle.
//! Paths into other crates (`std::`, `serde::`) are not followed; `mosaicdb::` (from `main.rs`)
//! is the root crate.
//!
//! A circle is a strongly connected component of more than one file. The test prints the circles
//! it finds, each with the imports inside it (file:line → file), and fails when they differ from
//! `ALLOWED` below.
//!
//! `folders.rs` is the same graph one level up: each file in its unit (a top-level folder, or a
//! child of `service/`), and the directions allowed between units in a table of layers
//! (`folders::allowed`). Edges against the table and circles between units are debts listed in
//! `ALLOWED_EDGES` and `ALLOWED_UNIT_CIRCLES`, which may only shrink.
//!
//! `docs.rs` is a second check on the sources: the error-code table of `docs/errors.md` against
//! the codes the sources can answer with (its module doc says what it reads).
mod docs;
mod folders;
mod graph;
mod tree;
mod walk;

use graph::Graph;
use std::collections::BTreeSet;
use std::path::Path;

/// The circles allowed to remain: none. (Were one ever let in as debt, it would be listed here,
/// files as paths from the repository root, sorted; the test fails on a new circle, on a circle that grows,
/// and on an entry that no longer matches a circle, so the list only shrinks.)
const ALLOWED: &[&[&str]] = &[];

#[test]
fn no_new_import_circles() {
    let graph = Graph::read(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(graph.files.iter().any(|f| f.starts_with("crates/")), "no file of crates/ read");
    let circles = graph.circles();
    let report = graph.describe(&circles);
    println!("{} import circle(s) between {} files:\n{report}", circles.len(), graph.files.len());
    let found: BTreeSet<Vec<String>> = circles.iter().cloned().collect();
    let allowed: BTreeSet<Vec<String>> = ALLOWED.iter().map(|c| c.iter().map(|f| f.to_string()).collect()).collect();
    let mut problems = Vec::new();
    for circle in found.difference(&allowed) {
        let grew = allowed.iter().any(|a| a.iter().all(|f| circle.contains(f)));
        let part = allowed.iter().any(|a| circle.iter().all(|f| a.contains(f)));
        let kind = match (grew, part) {
            (true, _) => "a circle that grew",
            (false, true) => "what is left of an allowed circle that shrank or split (put it in ALLOWED)",
            (false, false) => "a new circle",
        };
        problems.push(format!("{kind}: {}", circle.join(", ")));
    }
    for circle in allowed.difference(&found) {
        problems.push(format!(
            "an allowed circle that is no longer there (shrink or remove it in ALLOWED): {}",
            circle.join(", ")
        ));
    }
    assert!(problems.is_empty(), "{}\n\nthe circles now:\n{report}", problems.join("\n"));
}

/// Imports between units that the layers forbid, left from before the layers were drawn:
/// `(from, to)`, sorted. Empty now: an entry would be a debt, and the test fails on a new one and
/// on an entry no longer found, so the list could only shrink.
const ALLOWED_EDGES: &[(&str, &str)] = &[];

/// Circles between units, left from before the layers were drawn, each sorted: none now (an
/// entry could only shrink).
const ALLOWED_UNIT_CIRCLES: &[&[&str]] = &[];

#[test]
fn units_follow_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (units, why) = folders::units(&Graph::read(root));
    let unknown: Vec<&String> = units.files.iter().filter(|u| folders::layer(u).is_none()).collect();
    assert!(unknown.is_empty(), "units with no layer (place them in tests/layers/folders.rs): {unknown:?}");
    let found: BTreeSet<(String, String)> =
        units.edges.keys().filter(|(a, b)| !folders::allowed(a, b)).cloned().collect();
    let allowed: BTreeSet<(String, String)> =
        ALLOWED_EDGES.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    let mut problems = Vec::new();
    for edge in found.difference(&allowed) {
        let files: Vec<&String> = why[edge].iter().take(3).collect();
        problems.push(format!("a new import against the layers: {} → {} ({files:?})", edge.0, edge.1));
    }
    for edge in allowed.difference(&found) {
        problems.push(format!("a listed import that is no longer there (remove it): {} → {}", edge.0, edge.1));
    }
    let listing: Vec<String> = found.iter().map(|(a, b)| format!("    (\"{a}\", \"{b}\"),")).collect();
    println!("{} import(s) against the layers:\n{}", found.len(), listing.join("\n"));
    assert!(
        problems.is_empty(),
        "{}\n\nthe imports against the layers now:\n{}",
        problems.join("\n"),
        listing.join("\n")
    );
}

#[test]
fn no_new_unit_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (units, _) = folders::units(&Graph::read(root));
    let found: BTreeSet<Vec<String>> = units.circles().into_iter().collect();
    let allowed: BTreeSet<Vec<String>> =
        ALLOWED_UNIT_CIRCLES.iter().map(|c| c.iter().map(|u| u.to_string()).collect()).collect();
    let listing: Vec<String> = found.iter().map(|c| format!("    &{c:?},")).collect();
    println!("{} circle(s) between units:\n{}", found.len(), listing.join("\n"));
    assert_eq!(
        found,
        allowed,
        "the circles between units changed (the list may only shrink); now:\n{}",
        listing.join("\n")
    );
}

#[test]
fn unit_table_reads_as_documented() {
    assert_eq!(folders::unit_of("service/mod.rs"), "service");
    assert_eq!(folders::unit_of("service/graph/paths.rs"), "service/graph");
    assert_eq!(folders::unit_of("service/batch.rs"), "service/batch.rs");
    assert_eq!(folders::unit_of("api/documents.rs"), "api");
    assert!(folders::allowed("service/graph", "core"));
    assert!(!folders::allowed("core", "service/graph"));
    assert!(!folders::allowed("service/graph", "service"));
    assert!(folders::allowed("service/vectors", "service/search"));
    assert!(!folders::allowed("service/search", "service/vectors"));
    assert!(!folders::allowed("storage", "keys"));
    assert!(folders::allowed("api", "service"));
}

#[test]
fn reader_sees_uses_paths_and_passages() {
    // A tiny tree: a/mod.rs re-exports b's item and calls c; c uses the parent's own item.
    let files = [
        ("lib.rs", "mod a;"),
        ("a/mod.rs", "mod b; mod c; pub use b::Thing; pub struct Own; fn f() { c::run(); } // crate::z::x"),
        ("a/b.rs", "pub struct Thing; const S: &str = \"crate::a::c::run\";"),
        ("a/c.rs", "use super::{Own, Thing};\npub fn run() { let _ = crate::z::f(); }"),
        ("z.rs", "pub fn f() {}"),
    ];
    let graph = Graph::from_sources(files.iter().map(|(p, s)| (p.to_string(), s.to_string())).collect());
    let edges: Vec<(&str, &str)> = graph.edges.keys().map(|(f, t)| (f.as_str(), t.as_str())).collect();
    assert_eq!(edges, [("a/c.rs", "a/b.rs"), ("a/c.rs", "a/mod.rs"), ("a/c.rs", "z.rs"), ("a/mod.rs", "a/c.rs")]);
    assert_eq!(graph.circles(), [vec!["a/c.rs".to_string(), "a/mod.rs".to_string()]]);
}

#[test]
fn reader_follows_paths_into_and_inside_workspace_crates() {
    // The root crate re-exports crate `z` (crates/z) as `z`; z's lib uses its own child through
    // `crate::`, and its child calls back into the root crate's `a` by the crate's name.
    let source = |name: &str, krate: &[&str], text: &str| {
        let krate: Vec<String> = krate.iter().map(|s| s.to_string()).collect();
        let rel = name.rsplit_once("src/").map_or(name, |(_, rel)| rel);
        tree::Source { module: tree::module_of(&krate, rel), name: name.into(), krate, text: text.into() }
    };
    let files = vec![
        source("src/lib.rs", &[], "pub use mosaic_z as z; mod a;"),
        source("src/a.rs", &[], "use crate::z::Item; pub fn f() {}"),
        source("crates/z/src/lib.rs", &["z"], "mod inner; pub use inner::Item; fn g() { crate::inner::h(); }"),
        source("crates/z/src/inner.rs", &["z"], "pub struct Item; pub fn h() { mosaicdb::a::f(); }"),
    ];
    let graph = Graph::from_tree(files);
    let edges: Vec<(&str, &str)> = graph.edges.keys().map(|(f, t)| (f.as_str(), t.as_str())).collect();
    assert_eq!(
        edges,
        [
            ("crates/z/src/inner.rs", "src/a.rs"),
            ("crates/z/src/lib.rs", "crates/z/src/inner.rs"),
            ("src/a.rs", "crates/z/src/inner.rs")
        ]
    );
    assert_eq!(graph.circles(), [vec!["crates/z/src/inner.rs".to_string(), "src/a.rs".to_string()]]);
}
