//! The error codes of `docs/errors.md` against the codes the source can answer with.
//!
//! What it reads: every `src/**/*.rs` and `crates/*/src/**/*.rs` (see `tree.rs`) as tokens
//! (comments dropped, string literals kept), leaving
//! out `#[cfg(test)]` items and `tests.rs` files (unit tests, never served). A code is made in one
//! of these ways, and each is read:
//!
//! - `ServiceError::code` (`crates/core/src/error.rs`): a match over every variant, so a new variant
//!   does not compile without a code; every string literal in its body is a code;
//! - `ApiError::new(status, code, detail)` anywhere: `code` is a string literal; or a call of a
//!   function of the same file whose arms (`=> "…"`) are the codes (`code_of_status`); or a
//!   variable bound in the same function by `let (code, …) = match … { … => ("…", …), … }`, whose
//!   arms' first literals are the codes (arms that `return` are skipped);
//! - an `ApiError { … }` or `Problem { … }` built by hand must take its code from `….code()`,
//!   `self.code` or the `code` parameter of `ApiError::new`.
//!
//! Any other form is reported as unreadable and fails the test, with its file and line, so a new
//! way of making a code cannot slip past. The table is the first one under `## Error codes` in
//! `docs/errors.md`; its first column holds one code per row, in backticks.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(String),
    /// numbers, chars, lifetimes: nothing this reader looks at
    Other,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// The codes found, each with where it is made (`file:line`), and the places the reader could
/// not follow.
#[derive(Debug, Default)]
pub struct Codes {
    pub codes: BTreeMap<String, Vec<String>>,
    pub unreadable: Vec<String>,
}

impl Codes {
    fn add(&mut self, code: &str, file: &str, line: usize) {
        self.codes.entry(code.to_owned()).or_default().push(format!("{file}:{line}"));
    }

    fn cannot(&mut self, file: &str, line: usize, what: &str) {
        self.unreadable.push(format!("{file}:{line}: {what}"));
    }
}

/// Reads the codes out of `(path from the repository root, text)` pairs.
pub fn codes_in(sources: &[(String, String)]) -> Codes {
    let mut out = Codes::default();
    let mut saw_service_codes = false;
    for (file, text) in sources {
        if file.ends_with("tests.rs") {
            continue;
        }
        let toks = without_test_items(lex(text));
        if file == "crates/core/src/error.rs" {
            saw_service_codes |= service_codes(&toks, file, &mut out);
        }
        api_error_news(&toks, file, &mut out);
        built_by_hand(&toks, file, &mut out);
    }
    if !saw_service_codes {
        out.cannot("crates/core/src/error.rs", 0, "no `fn code` found in the ServiceError impl");
    }
    out
}

/// The string literals in the body of `fn code` of `crates/core/src/error.rs`.
fn service_codes(toks: &[Token], file: &str, out: &mut Codes) -> bool {
    let Some(at) = (0..toks.len()).find(|&i| is_ident(toks, i, "fn") && is_ident(toks, i + 1, "code")) else {
        return false;
    };
    let Some(open) = (at..toks.len()).find(|&i| is_punct(toks, i, "{")) else { return false };
    let close = matching(toks, open);
    for t in &toks[open..close] {
        if let Tok::Str(s) = &t.tok {
            out.add(s, file, t.line);
        }
    }
    true
}

/// Every `ApiError::new(…)` call: its second argument.
fn api_error_news(toks: &[Token], file: &str, out: &mut Codes) {
    for i in 0..toks.len() {
        if !(is_ident(toks, i, "ApiError")
            && is_punct(toks, i + 1, "::")
            && is_ident(toks, i + 2, "new")
            && is_punct(toks, i + 3, "("))
        {
            continue;
        }
        let line = toks[i].line;
        let args = arguments(toks, i + 3);
        let Some(code) = args.get(1) else {
            out.cannot(file, line, "ApiError::new with fewer than two arguments");
            continue;
        };
        match code.as_slice() {
            [Token { tok: Tok::Str(s), line }] => out.add(s, file, *line),
            [Token { tok: Tok::Ident(f), .. }, Token { tok: Tok::Punct(p), .. }, ..] if p == "(" => {
                arms_of_function(toks, f, file, line, out)
            }
            [Token { tok: Tok::Ident(v), .. }] => let_match(toks, i, v, file, line, out),
            _ => out.cannot(file, line, "ApiError::new whose code is neither a literal, a call nor a variable"),
        }
    }
}

