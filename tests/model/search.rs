//! Exact BM25, proven by brute force: random corpora are written through every write path
//! (insert, replace, merge patch, delete, batch, import), and after each round of writes random
//! queries of every form are answered by the server and recomputed here from the stored documents
//! (read back over HTTP) by the documented formula. Every score must agree to a relative error
//! below 1e-9, and the order, the ids and `total` exactly.

use crate::common;
use common::TestServer;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const VOCAB: [&str; 24] = [
    "graph", "graphs", "grape", "data", "database", "date", "query", "queue", "quick", "brown", "fox", "lazy", "dog",
    "index", "indices", "search", "sear", "sea", "tree", "trees", "free", "node", "nodes", "edge",
];
const FIELDS: [&str; 2] = ["title", "body"];
const TITLE_WEIGHT: f64 = 2.5;
const GAP: u32 = 100;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn word(&mut self) -> &'static str {
        // skewed: early words are more common
        let a = self.below(VOCAB.len());
        VOCAB[self.below(a + 1)]
    }
    fn text(&mut self, max: usize) -> String {
        let n = self.below(max + 1);
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

/// The tokens of one field with positions, as the analyzer makes them for `language: none`
/// without stemming: lowercase words separated by spaces, array elements `GAP` positions apart.
fn field_tokens(v: Option<&Value>) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut add = |text: &str, first: u32| -> u32 {
        let mut pos = first;
        for w in text.split_whitespace() {
            out.push((w.to_lowercase(), pos));
            pos += 1;
        }
        pos
    };
    match v {
        Some(Value::String(s)) => {
            add(s, 0);
        }
        Some(Value::Array(items)) => {
            let mut next = 0;
            for item in items {
                if let Value::String(s) = item {
                    next = add(s, next) + GAP;
                }
            }
        }
        _ => {}
    }
    out
}

#[derive(Debug, Clone)]
enum Clause {
    Term(String),
    Phrase(Vec<String>),
    Prefix(String),
    Fuzzy(String, usize),
}

impl Clause {
    fn text(&self) -> String {
        match self {
            Clause::Term(t) => t.clone(),
            Clause::Phrase(ts) => format!("\"{}\"", ts.join(" ")),
            Clause::Prefix(p) => format!("{p}*"),
            Clause::Fuzzy(t, d) => format!("{t}~{d}"),
        }
    }
}

