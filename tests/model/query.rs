//! Model-based tests of indexes and queries: random writes and index creations go to the server
//! and to a plain in-memory model (a BTreeMap with a filter evaluator written here, independently
//! of the server's); every query answer — filters, sorts, limits, cursors — must be identical, and
//! `POST /v1/admin/check` must find nothing wrong.

use crate::common::model;
use crate::common::{TestServer, seg};
use model::{Rng, merge_patch, model_match, model_query, project};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

// ---------- the test ----------

/// Without a sort the order is the plan's (`_id`, or a range index's field): compare as sets,
/// each document exactly once.
fn same_order(sort: &[(String, bool)], mut ids: Vec<String>) -> Vec<String> {
    if sort.is_empty() {
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "a document came back twice");
    }
    ids
}

/// Pages through a query with the cursor and returns every id in order.
async fn run_query(s: &TestServer, table: &str, filter: &Value, sort: &[(String, bool)], limit: usize) -> Vec<String> {
    let sort: Vec<String> = sort.iter().map(|(f, d)| if *d { format!("-{f}") } else { f.clone() }).collect();
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let mut body = json!({"filter": filter, "sort": sort, "limit": limit, "fields": ["c"]});
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let (status, page) = s.post(&format!("/v1/tables/{table}/query"), body.clone()).await;
        assert_eq!(status, 200, "{body}: {page}");
        let docs = page["documents"].as_array().unwrap();
        assert!(docs.len() <= limit);
        ids.extend(docs.iter().map(|d| d["_id"].as_str().unwrap().to_owned()));
        cursor = page["cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            return ids;
        }
    }
    panic!("pagination did not end");
}

async fn wait_ready(s: &TestServer, table: &str, index: &str) {
    let def = s.index_settled(table, index).await;
    assert_eq!(def["state"], "ready", "{def}");
}

#[derive(Default, Debug)]
struct Coverage {
    queries: usize,
    results: usize,
    /// queries with writes between their pages
    interleaved: usize,
    strategies: BTreeMap<String, usize>,
    /// index kinds some plan scanned
    kinds_used: BTreeSet<String>,
    /// index kinds built over existing documents (202, then backfilled to ready)
    kinds_backfilled: BTreeSet<String>,
}

/// The indexes of every run: `by_u` from the start (so the model can predict its 409s), the
/// others created part-way over existing documents.
const LATER: &[(&str, &str, &[&str])] = &[
    ("by_a", "range", &["a"]),
    ("by_b", "hash", &["b"]),
    ("by_loc", "spatial", &["loc"]),
    ("by_bc", "hash", &["b", "c"]),
    ("by_s", "range", &["s"]),
    ("by_uc", "unique", &["u", "c"]),
    ("by_tags", "range", &["tags"]),
    ("by_c", "hash", &["c"]),
    ("by_nv", "range", &["n.v"]),
];

/// One model run: the server, the model, and the generator.
struct Run {
    s: TestServer,
    table: String,
    seed: u64,
    rng: Rng,
    model: BTreeMap<String, Value>,
    ids: Vec<String>,
}

impl Run {
    fn unique_taken(&self, id: &str, doc: &Value) -> bool {
        doc.get("u").is_some_and(|u| self.model.iter().any(|(other, d)| other != id && d.get("u") == Some(u)))
    }

    /// One random PUT, PATCH (RFC 7396) or DELETE, its answer checked against the model's
    /// prediction; returns the id written.
    async fn write(&mut self) -> String {
        let id = self.rng.pick(&self.ids).clone();
        let path = format!("/v1/tables/{}/documents/{}", self.table, seg(&id));
        match self.rng.below(10) {
            0..=5 => {
                let doc = model::document(&mut self.rng);
                let r = self.s.send(Method::PUT, &path, Some(&doc), &[]).await;
                if self.unique_taken(&id, &doc) {
                    assert!(r.is_problem(409, "unique_violation"), "{doc}: {}", r.body);
                } else {
                    let created = !self.model.contains_key(&id);
                    assert_eq!(r.status, if created { 201 } else { 200 }, "{}", r.body);
                    self.model.insert(id.clone(), doc);
                }
            }
            6 | 7 => {
                let patch = model::patch(&mut self.rng);
                let Some(current) = self.model.get(&id) else {
                    assert_eq!(self.s.patch(&path, patch).await.0, 404);
                    return id;
                };
                let merged = merge_patch(current, &patch);
                let r = self.s.send(Method::PATCH, &path, Some(&patch), &[]).await;
                if self.unique_taken(&id, &merged) {
                    assert!(r.is_problem(409, "unique_violation"), "{}", r.body);
                } else {
                    assert_eq!(r.status, 200, "{}", r.body);
                    // null deletes, objects merge member by member
                    let (_, stored) = self.s.get(&path).await;
                    assert_eq!(
                        stored,
                        project(&id, &merged, None),
                        "seed {}: {current} patched with {patch}",
                        self.seed
                    );
                    self.model.insert(id.clone(), merged);
                }
            }
            _ => {
                let (status, _) = self.s.delete(&path).await;
                assert_eq!(status, if self.model.remove(&id).is_some() { 204 } else { 404 });
            }
        }
        id
    }