/// The `=> "…"` arms of `fn name` in the same file; every arm must give a literal.
fn arms_of_function(toks: &[Token], name: &str, file: &str, line: usize, out: &mut Codes) {
    let Some(at) = (0..toks.len()).find(|&i| is_ident(toks, i, "fn") && is_ident(toks, i + 1, name)) else {
        return out.cannot(file, line, &format!("the code comes from `{name}`, which is not a function of this file"));
    };
    let Some(open) = (at..toks.len()).find(|&i| is_punct(toks, i, "{")) else {
        return out.cannot(file, line, &format!("`fn {name}` has no body"));
    };
    let close = matching(toks, open);
    let mut arms = 0;
    for i in open..close {
        if is_punct(toks, i, "=>") {
            arms += 1;
            match &toks[i + 1].tok {
                Tok::Str(s) => out.add(s, file, toks[i + 1].line),
                _ => out.cannot(file, toks[i].line, &format!("an arm of `fn {name}` that is not a string literal")),
            }
        }
    }
    if arms == 0 {
        out.cannot(file, line, &format!("`fn {name}` has no match arms to read codes from"));
    }
}

/// `let (var, …) = match … { arm => ("code", …), arm => { ("code", …) }, arm => return … }`
/// before the call at `call`, in the same function.
fn let_match(toks: &[Token], call: usize, var: &str, file: &str, line: usize, out: &mut Codes) {
    let binding = (0..call).rev().take_while(|&i| !is_ident(toks, i, "fn")).find(|&i| {
        is_ident(toks, i, "let")
            && is_punct(toks, i + 1, "(")
            && is_ident(toks, i + 2, var)
            && is_punct(toks, i + 3, ",")
    });
    let Some(at) = binding else {
        return out.cannot(file, line, &format!("the code `{var}` is not bound by `let ({var}, …) = match …`"));
    };
    let close_tuple = matching(toks, at + 1);
    if !(is_punct(toks, close_tuple + 1, "=") && is_ident(toks, close_tuple + 2, "match")) {
        return out.cannot(file, line, &format!("`let ({var}, …)` is not bound to a match"));
    }
    let Some(open) = (close_tuple..call).find(|&i| is_punct(toks, i, "{")) else {
        return out.cannot(file, line, "a match without a body");
    };
    let close = matching(toks, open);
    let mut depth = 0;
    for i in open + 1..close {
        match &toks[i].tok {
            Tok::Punct(p) if p == "{" || p == "(" || p == "[" => depth += 1,
            Tok::Punct(p) if p == "}" || p == ")" || p == "]" => depth -= 1,
            Tok::Punct(p) if p == "=>" && depth == 0 => {
                let mut j = i + 1;
                if is_punct(toks, j, "{") {
                    j += 1;
                }
                if is_ident(toks, j, "return") {
                    continue;
                }
                match (&toks[j].tok, toks.get(j + 1).map(|t| &t.tok)) {
                    (Tok::Punct(p), Some(Tok::Str(s))) if p == "(" => out.add(s, file, toks[j + 1].line),
                    _ => out.cannot(file, toks[i].line, &format!("an arm binding `{var}` that is not `(\"code\", …)`")),
                }
            }
            _ => {}
        }
    }
}

/// `ApiError { … }` and `Problem { … }` expressions (not their declarations or impls): the code
/// must come from `….code()`, `self.code` or `ApiError::new`'s own `code` parameter.
fn built_by_hand(toks: &[Token], file: &str, out: &mut Codes) {
    for i in 1..toks.len() {
        let name = match &toks[i].tok {
            Tok::Ident(n) if n == "ApiError" || n == "Problem" => n.as_str(),
            _ => continue,
        };
        let before = &toks[i - 1].tok;
        let declaration = matches!(before, Tok::Ident(w) if w == "struct" || w == "impl" || w == "for" || w == "enum")
            || matches!(before, Tok::Punct(p) if p == "->");
        if declaration || !is_punct(toks, i + 1, "{") {
            continue;
        }
        let close = matching(toks, i + 1);
        let field = (i + 2..close).find(|&j| is_ident(toks, j, "code") && !is_punct(toks, j - 1, "."));
        let Some(j) = field else {
            out.cannot(file, toks[i].line, &format!("a `{name} {{ … }}` without a `code` field"));
            continue;
        };
        let ok = if is_punct(toks, j + 1, ":") {
            // `code: e.code()` or `code: self.code.to_owned()`
            (is_punct(toks, j + 3, ".") && is_ident(toks, j + 4, "code"))
                && (is_punct(toks, j + 5, "(") || is_ident(toks, j + 2, "self"))
        } else {
            // the shorthand `code`: only inside `fn new(status, code: &'static str, …)`
            (0..i).rev().find(|&k| is_ident(toks, k, "fn")).is_some_and(|k| is_ident(toks, k + 1, "new"))
        };
        if !ok {
            out.cannot(file, toks[j].line, &format!("a `{name} {{ … }}` whose code is not read from a code"));
        }
    }
}

