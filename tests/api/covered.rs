//! Covered queries: a query whose filter one index answers exactly and whose `fields` (and sort)
//! the index holds is answered from the index keys alone. Its pages must be exactly those of the
//! same query made to read documents (a field outside the index added, then removed), over
//! random data with missing fields, nulls, floats, one-element arrays and multikey fields.

use crate::common::{Rng, TestServer};
use serde_json::{Value, json};

async fn plan(s: &TestServer, table: &str, query: &Value) -> Value {
    let mut q = query.clone();
    q["explain"] = json!(true);
    let (st, body) = s.post(&format!("/v1/tables/{table}/query"), q).await;
    assert_eq!(st, 200, "{body}");
    body["plan"].clone()
}

/// Runs `query` as given and with `extra` added to its fields (which makes it read documents),
/// checks that both give the same pages (once `extra` is taken out again) and that the first is
/// covered as `covered` says and the second never is.
async fn same_as_uncovered(s: &TestServer, table: &str, query: Value, extra: &str, covered: bool) {
    let p = plan(s, table, &query).await;
    assert_eq!(p["covered"], covered, "{query}: {p}");
    if covered {
        assert_eq!(p["documents_read"], 0, "{query}: {p}");
    }
    let mut wider = query.clone();
    wider["fields"].as_array_mut().unwrap().push(json!(extra));
    let p = plan(s, table, &wider).await;
    assert_eq!(p["covered"], false, "{wider}: {p}");
    let got = s.query_pages(table, &query, 7).await;
    let mut want = s.query_pages(table, &wider, 7).await;
    for d in &mut want {
        d.as_object_mut().unwrap().remove(extra);
    }
    assert_eq!(got, want, "{query}");
    assert!(!got.is_empty() || query["filter"]["code"].is_string(), "{query}: a test that matches nothing");
}

