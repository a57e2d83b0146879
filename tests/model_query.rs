//! Model-based tests of indexes and queries: random writes and index creations go to the server
//! and to a plain in-memory model (a BTreeMap with a filter evaluator written here, independently
//! of the server's); every query answer — filters, sorts, limits, cursors — must be identical, and
//! `POST /v1/admin/check` must find nothing wrong.

mod common;
use common::{TestServer, seg};
use reqwest::Method;
use serde_json::{Value, json};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A small deterministic PRNG (xorshift64*), so failures reproduce from the seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ---------- the model's own semantics ----------

/// Key order of scalars: null < false < true < numbers < strings; numbers numerically.
fn class(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        _ => 4,
    }
}

fn cmp_num(a: &serde_json::Number, b: &serde_json::Number) -> Ordering {
    let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.as_f64().unwrap().partial_cmp(&b.as_f64().unwrap()).unwrap(),
    }
}

fn cmp_scalar(a: &Value, b: &Value) -> Ordering {
    class(a).cmp(&class(b)).then_with(|| match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => cmp_num(x, y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        _ => Ordering::Equal,
    })
}

fn is_scalar(v: &Value) -> bool {
    class(v) < 4
}

fn get<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, step| v.as_object()?.get(step))
}

/// The scalars a field offers to comparisons.
fn scalars(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().filter(|e| is_scalar(e)).collect(),
        v if is_scalar(v) => vec![v],
        _ => vec![],
    }
}

fn model_eq(field: Option<&Value>, v: &Value) -> bool {
    let Some(f) = field else { return v.is_null() };
    if is_scalar(v) {
        return scalars(f).iter().any(|s| cmp_scalar(s, v) == Ordering::Equal);
    }
    f == v || f.as_array().is_some_and(|a| a.contains(v))
}

fn model_match(doc: &Value, filter: &Value) -> bool {
    filter.as_object().unwrap().iter().all(|(k, v)| match k.as_str() {
        "$and" => v.as_array().unwrap().iter().all(|f| model_match(doc, f)),
        "$or" => v.as_array().unwrap().iter().any(|f| model_match(doc, f)),
        "$not" => !model_match(doc, v),
        path => {
            let field = get(doc, path);
            match v {
                Value::Object(ops) if ops.keys().all(|o| o.starts_with('$')) && !ops.is_empty() => {
                    ops.iter().all(|(op, arg)| model_op(field, op, arg))
                }
                v => model_eq(field, v),
            }
        }
    })
}

fn model_op(field: Option<&Value>, op: &str, arg: &Value) -> bool {
    let cmp = |ok: fn(Ordering) -> bool| {
        field.is_some_and(|f| scalars(f).iter().any(|s| class(s) == class(arg) && ok(cmp_scalar(s, arg))))
    };
    match op {
        "$eq" => model_eq(field, arg),
        "$ne" => !model_eq(field, arg),
        "$gt" => cmp(Ordering::is_gt),
        "$gte" => cmp(Ordering::is_ge),
        "$lt" => cmp(Ordering::is_lt),
        "$lte" => cmp(Ordering::is_le),
        "$in" => arg.as_array().unwrap().iter().any(|a| model_eq(field, a)),
        "$nin" => !arg.as_array().unwrap().iter().any(|a| model_eq(field, a)),
        "$exists" => field.is_some() == arg.as_bool().unwrap(),
        "$prefix" => field.is_some_and(|f| {
            scalars(f).iter().any(|s| s.as_str().is_some_and(|s| s.starts_with(arg.as_str().unwrap())))
        }),
        other => panic!("model has no {other}"),
    }
}

/// Sort value: smallest scalar ascending, largest descending; null when none.
fn sort_value(doc: &Value, field: &str, desc: bool) -> Value {
    let mut vals: Vec<Value> = get(doc, field).map(|f| scalars(f).into_iter().cloned().collect()).unwrap_or_default();
    vals.sort_by(cmp_scalar);
    let v = if desc { vals.last() } else { vals.first() };
    v.cloned().unwrap_or(Value::Null)
}