    /// One random query, paged with its cursor, maybe with writes between the pages; every
    /// returned document must be the model's (with the asked fields) and match the filter.
    async fn query(&mut self, cov: &mut Coverage) {
        let f = model::filter(&mut self.rng, 2);
        let srt = model::sort(&mut self.rng);
        let limit = *self.rng.pick(&[1usize, 3, 7, 100]);
        let fields = model::fields(&mut self.rng);
        let interleave = limit < 100 && self.rng.chance(30);
        let want = model_query(&self.model, &f, &srt);
        let sort_names: Vec<String> = srt.iter().map(|(f, d)| if *d { format!("-{f}") } else { f.clone() }).collect();
        let what = format!("seed {}: filter {f} sort {srt:?} limit {limit} fields {fields:?}", self.seed);
        let (st, ex) = self
            .s
            .post(
                &format!("/v1/tables/{}/query", self.table),
                json!({"filter": f, "sort": sort_names, "limit": limit, "explain": true}),
            )
            .await;
        assert_eq!(st, 200, "{what}: {ex}");
        let plan = &ex["plan"];
        *cov.strategies
            .entry(format!("{}/{}", plan["strategy"].as_str().unwrap(), plan["order"].as_str().unwrap()))
            .or_default() += 1;
        for scan in plan["scans"].as_array().unwrap() {
            if let Some(kind) = scan["kind"].as_str() {
                cov.kinds_used.insert(kind.to_owned());
            }
        }

        let mut got = Vec::new();
        let mut touched = BTreeSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..1000 {
            let mut body = json!({"filter": f, "sort": sort_names, "limit": limit});
            if let Some(fields) = fields {
                body["fields"] = json!(fields);
            }
            if let Some(c) = &cursor {
                body["cursor"] = json!(c);
            }
            let (status, page) = self.s.post(&format!("/v1/tables/{}/query", self.table), body.clone()).await;
            assert_eq!(status, 200, "{what}: {body}: {page}");
            let docs = page["documents"].as_array().unwrap();
            assert!(docs.len() <= limit);
            for d in docs {
                let id = d["_id"].as_str().unwrap().to_owned();
                let Some(doc) = self.model.get(&id) else { panic!("{what}: {id} does not exist: {d}") };
                assert!(model_match(doc, &f), "{what}: {id} does not match: {doc}");
                assert_eq!(*d, project(&id, doc, fields), "{what}: the fields of {id}");
                got.push(id);
            }
            cursor = page["cursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
            if interleave {
                for _ in 0..1 + self.rng.below(2) {
                    touched.insert(self.write().await);
                }
            }
        }
        assert!(cursor.is_none(), "{what}: pagination did not end");
        cov.queries += 1;
        cov.results += want.len();
        if touched.is_empty() {
            assert_eq!(same_order(&srt, got), same_order(&srt, want), "{what}");
            return;
        }
        cov.interleaved += 1;
        // writes between pages: a document the writes left alone comes back at most once (one
        // they moved may come back again at its new place), and every one of them that matched
        // before and after the writes comes back, in order
        let untouched: Vec<&String> = got.iter().filter(|id| !touched.contains(*id)).collect();
        let unique: BTreeSet<&String> = untouched.iter().copied().collect();
        assert_eq!(
            unique.len(),
            untouched.len(),
            "{what}: a document came back twice: {got:?} (writes to {touched:?})"
        );
        let after: BTreeSet<String> = model_query(&self.model, &f, &srt).into_iter().collect();
        let stable: Vec<&String> = want.iter().filter(|id| after.contains(*id) && !touched.contains(*id)).collect();
        let got_stable: Vec<&String> = got.iter().filter(|id| stable.contains(id)).collect();
        if srt.is_empty() {
            let (mut a, mut b) = (got_stable.clone(), stable.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{what}: with writes to {touched:?} between pages");
        } else {
            assert_eq!(got_stable, stable, "{what}: with writes to {touched:?} between pages");
        }
    }
}

async fn model_run(seed: u64, ops: usize, cov: &mut Coverage) {
    let s = TestServer::start().await;
    let table = format!("m{seed}");
    s.create_table(&table).await;
    let post_index = |name: &str, kind: &str, fields: &[&str]| json!({"name": name, "kind": kind, "fields": fields});
    let (st, _) = s.post(&format!("/v1/tables/{table}/indexes"), post_index("by_u", "unique", &["u"])).await;
    assert_eq!(st, 201);
    let ids: Vec<String> = (0..60).map(|i| if i % 7 == 0 { format!("ü/{i} id") } else { format!("d{i:02}") }).collect();
    let rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut run = Run { s, table, seed, rng, model: BTreeMap::new(), ids };
    let mut created = vec!["by_u"];
    for step in 0..ops {
        // every index is created in the first half of every run, so all are ready for the second
        for (j, (name, kind, fields)) in LATER.iter().enumerate() {
            if step == 3 + j * (ops / 2) / LATER.len() {
                let (st, body) =
                    run.s.post(&format!("/v1/tables/{}/indexes", run.table), post_index(name, kind, fields)).await;
                if run.model.is_empty() {
                    assert_eq!(st, 201, "{body}");
                } else {
                    assert_eq!(st, 202, "{body}");
                    cov.kinds_backfilled.insert(kind.to_string());
                }
                created.push(name);
            }
        }
        run.write().await;
        if step % 25 == 24 {
            for name in &created {
                wait_ready(&run.s, &run.table, name).await;
            }
            for _ in 0..10 {
                run.query(cov).await;
            }
        }
    }
    assert_eq!(created.len(), LATER.len() + 1, "seed {seed}: every index is built");
    for name in &created {
        wait_ready(&run.s, &run.table, name).await;
    }
    run.s.check_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_agree_with_the_model() {
    let mut cov = Coverage::default();
    // MOSAIC_MODEL_SEEDS=5-40 explores more seeds (the coverage asserts below hold for 1-4)
    let seeds = std::env::var("MOSAIC_MODEL_SEEDS").ok().and_then(|r| {
        let (a, b) = r.split_once('-')?;
        Some(a.parse::<u64>().ok()?..=b.parse::<u64>().ok()?)
    });
    for seed in seeds.unwrap_or(1..=4) {
        model_run(seed, 250, &mut cov).await;
    }
    eprintln!("{cov:?}");
    // the runs must have exercised every kind of plan and index, with real results
    for plan in ["full_scan/id", "index_scan/id", "index_scan/index", "index_scan/in_memory", "union/id"] {
        assert!(cov.strategies.get(plan).is_some_and(|n| *n > 0), "no {plan} plan ran: {cov:?}");
    }
    for kind in ["hash", "unique", "range", "spatial"] {
        assert!(cov.kinds_backfilled.contains(kind), "no {kind} index was built by backfill: {cov:?}");
    }
    for kind in ["hash", "range", "spatial"] {
        assert!(cov.kinds_used.contains(kind), "no plan scanned a {kind} index: {cov:?}");
    }
    assert!(cov.interleaved >= 20, "{cov:?}");
    assert!(cov.results > cov.queries, "{cov:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_equality_range_sort_and_intersection() {
    let s = TestServer::start().await;
    s.create_table("ex").await;
    let mut body = String::new();
    let mut model = BTreeMap::new();
    for i in 0..2000u64 {
        let b = ["x", "y", "z", "w"][(i % 4) as usize];
        let doc = json!({"b": b, "c": i % 5, "age": (i * 7919) % 100, "name": format!("n{i}")});
        body.push_str(&format!(
            "{}\n",
            json!({"_id": format!("{i:04}"), "b": doc["b"], "c": doc["c"], "age": doc["age"], "name": doc["name"]})
        ));
        model.insert(format!("{i:04}"), doc);
    }
    let r = s.raw(Method::POST, "/v1/tables/ex/import", "application/x-ndjson", body).await;
    assert_eq!(r.body["inserted"], 2000);
    for (name, kind, fields) in
        [("by_b", "hash", json!(["b"])), ("by_c", "hash", json!(["c"])), ("by_age", "range", json!(["age"]))]
    {
        let (st, _) = s.post("/v1/tables/ex/indexes", json!({"name": name, "kind": kind, "fields": fields})).await;
        assert_eq!(st, 202);
        wait_ready(&s, "ex", name).await;
    }
    let explain = |filter: Value, sort: Value, limit: usize| {
        let s = &s;
        async move {
            let (st, ex) = s
                .post("/v1/tables/ex/query", json!({"filter": filter, "sort": sort, "limit": limit, "explain": true}))
                .await;
            assert_eq!(st, 200, "{ex}");
            ex["plan"].clone()
        }
    };
    // equality
    let p = explain(json!({"b": "x"}), json!([]), 10).await;
    assert_eq!((p["strategy"].as_str(), p["scans"][0]["index"].as_str()), (Some("index_scan"), Some("by_b")), "{p}");
    assert_eq!(p["order"], "id");
    assert_eq!(p["stopped_early"], true, "{p}");
    // range
    let p = explain(json!({"age": {"$gte": 90, "$lt": 92}}), json!([]), 1000).await;
    assert_eq!((p["strategy"].as_str(), p["scans"][0]["index"].as_str()), (Some("index_scan"), Some("by_age")), "{p}");
    assert_eq!(p["scans"][0]["condition"], "age >= 90 and age < 92");
    assert_eq!(p["examined_rows"], 40, "{p}");
    // without a sort, a range scan returns its natural order and stops at the limit
    let p = explain(json!({"age": {"$gte": 50}}), json!([]), 10).await;
    assert_eq!((p["order"].as_str(), p["stopped_early"].as_bool()), (Some("index"), Some(true)), "{p}");
    assert!(p["examined_rows"].as_u64().unwrap() <= 40, "{p}");
    // sort served by the range index, stopping at the limit
    let p = explain(json!({}), json!(["-age"]), 10).await;
    assert_eq!((p["order"].as_str(), p["scans"][0]["index"].as_str()), (Some("index"), Some("by_age")), "{p}");
    assert_eq!(p["scans"][0]["direction"], "desc");
    assert_eq!(p["stopped_early"], true);
    assert!(p["examined_rows"].as_u64().unwrap() <= 40, "{p}");
    // AND of two indexed fields: an intersection of both equality scans
    let p = explain(json!({"b": "x", "c": 3}), json!([]), 1000).await;
    assert_eq!(p["strategy"], "intersection", "{p}");
    let mut used: Vec<&str> = p["scans"].as_array().unwrap().iter().map(|s| s["index"].as_str().unwrap()).collect();
    used.sort();
    assert_eq!(used, ["by_b", "by_c"]);
    assert_eq!(p["examined_rows"], 100, "{p}");
    // and every one of these answers agrees with the model
    for (filter, sort) in [
        (json!({"b": "x"}), vec![]),
        (json!({"age": {"$gte": 90, "$lt": 92}}), vec![("name".to_owned(), false)]),
        (json!({}), vec![("age".to_owned(), true)]),
        (json!({"b": "x", "c": 3}), vec![]),
        (json!({"b": "x", "c": 3, "age": {"$lt": 50}}), vec![("age".to_owned(), false)]),
    ] {
        for limit in [7, 1000] {
            assert_eq!(
                run_query(&s, "ex", &filter, &sort, limit).await,
                model_query(&model, &filter, &sort),
                "{filter}"
            );
        }
    }
    // an $or with an index per branch: a union, each document once
    let f = json!({"$or": [{"b": "x"}, {"age": {"$lt": 10}}, {"c": 3}]});
    let p = explain(f.clone(), json!([]), 1000).await;
    assert_eq!(p["strategy"], "union", "{p}");
    assert_eq!(p["scans"].as_array().unwrap().len(), 3);
    for limit in [13, 1000] {
        let got = run_query(&s, "ex", &f, &[], limit).await;
        assert_eq!(same_order(&[], got), same_order(&[], model_query(&model, &f, &[])));
    }
    // a refused full scan
    let r = s
        .send(Method::POST, "/v1/tables/ex/query", Some(&json!({"filter": {"name": "n1"}, "allow_scan": false})), &[])
        .await;
    assert!(r.is_problem(400, "scan_refused"), "{}", r.body);
    let r = s
        .send(
            Method::POST,
            "/v1/tables/ex/query",
            Some(&json!({"filter": {"b": "x"}, "allow_scan": false, "limit": 1})),
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    s.check_ok().await;
}

#[tokio::test]
async fn multikey_bounds_are_never_merged() {
    let s = TestServer::start().await;
    s.create_table("mk").await;
    let (st, _) = s.post("/v1/tables/mk/indexes", json!({"name": "by_t", "kind": "range", "fields": ["t"]})).await;
    assert_eq!(st, 201);
    s.put("/v1/tables/mk/documents/both", json!({"t": [1, 5]})).await;
    s.put("/v1/tables/mk/documents/one", json!({"t": 4})).await;
    s.put("/v1/tables/mk/documents/none", json!({"t": [0, 9]})).await;
    // [1, 5] and [0, 9] have an element >= 3 and an element <= 2, though none in [3, 2]
    let f = json!({"t": {"$gte": 3, "$lte": 2}});
    assert_eq!(same_order(&[], run_query(&s, "mk", &f, &[], 10).await), ["both", "none"]);
    let f = json!({"t": {"$gt": 0, "$lt": 9}});
    assert_eq!(same_order(&[], run_query(&s, "mk", &f, &[], 1).await), ["both", "none", "one"]);
    let sorted = run_query(&s, "mk", &json!({}), &[("t".to_owned(), false)], 1).await;
    assert_eq!(sorted, ["none", "both", "one"], "ascending by each array's smallest element");
    let sorted = run_query(&s, "mk", &json!({}), &[("t".to_owned(), true)], 2).await;
    assert_eq!(sorted, ["none", "both", "one"], "descending by each array's largest element");
    // ties go by _id in the sort's direction
    s.put("/v1/tables/mk/documents/also", json!({"t": 4})).await;
    let sorted = run_query(&s, "mk", &json!({"t": 4}), &[("t".to_owned(), true)], 1).await;
    assert_eq!(sorted, ["one", "also"]);
    let sorted = run_query(&s, "mk", &json!({"t": 4}), &[("t".to_owned(), false)], 1).await;
    assert_eq!(sorted, ["also", "one"]);
    s.check_ok().await;
}

/// Writes between two pages can change the plan (here from the hash index on `b`, in `_id`
/// order, to the range index on `a`, in `a` order): the cursor must still continue where the
/// first page stopped. Known bug of issue 7 (fixed in the query layer): the `_id` cursor is
/// applied to the `a`-ordered scan and x02, x01, x00 come back twice.
#[tokio::test]
async fn a_cursor_survives_a_plan_change_between_pages() {
    let s = TestServer::start().await;
    s.create_table("flip").await;
    for (name, kind) in [("by_a", "range"), ("by_b", "hash")] {
        let field = &name[3..];
        let (st, _) = s.post("/v1/tables/flip/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
        assert_eq!(st, 201);
    }
    for i in 0..10 {
        s.put(&format!("/v1/tables/flip/documents/x{i:02}"), json!({"a": 100 - i, "b": "x"})).await;
    }
    for i in 0..30 {
        s.put(&format!("/v1/tables/flip/documents/y{i:02}"), json!({"a": 1000 + i, "b": "y"})).await;
    }
    let f = json!({"a": {"$gte": 0}, "b": "x"});
    let plan = || {
        let (s, f) = (&s, f.clone());
        async move {
            let (_, ex) = s.post("/v1/tables/flip/query", json!({"filter": f, "explain": true, "limit": 3})).await;
            ex["plan"]["scans"][0]["index"].as_str().unwrap_or_default().to_owned()
        }
    };
    assert_eq!(plan().await, "by_b", "10 keys for b = x against 40 for a >= 0");
    let (_, page) = s.post("/v1/tables/flip/query", json!({"filter": f, "limit": 3})).await;
    let mut ids: Vec<String> = Vec::new();
    let mut page = page;
    let mut wrote = false;
    for _ in 0..20 {
        ids.extend(page["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()));
        let Some(cursor) = page["cursor"].as_str().map(str::to_owned) else { break };
        if !wrote {
            // the y documents leave a >= 0 and join b = x: now a's index is the cheaper scan
            for i in 0..30 {
                s.put(&format!("/v1/tables/flip/documents/y{i:02}"), json!({"a": -1, "b": "x"})).await;
            }
            assert_eq!(plan().await, "by_a");
            wrote = true;
        }
        let (st, next) = s.post("/v1/tables/flip/query", json!({"filter": f, "limit": 3, "cursor": cursor})).await;
        assert_eq!(st, 200, "{next}");
        page = next;
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "a document came back twice: {ids:?}");
    assert_eq!(sorted, (0..10).map(|i| format!("x{i:02}")).collect::<Vec<_>>(), "{ids:?}");
}
