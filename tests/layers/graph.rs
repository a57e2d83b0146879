//! The file graph of `src/`: the files, the imports between them (resolved through `use`
//! bindings to the file an item comes from) and its strongly connected components.
use crate::walk::{Tok, Walker, lex};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

pub struct Graph {
    pub files: Vec<String>,
    /// (from, to) → the lines in `from` that import `to`.
    pub edges: BTreeMap<(String, String), BTreeSet<usize>>,
}

impl Graph {
    pub fn read(root: &Path) -> Graph {
        let mut paths = Vec::new();
        walk(root, &mut paths);
        let sources = paths
            .into_iter()
            .map(|p| {
                let rel = p.strip_prefix(root).expect("under src").to_string_lossy().replace('\\', "/");
                (rel, fs::read_to_string(&p).expect("readable source"))
            })
            .collect();
        Graph::from_sources(sources)
    }

    pub fn from_sources(mut sources: Vec<(String, String)>) -> Graph {
        sources.sort();
        // Pass 1: every module (file or inline) and the file it lives in.
        let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
        let lexed: Vec<(String, Vec<String>, Vec<Tok>)> =
            sources.iter().map(|(file, text)| (file.clone(), module_of(file), lex(text))).collect();
        for (file, module, _) in &lexed {
            modules.insert(module.clone(), file.clone());
        }
        for (file, module, toks) in &lexed {
            let mut walker = Walker::new(module.clone(), &modules);
            walker.walk(toks);
            for m in walker.inline_modules {
                modules.insert(m, file.clone());
            }
        }
        // Pass 2: every `use` (as a binding of its scope) and every inline path.
        let mut scans = Vec::new();
        let mut bindings: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for (file, module, toks) in &lexed {
            let mut walker = Walker::new(module.clone(), &modules);
            walker.walk(toks);
            for u in &walker.uses {
                if let Some(name) = &u.name {
                    bindings.entry(u.scope.clone()).or_default().insert(name.clone(), u.path.clone());
                }
            }
            scans.push((file.clone(), walker.uses, walker.paths));
        }
        let resolver = Resolver { modules: &modules, bindings: &bindings };
        let mut edges: BTreeMap<(String, String), BTreeSet<usize>> = BTreeMap::new();
        for (file, uses, paths) in scans {
            let imports = uses
                .iter()
                .filter(|u| !u.public && (u.name.is_none() || !modules.contains_key(&u.path)))
                .map(|u| (&u.path, u.line))
                .chain(paths.iter().map(|(p, l)| (p, *l)));
            for (path, line) in imports {
                if let Some(target) = resolver.file_of(path)
                    && target != file
                {
                    edges.entry((file.clone(), target)).or_default().insert(line);
                }
            }
        }
        Graph { files: sources.into_iter().map(|(f, _)| f).collect(), edges }
    }

    /// The strongly connected components of more than one file (Tarjan), each sorted, in order.
    pub fn circles(&self) -> Vec<Vec<String>> {
        let index: BTreeMap<&str, usize> = self.files.iter().enumerate().map(|(i, f)| (f.as_str(), i)).collect();
        let mut next = vec![Vec::new(); self.files.len()];
        for (from, to) in self.edges.keys() {
            if let (Some(&a), Some(&b)) = (index.get(from.as_str()), index.get(to.as_str())) {
                next[a].push(b);
            }
        }
        let mut t =
            Tarjan { next, index: vec![None; self.files.len()], low: vec![0; self.files.len()], ..Default::default() };
        for v in 0..self.files.len() {
            if t.index[v].is_none() {
                t.visit(v);
            }
        }
        let mut out: Vec<Vec<String>> = t
            .components
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut names: Vec<String> = c.into_iter().map(|i| self.files[i].clone()).collect();
                names.sort();
                names
            })
            .collect();
        out.sort();
        out
    }

    /// Each circle with the imports between its files, `from:line,line → to`.
    pub fn describe(&self, circles: &[Vec<String>]) -> String {
        let mut out = String::new();
        for circle in circles {
            out.push_str(&format!("- {} files: {}\n", circle.len(), circle.join(", ")));
            for ((from, to), lines) in &self.edges {
                if circle.contains(from) && circle.contains(to) {
                    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                    out.push_str(&format!("    {from}:{} → {to}\n", lines.join(",")));
                }
            }
        }
        out
    }
}

#[derive(Default)]
struct Tarjan {
    next: Vec<Vec<usize>>,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    stack: Vec<usize>,
    on_stack: BTreeSet<usize>,
    counter: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on_stack.insert(v);
        for w in self.next[v].clone() {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(i) if self.on_stack.contains(&w) => self.low[v] = self.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut component = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(&w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        fs::read_dir(dir).expect("readable dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `service/views/mod.rs` → [service, views]; `lib.rs` → [] (the crate root).
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").expect(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if file == "main.rs" {
        return vec!["<bin>".to_string()]; // the binary: its own crate, which nothing imports
    }
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

// ---- resolving a path to a file ----------------------------------------------------------------

struct Resolver<'a> {
    modules: &'a BTreeMap<Vec<String>, String>,
    /// scope → name → the absolute path a `use` in that scope binds the name to.
    bindings: &'a BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

impl Resolver<'_> {
    /// The file whose item an absolute path names, following `use` bindings (re-exports) on the way.
    fn file_of(&self, path: &[String]) -> Option<String> {
        let mut path = path.to_vec();
        for _ in 0..32 {
            let depth = (0..=path.len()).rev().find(|&n| self.modules.contains_key(&path[..n]))?;
            let module = &path[..depth];
            let forward = path.get(depth).and_then(|name| self.bindings.get(module)?.get(name));
            match forward {
                Some(target) if target.first().is_some_and(|s| s != "<extern>") => {
                    path = target.iter().chain(&path[depth + 1..]).cloned().collect();
                }
                Some(_) => return None,
                None => return Some(self.modules[module].clone()),
            }
        }
        None
    }
}