/// The codes in the first table under `## Error codes`, each with its line; or why the table
/// cannot be read.
pub fn documented(markdown: &str) -> Result<BTreeMap<String, usize>, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let heading =
        lines.iter().position(|l| l.trim() == "## Error codes").ok_or("no `## Error codes` heading".to_owned())?;
    let start = (heading + 1..lines.len())
        .find(|&i| lines[i].starts_with('|'))
        .ok_or("no table under `## Error codes`".to_owned())?;
    let mut codes = BTreeMap::new();
    for (i, line) in lines.iter().enumerate().skip(start + 2) {
        if !line.starts_with('|') {
            break;
        }
        let cell = line.split('|').nth(1).unwrap_or("").trim();
        let code = cell
            .strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .filter(|c| {
                !c.is_empty() && c.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
            })
            .ok_or(format!("line {}: the first cell is not one code in backticks: {cell:?}", i + 1))?;
        if codes.insert(code.to_owned(), i + 1).is_some() {
            return Err(format!("line {}: `{code}` is listed twice", i + 1));
        }
    }
    Ok(codes)
}

#[test]
fn the_error_table_lists_exactly_the_codes_the_source_returns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources: Vec<(String, String)> = crate::tree::read(root).into_iter().map(|s| (s.name, s.text)).collect();
    let found = codes_in(&sources);
    assert!(
        found.unreadable.is_empty(),
        "tests/layers/docs.rs cannot read how these places make an error code (teach it the form, or use one it reads):\n{}",
        found.unreadable.join("\n")
    );
    let doc = std::fs::read_to_string(root.join("docs/errors.md")).expect("docs/errors.md");
    let table = documented(&doc).unwrap_or_else(|e| panic!("docs/errors.md: {e}"));
    let made: BTreeSet<&String> = found.codes.keys().collect();
    let listed: BTreeSet<&String> = table.keys().collect();
    let missing: Vec<String> =
        made.difference(&listed).map(|c| format!("`{c}` (made at {})", found.codes[*c].join(", "))).collect();
    let extra: Vec<String> = listed.difference(&made).map(|c| format!("`{c}` (line {})", table[*c])).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the error-code table of docs/errors.md differs from the codes in the sources\n\
         missing from the table: {}\nlisted but never made: {}",
        if missing.is_empty() { "none".to_owned() } else { missing.join("; ") },
        if extra.is_empty() { "none".to_owned() } else { extra.join("; ") },
    );
    println!("{} error codes, each in the table", made.len());
}

/// Every route of the committed OpenAPI document is named in some page of `docs/`, and every flag
/// and `MOSAIC_*` variable of `src/main.rs` in `docs/configuration.md`, so that moving text between
/// pages cannot lose one.
#[test]
fn every_route_flag_and_variable_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = String::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("openapi/openapi.json")).unwrap()).unwrap();
    let mut missing: Vec<String> = spec["paths"]
        .as_object()
        .expect("openapi paths")
        .keys()
        // a database's routes are the plain ones under `/v1/db/{db}/` (one page says so); its
        // Prometheus API is `/api/v1/…` under it
        .map(|route| match route.strip_prefix("/v1/db/{db}/") {
            Some(rest) if rest.starts_with("api/v1/") => format!("/{rest}"),
            Some(rest) if pages.contains("/v1/db/{db}/…`") => format!("/v1/{rest}"),
            _ => route.clone(),
        })
        .filter(|route| !pages.contains(&format!("{route}`")) && !pages.contains(&format!("{route}?")))
        .map(|route| format!("route {route} (in no page of docs/)"))
        .collect();
    let config = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let toks = lex(&std::fs::read_to_string(root.join("src/main.rs")).unwrap());
    for (i, t) in toks.iter().enumerate() {
        let name = match &t.tok {
            Tok::Str(s) if s.starts_with("MOSAIC_") => s.clone(),
            // `#[arg(long …)] name: Type` is the flag `--name`
            Tok::Ident(w) if w == "arg" && is_punct(&toks, i - 1, "[") && is_ident(&toks, i + 2, "long") => {
                let end = matching(&toks, i - 1);
                let field = (end + 1..toks.len()).find(|&j| is_punct(&toks, j + 1, ":") && !is_punct(&toks, j, ":"));
                match field.map(|j| &toks[j].tok) {
                    Some(Tok::Ident(f)) => format!("--{}", f.replace('_', "-")),
                    _ => panic!("src/main.rs:{}: an #[arg(long)] without a field after it", t.line),
                }
            }
            _ => continue,
        };
        if !mentions(&config, &name) {
            missing.push(format!("{name} (src/main.rs:{}, not in docs/configuration.md)", t.line));
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "not documented:\n{}", missing.join("\n"));
}

