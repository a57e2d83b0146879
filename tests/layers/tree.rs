//! The source files the checks read: the root crate's `src/**/*.rs` and each workspace crate's
//! `crates/{name}/src/**/*.rs`, every file with the module it is as the root crate sees it.
//!
//! The root crate re-exports each crate under its folder's name (`pub use mosaic_keys as keys;`
//! in `src/lib.rs`, or `pub use mosaic_core as core;` in `src/service/mod.rs`; checked here), so
//! `crates/keys/src/lib.rs` is the module `keys`, `crates/keys/src/tuple.rs` is `keys::tuple` and
//! `crates/core/src/cancel.rs` is `service::core::cancel`: the file graph is one graph across the
//! crates, as it was when they were folders of `src/`. Inside a crate `crate::x` is `{module}::x`;
//! anywhere, `mosaic_{name}::x` is `{module}::x`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One source file.
pub struct Source {
    /// its path from the repository root (`src/service/mod.rs`, `crates/keys/src/lib.rs`)
    pub name: String,
    /// the module it is (`[service]`, `[keys]`; `[]` for `src/lib.rs`, `[<bin>]` for `src/main.rs`)
    pub module: Vec<String>,
    /// the module its crate's root is (`[]` for the root crate, `[keys]` for `crates/keys`)
    pub krate: Vec<String>,
    pub text: String,
}

/// Every source file of the root crate and of the crates under `crates/`, sorted by name.
pub fn read(repo: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    for (dir, krate) in crate_roots(repo) {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for file in files {
            let rel = file.strip_prefix(&dir).expect("under its src").to_string_lossy().replace('\\', "/");
            let name = file.strip_prefix(repo).expect("under the repository").to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
            out.push(Source { name, module: module_of(&krate, &rel), krate: krate.clone(), text });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The crates' names as written in paths (`mosaic_keys` → `[keys]`, and `mosaicdb` → `[]`).
pub fn externs(sources: &[Source]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::from([("mosaicdb".to_string(), Vec::new())]);
    for s in sources {
        if let Some(folder) = s.name.strip_prefix("crates/").and_then(|rest| rest.split('/').next()) {
            out.insert(format!("mosaic_{folder}"), s.krate.clone());
        }
    }
    out
}

/// `src/` as the root crate, then each `crates/{name}/src/` as the module it is re-exported as:
/// `pub use mosaic_{name} as {name};` in `src/lib.rs` makes it `{name}`, in `src/service/mod.rs`
/// `service::{name}` (the service's core is a crate of its own, seen by the models where it was).
fn crate_roots(repo: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut roots = vec![(repo.join("src"), Vec::new())];
    let Ok(entries) = std::fs::read_dir(repo.join("crates")) else { return roots };
    let mut root_files = Vec::new();
    rust_files(&repo.join("src"), &mut root_files);
    let root_texts: Vec<(Vec<String>, String)> = root_files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(repo.join("src")).expect("under src").to_string_lossy().replace('\\', "/");
            (module_of(&[], &rel), std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{rel}: {e}")))
        })
        .collect();
    let mut names: Vec<String> =
        entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for name in names {
        let reexport = format!("pub use mosaic_{name} as {name};");
        let mut at = root_texts.iter().filter(|(_, text)| text.contains(&reexport));
        let (Some((module, _)), None) = (at.next(), at.next()) else {
            panic!("no one file of src/ says `{reexport}`: crates/{name} has no module to be")
        };
        let module: Vec<String> = module.iter().cloned().chain([name.clone()]).collect();
        roots.push((repo.join("crates").join(&name).join("src"), module));
    }
    roots
}

/// `service/views/mod.rs` → [service, views]; `lib.rs` → the crate's root; `main.rs` of the root
/// crate → [<bin>] (the binary: its own crate, which nothing imports).
pub fn module_of(krate: &[String], file: &str) -> Vec<String> {
    if krate.is_empty() && file == "main.rs" {
        return vec!["<bin>".to_string()];
    }
    let stem = file.strip_suffix(".rs").expect(".rs");
    let mut parts: Vec<String> = krate.iter().cloned().chain(stem.split('/').map(str::to_string)).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("readable dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}
