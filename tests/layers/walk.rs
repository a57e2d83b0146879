//! One file's tokens (comments and literals dropped) and what they say: its `use` items, its
//! inline paths into this crate and its inline modules.
use std::collections::BTreeMap;

pub struct Use {
    pub scope: Vec<String>,
    /// Absolute (`crate`-relative) path; `["<extern>", …]` for another crate's.
    pub path: Vec<String>,
    /// The name it binds in its scope; None for a glob.
    pub name: Option<String>,
    pub public: bool,
    pub line: usize,
}

pub struct Walker<'a> {
    modules: &'a BTreeMap<Vec<String>, String>,
    /// the module of the file's crate root: what `crate::` names
    krate: &'a [String],
    /// the module each crate's name is (`mosaic_keys` → `[keys]`, `mosaicdb` → `[]`)
    externs: &'a BTreeMap<String, Vec<String>>,
    /// (module path, brace depth inside it) for the file and each inline `mod x { … }`.
    scopes: Vec<(Vec<String>, usize)>,
    depth: usize,
    pub inline_modules: Vec<Vec<String>>,
    pub uses: Vec<Use>,
    pub paths: Vec<(Vec<String>, usize)>,
}

impl<'a> Walker<'a> {
    pub fn new(
        module: Vec<String>,
        krate: &'a [String],
        modules: &'a BTreeMap<Vec<String>, String>,
        externs: &'a BTreeMap<String, Vec<String>>,
    ) -> Self {
        Walker {
            modules,
            krate,
            externs,
            scopes: vec![(module, 0)],
            depth: 0,
            inline_modules: Vec::new(),
            uses: Vec::new(),
            paths: Vec::new(),
        }
    }

    fn scope(&self) -> &Vec<String> {
        &self.scopes.last().expect("file scope").0
    }

    pub fn walk(&mut self, toks: &[Tok]) {
        let mut i = 0;
        while i < toks.len() {
            let t = &toks[i].text;
            match t.as_str() {
                "{" => self.depth += 1,
                "}" => {
                    if self.scopes.len() > 1 && self.scopes.last().is_some_and(|s| s.1 == self.depth) {
                        self.scopes.pop();
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                "pub" if toks.get(i + 1).is_some_and(|t| t.text == "(") => {
                    // `pub(crate)`, `pub(super)`, `pub(in path)`: a visibility, not a path.
                    while toks.get(i).is_some_and(|t| t.text != ")") {
                        i += 1;
                    }
                }
                "mod" if toks.get(i + 2).is_some_and(|t| t.text == "{") => {
                    let mut path = self.scope().clone();
                    path.push(toks[i + 1].text.clone());
                    self.inline_modules.push(path.clone());
                    self.depth += 1;
                    self.scopes.push((path, self.depth));
                    i += 3;
                    continue;
                }
                "use" if toks.get(i + 1).is_some_and(|t| t.text != "<") => {
                    let public = is_public(toks, i);
                    let mut found = Vec::new();
                    i = use_tree(toks, i + 1, Vec::new(), &mut found);
                    for (rel, name, line) in found {
                        let path = self.absolute(&rel).unwrap_or_else(|| {
                            std::iter::once("<extern>".to_string()).chain(rel.iter().cloned()).collect()
                        });
                        self.uses.push(Use { scope: self.scope().clone(), path, name, public, line });
                    }
                    continue;
                }
                _ => {}
            }
            if toks[i].ident && (i == 0 || toks[i - 1].text != "::") && toks.get(i + 1).is_some_and(|t| t.text == "::")
            {
                let line = toks[i].line;
                let mut rel = vec![t.clone()];
                let mut j = i + 1;
                while toks.get(j).is_some_and(|t| t.text == "::") && toks.get(j + 1).is_some_and(|t| t.ident) {
                    rel.push(toks[j + 1].text.clone());
                    j += 2;
                }
                if let Some(path) = self.absolute(&rel).or_else(|| self.through_module_use(&rel)) {
                    self.paths.push((path, line));
                }
                i = j;
                continue;
            }
            i += 1;
        }
    }

    /// A path as written, made absolute from the current scope; None if it is another crate's.
    fn absolute(&self, rel: &[String]) -> Option<Vec<String>> {
        let first = rel.first()?;
        let mut scope = self.scope().clone();
        let rest = match first.as_str() {
            "crate" => return Some(self.krate.iter().chain(&rel[1..]).cloned().collect()),
            name if self.externs.contains_key(name) => {
                return Some(self.externs[name].iter().chain(&rel[1..]).cloned().collect());
            }
            "self" => &rel[1..],
            "super" => {
                let supers = rel.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    scope.pop()?;
                }
                &rel[supers..]
            }
            _ => {
                scope.push(first.clone());
                if !self.modules.contains_key(&scope) && !self.inline_modules.contains(&scope) {
                    return None;
                }
                &rel[1..]
            }
        };
        Some(scope.into_iter().chain(rest.iter().cloned()).collect())
    }

    /// `m::f` where `m` was brought into this scope by `use crate::…::m`.
    fn through_module_use(&self, rel: &[String]) -> Option<Vec<String>> {
        let u = self.uses.iter().rev().find(|u| {
            u.name.as_deref() == Some(rel[0].as_str())
                && self.modules.contains_key(&u.path)
                && self.scope().starts_with(&u.scope)
        })?;
        Some(u.path.iter().chain(&rel[1..]).cloned().collect())
    }
}

/// Whether the `use` at `i` is `pub` or `pub(…)`: a re-export, not an import.
fn is_public(toks: &[Tok], i: usize) -> bool {
    let mut j = i;
    if j > 0 && toks[j - 1].text == ")" {
        while j > 0 && toks[j - 1].text != "(" {
            j -= 1;
        }
        j = j.saturating_sub(1);
    }
    j > 0 && toks[j - 1].text == "pub"
}

/// Expands one use tree from `i` (after `use`), returning the index after it. Each leaf is
/// (path as written, the name it binds or None for a glob, line).
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) -> usize {
    let mut path = prefix;
    while let Some(t) = toks.get(i) {
        match t.text.as_str() {
            "::" => i += 1,
            "*" => {
                out.push((path, None, t.line));
                return skip_to_end(toks, i + 1);
            }
            "{" => {
                i += 1;
                while toks.get(i).is_some_and(|t| t.text != "}") {
                    i = use_tree(toks, i, path.clone(), out);
                    if toks.get(i).is_some_and(|t| t.text == ",") {
                        i += 1;
                    }
                }
                return skip_to_end(toks, i + 1);
            }
            _ if t.ident => {
                let leaf = toks.get(i + 1).is_none_or(|n| n.text != "::");
                if t.text == "self" && !path.is_empty() {
                    // `a::{self, b}`: the module `a` itself.
                } else {
                    path.push(t.text.clone());
                }
                i += 1;
                if leaf {
                    let mut name = path.last().cloned().unwrap_or_default();
                    if toks.get(i).is_some_and(|n| n.text == "as") {
                        name = toks.get(i + 1).map(|n| n.text.clone()).unwrap_or_default();
                        i += 2;
                    }
                    out.push((path, Some(name), t.line));
                    return skip_to_end(toks, i);
                }
            }
            _ => return i + 1,
        }
    }
    i
}