/// Optimal-string-alignment distance (a transposition is one edit), as the fuzzy terms use.
fn osa(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

struct Corpus {
    /// id → per field tokens
    docs: BTreeMap<String, Vec<Vec<(String, u32)>>>,
    /// id → the document (for filters)
    raw: BTreeMap<String, Value>,
}

impl Corpus {
    fn len(&self, id: &str) -> usize {
        self.docs[id].iter().map(Vec::len).sum()
    }
    fn n(&self) -> usize {
        self.docs.keys().filter(|id| self.len(id) > 0).count()
    }
    fn avglen(&self) -> f64 {
        let total: usize = self.docs.keys().map(|id| self.len(id)).sum();
        total as f64 / self.n() as f64
    }
    fn df(&self, t: &str) -> usize {
        self.docs.values().filter(|fs| fs.iter().flatten().any(|(w, _)| w == t)).count()
    }
    fn vocabulary(&self) -> BTreeSet<String> {
        self.docs.values().flatten().flatten().map(|(w, _)| w.clone()).collect()
    }
    fn idf(&self, t: &str) -> f64 {
        let (n, df) = (self.n() as f64, self.df(t) as f64);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }
    fn tf_part(&self, tf: f64, len: usize) -> f64 {
        tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * len as f64 / self.avglen()))
    }
    fn weight(f: usize) -> f64 {
        if f == 0 { TITLE_WEIGHT } else { 1.0 }
    }
    /// The terms a clause stands for.
    fn expand(&self, c: &Clause) -> Vec<String> {
        match c {
            Clause::Term(t) => vec![t.clone()],
            Clause::Phrase(_) => vec![],
            Clause::Prefix(p) => self.vocabulary().into_iter().filter(|w| w.starts_with(p.as_str())).collect(),
            Clause::Fuzzy(t, d) => self.vocabulary().into_iter().filter(|w| osa(w, t) <= *d).collect(),
        }
    }
    /// The clause's score in document `id`, or None when it does not match.
    fn clause_score(&self, c: &Clause, id: &str) -> Option<f64> {
        let fields = &self.docs[id];
        let len = self.len(id);
        match c {
            Clause::Phrase(ts) => {
                let idf: f64 = ts.iter().map(|t| self.idf(t)).sum();
                let mut score = 0.0;
                let mut any = false;
                for (f, toks) in fields.iter().enumerate() {
                    let freq = toks
                        .iter()
                        .filter(|(w, p)| {
                            w == &ts[0] && ts.iter().enumerate().all(|(k, t)| toks.contains(&(t.clone(), p + k as u32)))
                        })
                        .count();
                    if freq > 0 {
                        any = true;
                        score += Self::weight(f) * idf * self.tf_part(freq as f64, len);
                    }
                }
                any.then_some(score)
            }
            other => {
                let mut score = 0.0;
                let mut any = false;
                for t in self.expand(other) {
                    let idf = self.idf(&t);
                    for (f, toks) in fields.iter().enumerate() {
                        let tf = toks.iter().filter(|(w, _)| *w == t).count();
                        if tf > 0 {
                            any = true;
                            score += Self::weight(f) * idf * self.tf_part(tf as f64, len);
                        }
                    }
                }
                any.then_some(score)
            }
        }
    }
}

async fn stored_corpus(s: &TestServer, table: &str) -> Corpus {
    let mut docs = BTreeMap::new();
    let mut raw = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/tables/{table}/documents?limit=1000&cursor={c}"),
            None => format!("/v1/tables/{table}/documents?limit=1000"),
        };
        let (st, page) = s.get(&path).await;
        assert_eq!(st, 200, "{page}");
        for d in page["documents"].as_array().unwrap() {
            let id = d["_id"].as_str().unwrap().to_owned();
            docs.insert(id.clone(), FIELDS.iter().map(|f| field_tokens(d.get(*f))).collect());
            raw.insert(id, d.clone());
        }
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    Corpus { docs, raw }
}

fn random_doc(rng: &mut Rng) -> Value {
    let title = rng.text(4);
    let body = match rng.below(5) {
        0 => json!([rng.text(5), 7, rng.text(5)]),
        1 => json!(42),
        _ => json!(rng.text(14)),
    };
    json!({"title": title, "body": body, "n": rng.below(10)})
}

fn random_clause(rng: &mut Rng) -> Clause {
    match rng.below(6) {
        0 => Clause::Phrase((0..2 + rng.below(2)).map(|_| rng.word().to_owned()).collect()),
        1 => {
            let w = rng.word();
            Clause::Prefix(w[..1 + rng.below(w.len().min(4))].to_owned())
        }
        2 => {
            let mut w: Vec<char> = rng.word().chars().collect();
            let i = rng.below(w.len());
            w[i] = 'x';
            Clause::Fuzzy(w.into_iter().collect(), 1 + rng.below(2))
        }
        _ => Clause::Term(rng.word().to_owned()),
    }
}

/// Which query forms found something (so the comparison is not of empty answers).
#[derive(Debug, Default)]
struct Coverage {
    forms: BTreeMap<&'static str, usize>,
}

impl Coverage {
    fn saw(&mut self, c: &Clause, matched: bool) {
        let form = match c {
            Clause::Term(_) => "term",
            Clause::Phrase(_) => "phrase",
            Clause::Prefix(_) => "prefix",
            Clause::Fuzzy(..) => "fuzzy",
        };
        *self.forms.entry(form).or_default() += usize::from(matched);
    }
}

