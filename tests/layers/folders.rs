//! The folder-level graph of `src/`: the file graph with each file put in its unit, and the
//! table of the directions allowed between units.
//!
//! A unit is a crate of the workspace (`crates/core` is `core`), or a top-level folder or file of
//! `src/` (`api`, `main.rs` …), except under `service/`, where each child is a unit of its own
//! (`service/graph`, `service/pipeline`, `service/info.rs` …) and `service/mod.rs`, the
//! composition root, is the unit `service`.
//! An import between two files of different units is an edge between the units.
//!
//! The layers, from the bottom: the key and entity codecs; storage; the catalog; the core
//! (`core`, the crate `crates/core`: what every model uses and no model owns); the models, each over the core
//! and the layers below, plus the edges between models declared in [`MODEL_EDGES`]; the
//! composition (`service` and every service unit that calls several models); the API; the
//! server, tools and background tasks at the top. An edge may only point down (or, between
//! models, along a declared edge).
use crate::graph::Graph;
use std::collections::{BTreeMap, BTreeSet};

/// The models: each owns its folder under `service/` (or its crate: `timeseries`), holds a handle
/// over the core and names no composition unit.
pub const MODELS: &[&str] = &[
    "service/changefeed",
    "service/graph",
    "service/history",
    "service/indexes",
    "service/query",
    "service/search",
    "timeseries",
    "service/ttl",
    "service/vectors",
    "service/views",
];

/// The edges allowed between models, in one direction: vectors rank by search and query, search
/// filters through query, and query plans over indexes and views and reads history.
pub const MODEL_EDGES: &[(&str, &str)] = &[
    ("service/query", "service/history"),
    ("service/query", "service/indexes"),
    ("service/query", "service/views"),
    ("service/search", "service/query"),
    ("service/vectors", "service/query"),
    ("service/vectors", "service/search"),
];

/// The units that compose the models: the composition root and everything that calls several
/// models (the write pipeline, documents, batch, import, tables, index and view lifecycles, the
/// checker, figures, databases, cluster, backup).
pub const COMPOSITION: &[&str] = &[
    "service",
    "service/backup",
    "service/check",
    "service/cluster",
    "service/databases",
    "service/info.rs",
    "service/metrics_snapshot.rs",
    "service/pipeline",
    "service/schema.rs",
    "service/sql",
    "service/tests",
];

/// The layer of a unit, from the bottom (None: a unit the table does not know yet).
pub fn layer(unit: &str) -> Option<u32> {
    Some(match unit {
        "keys" | "entity" => 0,
        "storage" => 1,
        "catalog" => 2,
        "core" => 3,
        u if MODELS.contains(&u) => 4,
        u if COMPOSITION.contains(&u) => 5,
        "api" => 6,
        "server" | "server.rs" | "tools" | "background" | "main.rs" | "lib.rs" => 7,
        _ => return None,
    })
}

/// Whether the table allows an import from unit `from` into unit `to`.
pub fn allowed(from: &str, to: &str) -> bool {
    let (Some(a), Some(b)) = (layer(from), layer(to)) else { return false };
    match (a, b) {
        // the codecs and storage stand alone
        (0 | 1, _) => false,
        // models: down, or along a declared edge
        (4, 4) => MODEL_EDGES.contains(&(from, to)),
        // the composition units call one another (their circles are the other check's)
        (5, 5) => true,
        // the top: everything below it, and its own parts
        (7, 7) => true,
        _ => b < a,
    }
}

/// The unit of a file, named from the repository root (`src/…`) or from `src/`: a crate of the
/// workspace (`crates/keys/src/…`) is one unit, named as its folder.
pub fn unit_of(file: &str) -> String {
    if let Some(rest) = file.strip_prefix("crates/") {
        return rest.split('/').next().unwrap_or_default().to_string();
    }
    let file = file.strip_prefix("src/").unwrap_or(file);
    let parts: Vec<&str> = file.split('/').collect();
    match parts.as_slice() {
        ["service", "mod.rs"] => "service".to_string(),
        ["service", child, ..] => format!("service/{child}"),
        [top, ..] => top.to_string(),
        [] => String::new(),
    }
}

/// The units and the imports between them: each edge with the file imports it stands for.
pub fn units(files: &Graph) -> (Graph, BTreeMap<(String, String), BTreeSet<String>>) {
    let mut names = BTreeSet::new();
    let mut edges = BTreeMap::new();
    let mut why: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for file in &files.files {
        names.insert(unit_of(file));
    }
    for ((from, to), lines) in &files.edges {
        let (a, b) = (unit_of(from), unit_of(to));
        // the crate roots declare modules and hold no item: a path the reader cannot place (one
        // into another crate) lands there
        if a == b || b == "lib.rs" || b == "main.rs" {
            continue;
        }
        edges.entry((a.clone(), b.clone())).or_insert_with(BTreeSet::new).extend(lines.iter().copied());
        let first = lines.iter().next().copied().unwrap_or(0);
        why.entry((a, b)).or_default().insert(format!("{from}:{first} → {to}"));
    }
    (Graph { files: names.into_iter().collect(), edges }, why)
}