fn model_query(model: &BTreeMap<String, Value>, filter: &Value, sort: &[(String, bool)]) -> Vec<String> {
    let mut hits: Vec<(&String, &Value)> = model.iter().filter(|(_, d)| model_match(d, filter)).collect();
    hits.sort_by(|(ia, a), (ib, b)| {
        for (field, desc) in sort {
            let o = cmp_scalar(&sort_value(a, field, *desc), &sort_value(b, field, *desc));
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        // ties: `_id` in the first sort key's direction
        let by_id = ia.as_bytes().cmp(ib.as_bytes());
        if sort.first().is_some_and(|(_, desc)| *desc) { by_id.reverse() } else { by_id }
    });
    hits.into_iter().map(|(id, _)| id.clone()).collect()
}

// ---------- random documents and filters ----------

const NUMS: &[&str] = &[
    "0",
    "-0.0",
    "1",
    "1.0",
    "-1",
    "-2.5",
    "2.5",
    "3",
    "7",
    "100",
    "9223372036854775807",
    "18446744073709551615",
    "-9223372036854775808",
    "0.1",
    "1e10",
];
const STRS: &[&str] = &["", "a", "ab", "abc", "b", "ba", "é", "🦀", "10", "Z"];

fn num(rng: &mut Rng) -> Value {
    let text: &&str = rng.pick(NUMS);
    serde_json::from_str(text).unwrap()
}

fn scalar(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2..=5 => num(rng),
        _ => Value::String(rng.pick(STRS).to_string()),
    }
}

fn document(rng: &mut Rng, with_unique: bool) -> Value {
    let mut d = serde_json::Map::new();
    if !rng.chance(10) {
        d.insert("a".into(), if rng.chance(80) { num(rng) } else { scalar(rng) });
    }
    if !rng.chance(10) {
        d.insert("b".into(), json!(rng.pick(&["x", "y", "z", "w"])));
    }
    if rng.chance(80) {
        d.insert("c".into(), json!(rng.below(4)));
    }
    if rng.chance(70) {
        d.insert("s".into(), json!(rng.pick(STRS)));
    }
    if rng.chance(60) {
        let n = rng.below(4);
        d.insert("tags".into(), Value::Array((0..n).map(|_| json!(rng.below(6))).collect()));
    } else if rng.chance(30) {
        d.insert("tags".into(), json!(rng.below(6)));
    }
    if with_unique && rng.chance(70) {
        d.insert("u".into(), json!(format!("u{}", rng.below(40))));
    }
    if rng.chance(30) {
        d.insert("n".into(), json!({"v": rng.below(5), "w": scalar(rng)}));
    }
    Value::Object(d)
}

fn condition(rng: &mut Rng) -> Value {
    let field = *rng.pick(&["a", "b", "c", "s", "tags", "u", "n.v", "missing"]);
    let arg = match field {
        "b" => json!(rng.pick(&["x", "y", "z", "q"])),
        "c" | "tags" | "n.v" => json!(rng.below(6)),
        "s" => json!(rng.pick(STRS)),
        "u" => json!(format!("u{}", rng.below(40))),
        _ => scalar(rng),
    };
    let scalar_arg = if arg.is_null() { json!(1) } else { arg.clone() };
    let mut m = serde_json::Map::new();
    let cond = match rng.below(12) {
        0 | 1 => arg,
        2 => json!({"$ne": arg}),
        3 => json!({"$gt": scalar_arg}),
        4 => json!({"$gte": scalar_arg}),
        5 => json!({"$lt": scalar_arg}),
        6 => json!({"$lte": scalar_arg, "$gt": num(rng)}),
        7 => json!({"$in": [arg, scalar(rng)]}),
        8 => json!({"$nin": [arg]}),
        9 => json!({"$exists": rng.chance(50)}),
        10 => json!({"$prefix": rng.pick(&["", "a", "b", "é"])}),
        _ => json!({"$gte": num(rng), "$lte": num(rng)}),
    };
    m.insert(field.to_owned(), cond);
    Value::Object(m)
}

fn filter(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => json!({}),
        1..=4 => condition(rng),
        5 | 6 => {
            let (mut a, b) = (condition(rng), condition(rng));
            // two fields (or the same one twice) under an implicit AND
            for (k, v) in b.as_object().unwrap() {
                a.as_object_mut().unwrap().entry(k.clone()).or_insert(v.clone());
            }
            a
        }
        7 => json!({"$and": [condition(rng), condition(rng)]}),
        8 => json!({"$or": [condition(rng), condition(rng)]}),
        // branches an index can serve, overlapping on purpose
        9 | 10 => {
            json!({"$or": [{"b": rng.pick(&["x", "y"])}, {"c": {"$in": [rng.below(4), rng.below(4)]}}, {"s": {"$prefix": "a"}}]})
        }
        _ => json!({"$not": condition(rng)}),
    }
}

fn sort(rng: &mut Rng) -> Vec<(String, bool)> {
    (0..rng.below(3)).map(|_| (rng.pick(&["a", "b", "c", "s", "tags", "n.v"]).to_string(), rng.chance(50))).collect()
}

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
    strategies: BTreeMap<String, usize>,
}