#[test]
fn code_reader_follows_every_form_and_refuses_others() {
    let error = r#"
        impl ServiceError {
            pub fn code(&self) -> &'static str {
                match self { E::A => "a_code", E::B(StorageError::X) => "b_code" }
            }
        }
        #[error("not_a_code")] struct NotHere;"#;
    let api = r##"
        fn status_code(s: StatusCode) -> &'static str { match s { S::X => "from_fn", _ => "fallback" } }
        fn f() { ApiError::new(StatusCode::BAD_REQUEST, "literal", format!("{}", "detail_not_code")) }
        fn g(s: StatusCode) { ApiError::new(s, status_code(s), "x") }
        fn h() {
            let (code, detail) = match x {
                X::Ok => return Ok(()),
                X::A { a } => ("from_let", format!("{a}")),
                X::B => { ("from_block", "d".to_owned()) }
            };
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, detail)
        }
        // ApiError::new(S, "in_a_comment", "")
        const S: &str = "ApiError::new(S, \"in_a_string\", \"\")";
        const Q: [char; 2] = ['\'', '"']; const R: &'static str = r#"ApiError::new(S, "in_raw", "")"#;
        fn from(e: ServiceError) -> ApiError { ApiError { status, code: e.code(), detail } }
        fn new(status: StatusCode, code: &'static str) -> Self { ApiError { status, code } }
        fn problem(&self) -> Problem { Problem { kind: x, code: self.code.to_owned() } }
        #[cfg(test)]
        mod tests { fn t() { ApiError::new(S, "in_a_test", "") } }"##;
    let odd = r#"fn k() { ApiError::new(S, CODES[0], "") } fn m() { let code = "x"; ApiError::new(S, code, "") }
        fn n() -> ApiError { ApiError { status, code: "handmade" } }"#;
    let src = |files: &[(&str, &str)]| files.iter().map(|(p, s)| (p.to_string(), s.to_string())).collect::<Vec<_>>();
    let found =
        codes_in(&src(&[("crates/core/src/error.rs", error), ("src/api/error.rs", api), ("src/api/tests.rs", odd)]));
    assert_eq!(found.unreadable, Vec::<String>::new());
    let codes: Vec<&str> = found.codes.keys().map(String::as_str).collect();
    assert_eq!(codes, ["a_code", "b_code", "fallback", "from_block", "from_fn", "from_let", "literal"]);
    let found = codes_in(&src(&[("crates/core/src/error.rs", error), ("src/api/odd.rs", odd)]));
    assert_eq!(found.unreadable.len(), 3, "{:?}", found.unreadable);
    assert!(codes_in(&src(&[("src/api/error.rs", api)])).unreadable[0].contains("no `fn code`"));
}

#[test]
fn table_reader_takes_the_first_column_of_the_codes_table() {
    let doc = "# E\n\n| a | b |\n|---|---|\n| `not_this` | x |\n\n## Error codes\n\ntext\n\n\
               | code | status | when |\n|---|---|---|\n| `one` | 400 | `two` in the text |\n| `three_3` | 404 | x |\n\n| `after` |\n";
    let codes = documented(doc).unwrap();
    assert_eq!(codes.keys().map(String::as_str).collect::<Vec<_>>(), ["one", "three_3"]);
    assert!(documented("## Error codes\n\n| code |\n|---|\n| one |\n").unwrap_err().contains("not one code"));
    assert!(documented("## Error codes\n\n| code |\n|---|\n| `a` |\n| `a` |\n").unwrap_err().contains("twice"));
}

/// Whether `text` names `word` whole (`--key` is not named by `--keys`, nor `MOSAIC_API_KEY` by
/// `MOSAIC_API_KEYS`).
fn mentions(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(part) && !text[at + word.len()..].chars().next().is_some_and(part)
    })
}