async fn check_queries(s: &TestServer, rng: &mut Rng, table: &str, round: usize, cov: &mut Coverage) {
    let corpus = stored_corpus(s, table).await;
    for qn in 0..12 {
        let include: Vec<Clause> = (0..1 + rng.below(3)).map(|_| random_clause(rng)).collect();
        let exclude: Vec<Clause> = if rng.below(4) == 0 { vec![Clause::Term(rng.word().to_owned())] } else { vec![] };
        let all = rng.below(3) == 0;
        let filter = (rng.below(4) == 0).then(|| json!({"n": {"$lt": 5}}));
        let mut text: Vec<String> = include.iter().map(Clause::text).collect();
        text.extend(exclude.iter().map(|c| format!("-{}", c.text())));
        let text = text.join(" ");
        // expected, by brute force; clauses identical in text count once, as the parser dedups
        let mut seen = BTreeSet::new();
        let include: Vec<&Clause> = include.iter().filter(|c| seen.insert(c.text())).collect();
        let mut expected: Vec<(String, f64)> = Vec::new();
        for id in corpus.docs.keys() {
            let scores: Vec<Option<f64>> = include.iter().map(|c| corpus.clause_score(c, id)).collect();
            for (c, sc) in include.iter().zip(&scores) {
                cov.saw(c, sc.is_some());
            }
            let matched = if all { scores.iter().all(Option::is_some) } else { scores.iter().any(Option::is_some) };
            let excluded = exclude.iter().any(|c| corpus.clause_score(c, id).is_some());
            let passes = filter.is_none() || corpus.raw[id]["n"].as_u64().is_some_and(|n| n < 5);
            if excluded {
                *cov.forms.entry("excluded").or_default() += 1;
            }
            if matched && all {
                *cov.forms.entry("all").or_default() += 1;
            }
            if matched && !excluded && passes {
                expected.push((id.clone(), scores.iter().flatten().sum()));
            }
        }
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let limit = 1 + rng.below(8);
        let mut body = json!({"query": text, "limit": limit, "mode": if all { "all" } else { "any" }, "fields": ["n"]});
        if let Some(f) = &filter {
            body["filter"] = f.clone();
        }
        // how far `total` counts: the default, every match, or a threshold small enough that the
        // search stops counting and skips postings
        let threshold = match rng.below(4) {
            0 => None,
            1 => {
                body["total"] = json!("exact");
                None
            }
            _ => {
                let t = rng.below(expected.len() + 2);
                body["total"] = json!(t);
                Some(t)
            }
        };
        let (st, got) = s.post(&format!("/v1/tables/{table}/search"), body.clone()).await;
        assert_eq!(st, 200, "round {round} query {qn} {body}: {got}");
        // `eq`: the exact count; `gte`: the threshold, passed
        let (value, relation) = (got["total"]["value"].as_u64().unwrap() as usize, &got["total"]["relation"]);
        match (relation.as_str(), threshold) {
            (Some("eq"), _) => assert_eq!(value, expected.len(), "round {round} query {qn} {body}: total"),
            (Some("gte"), Some(t)) => {
                assert!(value == t && expected.len() > t, "round {round} query {qn} {body}: total {value}+");
                *cov.forms.entry("total passed").or_default() += 1;
            }
            other => panic!("round {round} query {qn} {body}: total {other:?}"),
        }
        let hits = got["hits"].as_array().unwrap();
        assert_eq!(hits.len(), expected.len().min(limit), "round {round} query {qn} {body}");
        // ties within 1e-9 may legitimately order by id either way only if the scores differ by
        // rounding; compare scores position by position and ids as sets of equal-score runs
        for (hit, (id, score)) in hits.iter().zip(&expected) {
            let got_score = hit["score"].as_f64().unwrap();
            let rel = (got_score - score).abs() / score.abs().max(1e-300);
            assert!(rel < 1e-9, "round {round} query {qn} {body}: {id} scored {got_score}, brute force {score}");
            let hid = hit["_id"].as_str().unwrap();
            if hid != id {
                let theirs = expected.iter().find(|(e, _)| e == hid).map(|(_, s)| *s).unwrap_or(f64::NAN);
                assert!(
                    ((theirs - score) / score).abs() < 1e-9,
                    "round {round} query {qn} {body}: hit {hid} where {id} was expected"
                );
            }
        }
    }
}