async fn model_run(seed: u64, ops: usize, cov: &mut Coverage) {
    let s = TestServer::start().await;
    let table = format!("m{seed}");
    s.create_table(&table).await;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut model: BTreeMap<String, Value> = BTreeMap::new();
    let post_index = |name: &str, kind: &str, fields: Value| json!({"name": name, "kind": kind, "fields": fields});
    // the unique index exists from the start, so the model can predict its 409s
    let (st, _) = s.post(&format!("/v1/tables/{table}/indexes"), post_index("by_u", "unique", json!(["u"]))).await;
    assert_eq!(st, 201);
    // the others are created part-way, over existing documents (backfill)
    let mut later = vec![
        ("by_a", "range", json!(["a"])),
        ("by_b", "hash", json!(["b"])),
        ("by_bc", "hash", json!(["b", "c"])),
        ("by_s", "range", json!(["s"])),
        ("by_tags", "range", json!(["tags"])),
        ("by_c", "hash", json!(["c"])),
        ("by_nv", "range", json!(["n.v"])),
    ];
    let mut created = vec!["by_u"];
    let ids: Vec<String> = (0..60).map(|i| if i % 7 == 0 { format!("ü/{i} id") } else { format!("d{i:02}") }).collect();
    for step in 0..ops {
        let id = rng.pick(&ids).clone();
        let path = format!("/v1/tables/{table}/documents/{}", seg(&id));
        match rng.below(10) {
            0..=5 => {
                let doc = document(&mut rng, true);
                let conflict =
                    doc.get("u").is_some_and(|u| model.iter().any(|(other, d)| *other != id && d.get("u") == Some(u)));
                let r = s.send(Method::PUT, &path, Some(&doc), &[]).await;
                if conflict {
                    assert!(r.is_problem(409, "unique_violation"), "{doc}: {}", r.body);
                } else {
                    assert!(r.status == 200 || r.status == 201, "{}", r.body);
                    model.insert(id, doc);
                }
            }
            6 | 7 => {
                let patch = document(&mut rng, true);
                let Some(current) = model.get(&id) else {
                    assert_eq!(s.patch(&path, patch).await.0, 404);
                    continue;
                };
                let mut merged = current.clone();
                for (k, v) in patch.as_object().unwrap() {
                    merged[k] = v.clone();
                }
                let conflict = merged
                    .get("u")
                    .is_some_and(|u| model.iter().any(|(other, d)| *other != id && d.get("u") == Some(u)));
                let r = s.send(Method::PATCH, &path, Some(&patch), &[]).await;
                if conflict {
                    assert!(r.is_problem(409, "unique_violation"), "{}", r.body);
                } else {
                    assert_eq!(r.status, 200, "{}", r.body);
                    model.insert(id, merged);
                }
            }
            _ => {
                let (status, _) = s.delete(&path).await;
                assert_eq!(status, if model.remove(&id).is_some() { 204 } else { 404 });
            }
        }
        if step % (ops / later.len().max(1) + 1) == 5 && !later.is_empty() {
            let (name, kind, fields) = later.remove(0);
            created.push(name);
            let (st, body) = s.post(&format!("/v1/tables/{table}/indexes"), post_index(name, kind, fields)).await;
            assert!(st == 201 || st == 202, "{body}");
        }
        if step % 25 == 24 {
            for name in &created {
                wait_ready(&s, &table, name).await;
            }
            for _ in 0..12 {
                let f = filter(&mut rng);
                let srt = sort(&mut rng);
                let limit = *rng.pick(&[1usize, 3, 7, 100]);
                let want = model_query(&model, &f, &srt);
                let got = run_query(&s, &table, &f, &srt, limit).await;
                assert_eq!(
                    same_order(&srt, got),
                    same_order(&srt, want.clone()),
                    "seed {seed} step {step}: filter {f} sort {srt:?} limit {limit}"
                );
                let sort_names: Vec<String> =
                    srt.iter().map(|(f, d)| if *d { format!("-{f}") } else { f.clone() }).collect();
                let (_, ex) = s
                    .post(
                        &format!("/v1/tables/{table}/query"),
                        json!({"filter": f, "sort": sort_names, "limit": limit, "explain": true}),
                    )
                    .await;
                let key =
                    format!("{}/{}", ex["plan"]["strategy"].as_str().unwrap(), ex["plan"]["order"].as_str().unwrap());
                *cov.strategies.entry(key).or_default() += 1;
                cov.queries += 1;
                cov.results += want.len();
            }
        }
    }
    s.check_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_agree_with_the_model() {
    let mut cov = Coverage::default();
    for seed in 1..=4 {
        model_run(seed, 250, &mut cov).await;
    }
    eprintln!("{cov:?}");
    // the runs must have exercised every kind of plan, with real results
    for plan in ["full_scan/id", "index_scan/id", "index_scan/index", "index_scan/in_memory", "union/id"] {
        assert!(cov.strategies.get(plan).is_some_and(|n| *n > 0), "no {plan} plan ran: {cov:?}");
    }
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