#[tokio::test]
async fn covered_pages_equal_the_pages_read_from_documents() {
    let s = TestServer::start().await;
    let columns = json!([
        {"name": "age", "type": "int", "nullable": true},
        {"name": "name", "type": "string", "nullable": true},
        {"name": "code", "type": "string", "nullable": true},
        {"name": "flag", "type": "bool"},
        {"name": "kind", "type": "string"},
        {"name": "score", "type": "float", "nullable": true},
        {"name": "at", "type": "timestamp", "nullable": true},
        {"name": "note", "type": "string", "nullable": true},
    ]);
    let (st, body) = s.post("/v1/tables", json!({"name": "typed", "columns": columns})).await;
    assert_eq!(st, 201, "{body}");
    for (name, kind, fields) in [
        ("r_age", "range", json!(["age"])),
        ("h_name", "hash", json!(["name"])),
        ("u_code", "unique", json!(["code"])),
        ("h_fk", "hash", json!(["flag", "kind"])),
        ("r_score", "range", json!(["score"])),
        ("r_at", "range", json!(["at"])),
    ] {
        let (st, body) =
            s.post("/v1/tables/typed/indexes", json!({"name": name, "kind": kind, "fields": fields})).await;
        assert!(st == 201 || st == 202, "{body}");
        assert_eq!(s.index_settled("typed", name).await["state"], "ready");
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut docs = Vec::new();
    let mut some_age = None;
    for i in 0..300 {
        let mut d = serde_json::Map::new();
        d.insert("_id".into(), json!(format!("d{:03}", rng.below(1000) * 1000 + i)));
        // age: missing, null, or 0-99
        match rng.below(10) {
            0 => {}
            1 => {
                d.insert("age".into(), Value::Null);
            }
            _ => {
                let age = rng.below(100);
                some_age.get_or_insert(age);
                d.insert("age".into(), json!(age));
            }
        }
        if rng.below(6) > 0 {
            d.insert("name".into(), json!(format!("n{}", rng.below(8))));
        }
        if rng.below(3) > 0 {
            d.insert("code".into(), json!(format!("c{i}")));
        }
        d.insert("flag".into(), json!(rng.below(2) == 0));
        d.insert("kind".into(), json!(format!("k{}", rng.below(3))));
        match rng.below(4) {
            0 => {}
            1 => {
                d.insert("score".into(), json!(rng.below(4)));
            }
            2 => {
                d.insert("score".into(), json!(rng.below(4) as f64));
            }
            _ => {
                d.insert("score".into(), json!(rng.below(100) as f64 / 8.0));
            }
        }
        if rng.below(4) > 0 {
            d.insert("at".into(), json!(1_700_000_000_000u64 + rng.below(1000) * 1000));
        }
        d.insert("note".into(), json!(format!("note {i}")));
        docs.push(Value::Object(d));
    }
    let (st, body) = s.post("/v1/tables/typed/documents", Value::Array(docs)).await;
    assert_eq!(st, 201, "{body}");

    let cases = [
        (json!({"filter": {"age": {"$gte": 20, "$lt": 60}}, "fields": ["_id"]}), true),
        (json!({"filter": {"age": {"$gte": 20, "$lt": 60}}, "fields": ["_id", "age"]}), true),
        (json!({"filter": {"age": some_age}, "fields": ["age"]}), true),
        (json!({"filter": {"age": {"$in": [1, 2, 3, 50, 70]}}, "fields": ["_id", "age"]}), true),
        (json!({"filter": {"age": {"$gte": 20}}, "sort": ["-age"], "fields": ["_id", "age"]}), true),
        (json!({"filter": {"age": {"$lt": 50}}, "sort": ["_id"], "fields": ["age"]}), true),
        // the whole index in order, missing and null ages included (as null): ids only
        (json!({"filter": {}, "sort": ["age"], "fields": ["_id"]}), true),
        (json!({"filter": {}, "sort": ["-age"], "fields": ["_id"]}), true),
        (json!({"filter": {}, "sort": ["age"], "fields": ["_id", "age"]}), false),
        (json!({"filter": {"name": "n3"}, "fields": ["_id", "name"]}), true),
        (json!({"filter": {"name": {"$in": ["n1", "n2"]}}, "fields": ["name"]}), true),
        (json!({"filter": {"flag": true, "kind": "k1"}, "fields": ["_id", "flag", "kind"]}), true),
        // a unique point lookup runs inline on the async runtime: it reads its one document rather
        // than the expiry entries a covered plan may read; a `$in` of several values is covered
        (json!({"filter": {"code": "c5"}, "fields": ["code"]}), false),
        (json!({"filter": {"code": "c-none"}, "fields": ["code"]}), false),
        (json!({"filter": {"code": {"$in": ["c5", "c6"]}}, "fields": ["code"]}), true),
        (json!({"filter": {"at": {"$gte": 1_700_000_300_000u64}}, "fields": ["_id", "at"]}), true),
        // floats: `3.0` and `3` share a key, so only ids come from a float index
        (json!({"filter": {"score": {"$gt": 0.5}}, "fields": ["_id"]}), true),
        (json!({"filter": {"score": {"$gt": 0.5}}, "fields": ["_id", "score"]}), false),
        // not answered by the index alone
        (json!({"filter": {"name": null}, "fields": ["_id"]}), false),
        (json!({"filter": {"age": {"$gte": 20}, "name": "n1"}, "fields": ["_id"]}), false),
        (json!({"filter": {"age": {"$gte": 20}}, "fields": ["_id", "age"], "sort": ["name"]}), false),
        (json!({"filter": {}, "fields": ["_id"]}), false),
    ];
    for (query, covered) in cases {
        same_as_uncovered(&s, "typed", query, "note", covered).await;
    }
}

#[tokio::test]
async fn schemaless_values_are_never_taken_from_keys() {
    let s = TestServer::start().await;
    s.create_table("loose").await;
    for (name, kind, field) in [("r_v", "range", "v"), ("h_h", "hash", "h"), ("h_tags", "hash", "tags")] {
        let (st, body) =
            s.post("/v1/tables/loose/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
        assert!(st == 201 || st == 202, "{body}");
    }
    let mut rng = Rng(42);
    let mut docs = Vec::new();
    for i in 0..300 {
        let n = rng.below(10);
        // ints, floats, 3.0, strings, one-element arrays, objects, null, missing
        let v = match rng.below(9) {
            0 => None,
            1 => Some(Value::Null),
            2 => Some(json!(n)),
            3 => Some(json!(n as f64)),
            4 => Some(json!(n as f64 + 0.5)),
            5 => Some(json!([n])),
            6 => Some(json!({"x": n})),
            7 => Some(json!(format!("s{n}"))),
            _ => Some(json!([])),
        };
        let mut d = json!({"_id": format!("x{i:03}"), "h": if rng.below(2) == 0 { json!(format!("h{n}")) } else { json!([format!("h{n}")]) },
            "tags": (0..rng.below(3)).map(|k| format!("t{}", (n + k) % 4)).collect::<Vec<_>>(), "other": i});
        if let Some(v) = v {
            d["v"] = v;
        }
        docs.push(d);
    }
    let (st, body) = s.post("/v1/tables/loose/documents", Value::Array(docs)).await;
    assert_eq!(st, 201, "{body}");
    for (query, covered) in [
        (json!({"filter": {"v": {"$gte": 2}}, "fields": ["_id"]}), true),
        (json!({"filter": {"v": {"$gte": 2}}, "sort": ["-v"], "fields": ["_id"]}), true),
        (json!({"filter": {"v": 3}, "fields": ["_id"]}), true),
        (json!({"filter": {"v": {"$prefix": "s"}}, "fields": ["_id"]}), true),
        (json!({"filter": {}, "sort": ["v"], "fields": ["_id"]}), true),
        (json!({"filter": {"h": "h3"}, "fields": ["_id"]}), true),
        // a schemaless value may be `[3]` or `3.0` where the key says 3
        (json!({"filter": {"v": {"$gte": 2}}, "fields": ["_id", "v"]}), false),
        (json!({"filter": {"h": "h3"}, "fields": ["_id", "h"]}), false),
        // multikey: a key holds one element of the array
        (json!({"filter": {"tags": "t1"}, "fields": ["_id"]}), false),
        (json!({"filter": {"v": null}, "fields": ["_id"]}), false),
    ] {
        same_as_uncovered(&s, "loose", query, "other", covered).await;
    }
    // a document that expires leaves the covered results like the others
    let (st, body) = s.put("/v1/tables/loose/documents/x000", json!({"v": 5, "_expires_at": 1000})).await;
    assert_eq!(st, 200, "{body}");
    let q = json!({"filter": {"v": 5}, "fields": ["_id"]});
    assert_eq!(plan(&s, "loose", &q).await["covered"], true);
    let ids = s.query_pages("loose", &q, 7).await;
    assert!(!ids.contains(&json!({"_id": "x000"})), "{ids:?}");
    same_as_uncovered(&s, "loose", q, "other", true).await;
}