fn is_ident(toks: &[Token], i: usize, word: &str) -> bool {
    matches!(toks.get(i), Some(Token { tok: Tok::Ident(w), .. }) if w == word)
}

fn is_punct(toks: &[Token], i: usize, p: &str) -> bool {
    matches!(toks.get(i), Some(Token { tok: Tok::Punct(q), .. }) if q == p)
}

/// The index of the bracket closing the one at `open` (or the last token).
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in toks.iter().enumerate().skip(open) {
        match &t.tok {
            Tok::Punct(p) if p == "{" || p == "(" || p == "[" => depth += 1,
            Tok::Punct(p) if p == "}" || p == ")" || p == "]" => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    toks.len() - 1
}

/// The arguments of the call whose `(` is at `open`, split at top-level commas.
fn arguments(toks: &[Token], open: usize) -> Vec<Vec<Token>> {
    let close = matching(toks, open);
    let mut args = vec![Vec::new()];
    let mut depth = 0;
    for t in &toks[open + 1..close] {
        match &t.tok {
            Tok::Punct(p) if p == "{" || p == "(" || p == "[" => depth += 1,
            Tok::Punct(p) if p == "}" || p == ")" || p == "]" => depth -= 1,
            Tok::Punct(p) if p == "," && depth == 0 => {
                args.push(Vec::new());
                continue;
            }
            _ => {}
        }
        args.last_mut().unwrap().push(t.clone());
    }
    args
}

/// The tokens without the items marked `#[cfg(test)]`.
fn without_test_items(toks: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let cfg_test = ["#", "[", "cfg", "(", "test", ")", "]"]
            .iter()
            .enumerate()
            .all(|(k, w)| matches!(&toks.get(i + k).map(|t| &t.tok), Some(Tok::Punct(p) | Tok::Ident(p)) if p == w));
        if !cfg_test {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        // skip the item: to its `;`, or through its body
        let mut j = i + 7;
        while j < toks.len() && !is_punct(&toks, j, ";") && !is_punct(&toks, j, "{") {
            j += 1;
        }
        i = if is_punct(&toks, j, "{") { matching(&toks, j) + 1 } else { j + 1 };
    }
    out
}

/// Rust source as tokens: comments dropped, string literals (plain, raw, byte) kept with their
/// unescaped-enough text (escapes are kept as written; codes have none).
fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let push = |toks: &mut Vec<Token>, tok: Tok, line: usize| toks.push(Token { tok, line });
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && next == Some('"')) {
            let start_line = line;
            i += if ch == '"' { 1 } else { 2 };
            let mut s = String::new();
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    s.push(c[i]);
                    i += 1;
                }
                line += usize::from(c.get(i) == Some(&'\n'));
                if let Some(&x) = c.get(i) {
                    s.push(x);
                }
                i += 1;
            }
            i += 1;
            push(&mut toks, Tok::Str(s), start_line);
        } else if (ch == 'r' || (ch == 'b' && next == Some('r'))) && {
            let k = if ch == 'r' { i + 1 } else { i + 2 };
            let hashes = c[k..].iter().take_while(|&&x| x == '#').count();
            c.get(k + hashes) == Some(&'"')
        } {
            let k = if ch == 'r' { i + 1 } else { i + 2 };
            let hashes = c[k..].iter().take_while(|&&x| x == '#').count();
            let start_line = line;
            i = k + hashes + 1;
            let mut s = String::new();
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&x| x == '#').count() == hashes {
                    i += 1 + hashes;
                    break;
                }
                line += usize::from(c[i] == '\n');
                s.push(c[i]);
                i += 1;
            }
            push(&mut toks, Tok::Str(s), start_line);
        } else if ch == '\'' {
            // a char literal ('a', '\n', '\'') or a lifetime ('a, 'static)
            if next == Some('\\') {
                // past the quote, the backslash and the escaped char, then to the closing quote
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
            push(&mut toks, Tok::Other, line);
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            push(&mut toks, Tok::Ident(c[start..i].iter().collect()), line);
        } else if ch.is_ascii_digit() {
            while i < c.len()
                && (c[i].is_alphanumeric()
                    || c[i] == '_'
                    || c[i] == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
            {
                i += 1;
            }
            push(&mut toks, Tok::Other, line);
        } else {
            let two: String = c[i..(i + 2).min(c.len())].iter().collect();
            if two == "::" || two == "=>" || two == "->" {
                push(&mut toks, Tok::Punct(two), line);
                i += 2;
            } else {
                push(&mut toks, Tok::Punct(ch.to_string()), line);
                i += 1;
            }
        }
    }
    toks
}
