//! The file graph of `src/` and `crates/*/src/`: the files, the imports between them (resolved
//! through `use` bindings to the file an item comes from) and its strongly connected components.
use crate::tree::{self, Source};
use crate::walk::{Tok, Walker, lex};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub struct Graph {
    /// paths from the repository root
    pub files: Vec<String>,
    /// (from, to) → the lines in `from` that import `to`.
    pub edges: BTreeMap<(String, String), BTreeSet<usize>>,
}

impl Graph {
    /// The graph of the repository at `repo` (see `tree.rs` for what it reads).
    pub fn read(repo: &Path) -> Graph {
        Graph::from_tree(tree::read(repo))
    }

    /// The graph of one crate's files, given as (path under its `src/`, text).
    pub fn from_sources(sources: Vec<(String, String)>) -> Graph {
        let sources = sources
            .into_iter()
            .map(|(name, text)| Source { module: tree::module_of(&[], &name), name, krate: Vec::new(), text })
            .collect();
        Graph::from_tree(sources)
    }

    pub fn from_tree(mut sources: Vec<Source>) -> Graph {
        sources.sort_by(|a, b| a.name.cmp(&b.name));
        let externs = tree::externs(&sources);
        // Pass 1: every module (file or inline) and the file it lives in.
        let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
        let lexed: Vec<(&Source, Vec<Tok>)> = sources.iter().map(|s| (s, lex(&s.text))).collect();
        for (s, _) in &lexed {
            modules.insert(s.module.clone(), s.name.clone());
        }
        for (s, toks) in &lexed {
            let mut walker = Walker::new(s.module.clone(), &s.krate, &modules, &externs);
            walker.walk(toks);
            for m in walker.inline_modules {
                modules.insert(m, s.name.clone());
            }
        }
        // Pass 2: every `use` (as a binding of its scope) and every inline path.
        let mut scans = Vec::new();
        let mut bindings: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for (s, toks) in &lexed {
            let mut walker = Walker::new(s.module.clone(), &s.krate, &modules, &externs);
            walker.walk(toks);
            for u in &walker.uses {
                if let Some(name) = &u.name {
                    bindings.entry(u.scope.clone()).or_default().insert(name.clone(), u.path.clone());
                }
            }
            scans.push((s.name.clone(), walker.uses, walker.paths));
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
        Graph { files: sources.into_iter().map(|s| s.name).collect(), edges }
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