/// After a leaf or a group: stop before `,` / `}` (inside a group) or after `;` (the end).
fn skip_to_end(toks: &[Tok], i: usize) -> usize {
    match toks.get(i).map(|t| t.text.as_str()) {
        Some(";") => i + 1,
        _ => i,
    }
}

// ---- tokens ------------------------------------------------------------------------------------

pub struct Tok {
    text: String,
    ident: bool,
    line: usize,
}

/// Identifiers, `::` and single punctuation, with their lines; comments, strings, chars,
/// lifetimes and numbers dropped.
pub fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let count = |s: &[char]| s.iter().filter(|&&ch| ch == '\n').count();
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let (start, mut nest) = (i, 0);
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    nest += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count(&c[start..i.min(c.len())]);
        } else if ch == '"' {
            let start = i;
            i = skip_string(&c, i);
            line += count(&c[start..i.min(c.len())]);
        } else if ch == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1; // a lifetime: its name is lexed (and harmless) next
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            let mut hashes = i;
            while raw && c.get(hashes) == Some(&'#') {
                hashes += 1;
            }
            if raw && c.get(hashes) == Some(&'"') {
                // r"…", r#"…"#: ends at a quote followed by as many hashes.
                let n = hashes - i;
                let start = i;
                i = hashes + 1;
                while i < c.len() && !(c[i] == '"' && (0..n).all(|k| c.get(i + 1 + k) == Some(&'#'))) {
                    i += 1;
                }
                i += 1 + n;
                line += count(&c[start..i.min(c.len())]);
            } else if matches!(word.as_str(), "b" | "c") && c.get(i) == Some(&'"') {
                let start = i;
                i = skip_string(&c, i);
                line += count(&c[start..i.min(c.len())]);
            } else if word == "b" && c.get(i) == Some(&'\'') {
                i += 1;
                while i < c.len() && c[i] != '\'' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            } else if word == "r" && c.get(i) == Some(&'#') {
                i += 1; // r#ident: the identifier follows
            } else {
                out.push(Tok { text: word, ident: true, line });
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok { text: "::".into(), ident: false, line });
            i += 2;
        } else {
            out.push(Tok { text: ch.to_string(), ident: false, line });
            i += 1;
        }
    }
    out
}

/// From an opening `"`, the index after the closing one.
fn skip_string(c: &[char], mut i: usize) -> usize {
    i += 1;
    while i < c.len() && c[i] != '"' {
        i += if c[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}