async fn write_round(s: &TestServer, rng: &mut Rng, table: &str, ids: &[String]) {
    for _ in 0..25 {
        let id = &ids[rng.below(ids.len())];
        let path = format!("/v1/tables/{table}/documents/{}", common::seg(id));
        match rng.below(10) {
            0..=3 => {
                let (st, b) = s.put(&path, random_doc(rng)).await;
                assert!(st == 200 || st == 201, "{b}");
            }
            4 | 5 => {
                let patch = if rng.below(2) == 0 { json!({"title": rng.text(4)}) } else { json!({"n": rng.below(10)}) };
                let (st, b) = s.patch(&path, patch).await;
                assert!(st == 200 || st == 404, "{b}");
            }
            6 => {
                let (st, b) = s.delete(&path).await;
                assert!(st == 204 || st == 404, "{b}");
            }
            7 | 8 => {
                // a batch touching one document twice: both changes in one write
                let other = &ids[rng.below(ids.len())];
                let ops = json!({"operations": [
                    {"op": "put", "table": table, "id": id, "document": random_doc(rng)},
                    {"op": "put", "table": table, "id": other, "document": random_doc(rng)},
                    {"op": "patch", "table": table, "id": id, "document": {"body": rng.text(6)}},
                ]});
                let (st, b) = s.post("/v1/batch", ops).await;
                assert_eq!(st, 200, "{b}");
            }
            _ => {
                let lines: String = (0..3)
                    .map(|_| {
                        let mut d = random_doc(rng);
                        d["_id"] = json!(ids[rng.below(ids.len())]);
                        format!("{d}\n")
                    })
                    .collect();
                let r = s
                    .raw(reqwest::Method::POST, &format!("/v1/tables/{table}/import"), "application/x-ndjson", lines)
                    .await;
                assert_eq!(r.status, 200, "{}", r.body);
            }
        }
    }
}

async fn run(seed: u64, cov: &mut Coverage) {
    let s = TestServer::start().await;
    let table = format!("s{seed}");
    s.create_table(&table).await;
    let ids: Vec<String> = (0..40).map(|i| if i % 9 == 0 { format!("é/{i}:x") } else { format!("d{i:02}") }).collect();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    // some documents exist before the index: it is built by backfill
    write_round(&s, &mut rng, &table, &ids).await;
    let (st, b) = s
        .post(
            &format!("/v1/tables/{table}/indexes"),
            json!({"name": "ft", "kind": "fulltext", "fields": FIELDS, "options": {"language": "none",
                "stemming": false, "field_weights": {"title": TITLE_WEIGHT}}}),
        )
        .await;
    assert!(st == 201 || st == 202, "{b}");
    s.index_settled(&table, "ft").await;
    for round in 0..6 {
        check_queries(&s, &mut rng, &table, round, cov).await;
        write_round(&s, &mut rng, &table, &ids).await;
    }
    check_queries(&s, &mut rng, &table, 99, cov).await;
    s.check_ok().await;
    // the statistics survive a restart
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, |_| {}).await;
    check_queries(&s, &mut rng, &table, 100, cov).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bm25_scores_equal_a_brute_force_recomputation_after_every_kind_of_write() {
    let mut cov = Coverage::default();
    for seed in 1..=3 {
        run(seed, &mut cov).await;
    }
    eprintln!("{cov:?}");
    for form in ["term", "phrase", "prefix", "fuzzy", "excluded", "all", "total passed"] {
        assert!(cov.forms.get(form).is_some_and(|n| *n > 20), "{form} rarely matched: {cov:?}");
    }
}
