//! Queries and index entries under hostile input: bounded work, `_id` filters, bound cursors, and
//! paging whose cost does not grow with the page number.

use crate::common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

const FIELDS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// `{"a": [0..n], …, "h": [0..n]}`
fn wide(n: i64) -> Value {
    let values: Vec<i64> = (0..n).collect();
    Value::Object(FIELDS.iter().map(|f| ((*f).to_owned(), json!(values))).collect())
}

#[tokio::test]
async fn over_cap_documents_are_refused_wherever_entries_are_computed() {
    let s = TestServer::start().await;
    s.create_table("cap").await;
    let (st, _) = s.post("/v1/tables/cap/indexes", json!({"name": "h8", "kind": "hash", "fields": FIELDS})).await;
    assert_eq!(st, 201);
    // 256^8 entries: counted with checked arithmetic and refused, never multiplied out
    let r = s.send(Method::PUT, "/v1/tables/cap/documents/big", Some(&wide(256)), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/tables/cap/documents", Some(&json!([wide(256)])), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
    let op = json!({"operations": [{"op": "put", "table": "cap", "id": "x", "document": wide(256)}]});
    let r = s.send(Method::POST, "/v1/batch", Some(&op), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
    // an import fails that line only and writes the others
    let lines = format!("{}\n{}\n", json!({"_id": "fits", "a": 1}), wide(256));
    let r = s.raw(Method::POST, "/v1/tables/cap/import", "application/x-ndjson", lines).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["inserted"], 1, "{}", r.body);
    assert_eq!(r.body["failures"][0]["line"], 2, "{}", r.body);
    assert_eq!(r.body["failures"][0]["code"], "too_many_index_entries", "{}", r.body);
    assert_eq!(s.delete("/v1/tables/cap/documents/fits").await.0, 204);
    // over the cap (3^8 = 6561 > 1000) but far from overflowing, and a patch that grows past it
    let r = s.send(Method::PUT, "/v1/tables/cap/documents/k", Some(&wide(3)), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
    assert_eq!(s.put("/v1/tables/cap/documents/k", json!({"a": [1, 2], "b": 1})).await.0, 201);
    let r = s.send(Method::PATCH, "/v1/tables/cap/documents/k", Some(&wide(3)), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
    // a range index caps a document's distinct values the same way
    let (st, _) = s.post("/v1/tables/cap/indexes", json!({"name": "r", "kind": "range", "fields": ["r"]})).await;
    assert_eq!(st, 202);
    assert_eq!(s.index_settled("cap", "r").await["state"], "ready");
    let many: Vec<i64> = (0..1001).collect();
    let r = s.send(Method::PUT, "/v1/tables/cap/documents/r", Some(&json!({"r": many})), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
    assert_eq!(s.put("/v1/tables/cap/documents/r", json!({"r": many[..1000]})).await.0, 201);
    // a query with $in of 256 values on each of the 8 fields plans without multiplying them out
    let values: Vec<i64> = (0..256).collect();
    let filter: serde_json::Map<String, Value> =
        FIELDS.iter().map(|f| ((*f).to_owned(), json!({"$in": values}))).collect();
    let (st, page) = s.post("/v1/tables/cap/query", json!({"filter": filter})).await;
    assert_eq!(st, 200, "{page}");
    assert_eq!(page["documents"], json!([]));
    let (_, list) = s.get("/v1/tables/cap/documents").await;
    assert_eq!(list["documents"].as_array().unwrap().len(), 2, "nothing over the cap was written: {list}");
    s.check_ok().await;
}

#[tokio::test]
async fn documents_stored_before_the_index_can_still_be_patched_and_deleted() {
    let s = TestServer::start().await;
    s.create_table("old").await;
    for id in ["big", "big2"] {
        assert_eq!(s.put(&format!("/v1/tables/old/documents/{id}"), wide(256)).await.0, 201);
    }
    assert_eq!(s.put("/v1/tables/old/documents/small", json!({"a": 1})).await.0, 201);
    // the backfill meets documents over the cap: it must not take the process down
    let (st, _) = s.post("/v1/tables/old/indexes", json!({"name": "h8", "kind": "hash", "fields": FIELDS})).await;
    assert_eq!(st, 202);
    // computing the old document's entries does not refuse the write
    let fit: serde_json::Map<String, Value> = FIELDS.iter().map(|f| ((*f).to_owned(), json!(1))).collect();
    let (st, body) = s.patch("/v1/tables/old/documents/big", Value::Object(fit)).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(s.delete("/v1/tables/old/documents/big2").await.0, 204);
    let (st, got) = s.get("/v1/tables/old/documents/big").await;
    assert_eq!((st.as_u16(), &got["h"]), (200, &json!(1)));
    // the server is still up and answering
    assert_eq!(s.get("/v1/tables/old/documents/small").await.0, 200);
}

#[tokio::test]
async fn filters_and_sorts_over_the_documented_limits_are_refused() {
    let s = TestServer::start().await;
    s.create_table("lim").await;
    assert_eq!(s.put("/v1/tables/lim/documents/d", json!({"a": 1})).await.0, 201);
    let ors: Vec<Value> = (0..65).map(|i| json!({"a": i})).collect();
    let ands: Vec<Value> = (0..65).map(|i| json!({"a": {"$ne": i}})).collect();
    let many_ops: serde_json::Map<String, Value> = (0..65).map(|i| (format!("f{i}"), json!(i))).collect();
    let mut deep = json!({"a": 1});
    for _ in 0..17 {
        deep = json!({"$not": deep});
    }
    // 5 $or of 60 branches: each under the cap, 300 conditions in all
    let wide: Vec<Value> =
        (0..5).map(|_| json!({"$or": (0..60).map(|i| json!({"a": i})).collect::<Vec<_>>()})).collect();
    let in_values: Vec<i64> = (0..1001).collect();
    let sort: Vec<String> = (0..9).map(|i| format!("f{i}")).collect();
    let fields: Vec<String> = (0..257).map(|i| format!("f{i}")).collect();
    for body in [
        json!({"filter": {"$or": ors}}),
        json!({"filter": {"$and": ands}}),
        json!({"filter": many_ops}),
        json!({"filter": deep}),
        json!({"filter": {"$and": wide}}),
        json!({"filter": {"a": {"$in": in_values}}}),
        json!({"filter": {"a": {"$nin": in_values}}}),
        json!({"sort": sort}),
        json!({"fields": fields}),
    ] {
        let r = s.send(Method::POST, "/v1/tables/lim/query", Some(&body), &[]).await;
        assert!(r.is_problem(400, "query_too_complex"), "{body}: {}", r.body);
    }
    // at the limits, the same shapes run
    let ors: Vec<Value> = (0..64).map(|i| json!({"a": i})).collect();
    let in_values: Vec<i64> = (0..1000).collect();
    let sort: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    for body in [json!({"filter": {"$or": ors}}), json!({"filter": {"a": {"$in": in_values}}}), json!({"sort": sort})] {
        let (st, page) = s.post("/v1/tables/lim/query", body.clone()).await;
        assert_eq!((st.as_u16(), page["documents"].as_array().map(Vec::len)), (200, Some(1)), "{body}: {page}");
    }
}

/// Pages through a query, returning every id and the cursors handed out.
async fn pages(s: &TestServer, table: &str, body: Value, between: impl AsyncFn(usize)) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..100 {
        let mut body = body.clone();
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let (st, got) = s.post(&format!("/v1/tables/{table}/query"), body.clone()).await;
        assert_eq!(st, 200, "{body}: {got}");
        ids.extend(got["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()));
        cursor = got["cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            return ids;
        }
        between(page).await;
    }
    panic!("paging did not end");
}

#[tokio::test]
async fn cursors_are_bound_to_their_table_filter_and_sort() {
    let s = TestServer::start().await;
    for t in ["c1", "c2"] {
        s.create_table(t).await;
        let docs: Vec<Value> = (0..10).map(|i| json!({"_id": format!("k{i:02}"), "x": i, "y": 1})).collect();
        assert_eq!(s.post(&format!("/v1/tables/{t}/documents"), json!(docs)).await.0, 201);
    }
    let filter = json!({"x": {"$gte": 0}, "y": 1});
    let (_, first) = s.post("/v1/tables/c1/query", json!({"filter": filter, "limit": 3})).await;
    let c = first["cursor"].as_str().unwrap().to_owned();
    let bad = [
        ("c2", json!({"filter": filter, "cursor": c})),
        ("c1", json!({"filter": {"x": {"$gte": 1}, "y": 1}, "cursor": c})),
        ("c1", json!({"filter": filter, "sort": ["x"], "cursor": c})),
        ("c1", json!({"cursor": c})),
        ("c1", json!({"filter": filter, "cursor": "bm90IGEgY3Vyc29y"})),
        ("c1", json!({"filter": filter, "cursor": "!!"})),
    ];
    for (t, body) in bad {
        let r = s.send(Method::POST, &format!("/v1/tables/{t}/query"), Some(&body), &[]).await;
        assert!(r.is_problem(400, "invalid_cursor"), "{t} {body}: {}", r.body);
    }
    // the same filter with its keys in another order is the same filter; the limit may change
    let reordered: Value = serde_json::from_str(r#"{"y": 1, "x": {"$gte": 0}}"#).unwrap();
    let (st, next) = s.post("/v1/tables/c1/query", json!({"filter": reordered, "cursor": c, "limit": 4})).await;
    assert_eq!(st, 200, "{next}");
    assert_eq!(next["documents"][0]["_id"], "k03");
    // the listing's cursor is bound to its table, and to this incarnation of it
    let (_, list) = s.get("/v1/tables/c1/documents?limit=2").await;
    let lc = list["cursor"].as_str().unwrap().to_owned();
    let (st, more) = s.get(&format!("/v1/tables/c1/documents?limit=2&cursor={lc}")).await;
    assert_eq!((st.as_u16(), &more["documents"][0]["_id"]), (200, &json!("k02")));
    let r = s.send(Method::GET, &format!("/v1/tables/c2/documents?cursor={lc}"), None, &[]).await;
    assert!(r.is_problem(400, "invalid_cursor"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/tables/c1/query", Some(&json!({"cursor": lc})), &[]).await;
    assert!(r.is_problem(400, "invalid_cursor"), "a listing cursor is not a query's: {}", r.body);
    assert_eq!(s.delete("/v1/tables/c1").await.0, 204);
    s.create_table("c1").await;
    assert_eq!(s.put("/v1/tables/c1/documents/k05", json!({})).await.0, 201);
    let r = s.send(Method::GET, &format!("/v1/tables/c1/documents?cursor={lc}"), None, &[]).await;
    assert!(r.is_problem(400, "invalid_cursor"), "a re-created table refuses the old cursors: {}", r.body);
}

#[tokio::test]
async fn a_cursor_keeps_its_order_when_the_plan_changes_between_pages() {
    let s = TestServer::start().await;
    s.create_table("po").await;
    let docs: Vec<Value> = (0..20).map(|i| json!({"_id": format!("k{i:02}"), "age": (i * 7) % 10})).collect();
    assert_eq!(s.post("/v1/tables/po/documents", json!(docs)).await.0, 201);
    let all: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
    // page 1 is a full scan in _id order; then a range index on the filtered field becomes ready,
    // whose scan would return age order
    let body = json!({"filter": {"age": {"$gte": 0}}, "limit": 5});
    let got = pages(&s, "po", body.clone(), async |page| {
        if page == 0 {
            let (st, _) =
                s.post("/v1/tables/po/indexes", json!({"name": "by_age", "kind": "range", "fields": ["age"]})).await;
            assert_eq!(st, 202);
            assert_eq!(s.index_settled("po", "by_age").await["state"], "ready");
        }
    })
    .await;
    assert_eq!(got, all, "_id order throughout");
    let (_, p) = s.post("/v1/tables/po/query", json!({"filter": {"age": {"$gte": 0}}, "explain": true})).await;
    assert_eq!(p["plan"]["order"], "index", "a first page now gets the range index's order: {p}");
    // the other way: page 1 in the index's order, then the index is dropped
    let got = pages(&s, "po", body, async |page| {
        if page == 0 {
            assert_eq!(s.delete("/v1/tables/po/indexes/by_age").await.0, 204);
        }
    })
    .await;
    let mut by_age = all.clone();
    by_age.sort_by_key(|id| (id[1..].parse::<u64>().unwrap() * 7 % 10, id.clone()));
    assert_eq!(got, by_age, "age order throughout");
}

/// The ids a query returns (one page of up to 1000).
async fn ids(s: &TestServer, table: &str, body: Value) -> Vec<String> {
    let (st, page) = s.post(&format!("/v1/tables/{table}/query"), body.clone()).await;
    assert_eq!(st, 200, "{body}: {page}");
    page["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()).collect()
}

async fn explain(s: &TestServer, table: &str, mut body: Value) -> Value {
    body["explain"] = json!(true);
    let (st, page) = s.post(&format!("/v1/tables/{table}/query"), body.clone()).await;
    assert_eq!(st, 200, "{body}: {page}");
    page["plan"].clone()
}

#[tokio::test]
async fn id_conditions_match_and_are_read_from_the_entity_keys() {
    let s = TestServer::start().await;
    s.create_table("ids").await;
    let docs: Vec<Value> = (0..10).map(|i| json!({"_id": format!("k{i:02}"), "n": i})).collect();
    assert_eq!(s.post("/v1/tables/ids/documents", json!(docs)).await.0, 201);
    let k = |r: std::ops::Range<usize>| r.map(|i| format!("k{i:02}")).collect::<Vec<_>>();
    let cases = [
        (json!({"_id": "k05"}), k(5..6)),
        (json!({"_id": {"$eq": "k05"}, "n": 5}), k(5..6)),
        (json!({"_id": "k05", "n": 4}), vec![]),
        (json!({"_id": {"$in": ["k07", "k01", "zz", 5, null]}}), vec!["k01".into(), "k07".into()]),
        (json!({"_id": null}), vec![]),
        (json!({"_id": {"$exists": false}}), vec![]),
        (json!({"_id": {"$gte": "k03", "$lt": "k06"}}), k(3..6)),
        (json!({"_id": {"$gt": "k03", "$lte": "k06", "$lt": "k05"}}), k(4..5)),
        (json!({"_id": {"$gt": 3}}), vec![]),
        (json!({"_id": {"$prefix": "k0"}}), k(0..10)),
        (json!({"_id": {"$ne": "k05"}, "n": {"$gte": 4, "$lte": 6}}), vec!["k04".into(), "k06".into()]),
        (json!({"_id.x": null}), k(0..10)),
        (json!({"$or": [{"_id": "k01"}, {"n": 8}]}), vec!["k01".into(), "k08".into()]),
    ];
    for (filter, want) in cases {
        assert_eq!(ids(&s, "ids", json!({"filter": filter})).await, want, "{filter}");
    }
    let mut desc = k(0..10);
    desc.reverse();
    assert_eq!(ids(&s, "ids", json!({"sort": ["-_id"]})).await, desc);
    // point reads and key ranges, shown in explain; only what they name is read
    let p = explain(&s, "ids", json!({"filter": {"_id": {"$in": ["k02", "k04", "nope"]}}})).await;
    assert_eq!((p["strategy"].as_str(), p["scans"][0]["index"].as_str()), (Some("id_lookup"), Some("_id")), "{p}");
    assert_eq!((p["examined_rows"].as_u64(), p["returned_rows"].as_u64()), (Some(2), Some(2)), "{p}");
    assert_eq!(p["scans"][0]["ranges"][0], json!(["entity:ids:k02", "entity:ids:k02"]), "{p}");
    let p = explain(&s, "ids", json!({"filter": {"_id": {"$gte": "k03", "$lt": "k06"}}})).await;
    assert_eq!(p["strategy"], "id_range", "{p}");
    assert_eq!(p["scans"][0]["ranges"][0], json!(["entity:ids:k03", "entity:ids:k06"]), "{p}");
    assert_eq!(p["examined_rows"], 3, "{p}");
    let p = explain(&s, "ids", json!({"filter": {"_id": null}})).await;
    assert_eq!((p["strategy"].as_str(), p["examined_rows"].as_u64()), (Some("id_lookup"), Some(0)), "{p}");
    // pages of a lookup and of a range
    let got =
        pages(&s, "ids", json!({"filter": {"_id": {"$in": ["k09", "k00", "k05"]}}, "limit": 1}), async |_| {}).await;
    assert_eq!(got, ["k00", "k05", "k09"]);
    let got = pages(&s, "ids", json!({"filter": {"_id": {"$gte": "k02"}}, "limit": 3}), async |_| {}).await;
    assert_eq!(got, k(2..10));
}

/// Explains the page after `cursor` (or the first).
async fn examined_on_page(s: &TestServer, table: &str, body: &Value, cursor: Option<&str>) -> Value {
    let mut body = body.clone();
    if let Some(c) = cursor {
        body["cursor"] = json!(c);
    }
    explain(s, table, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_page_examines_no_more_than_the_first() {
    let s = TestServer::start().await;
    s.create_table("pg").await;
    for (name, field) in [("by_g", "g"), ("by_h", "h")] {
        let (st, _) = s.post("/v1/tables/pg/indexes", json!({"name": name, "kind": "hash", "fields": [field]})).await;
        assert_eq!(st, 201);
    }
    let mut body = String::new();
    for i in 0..3000 {
        body.push_str(&format!("{}\n", json!({"_id": format!("d{i:05}"), "g": i % 2, "h": i % 3})));
    }
    let r = s.raw(Method::POST, "/v1/tables/pg/import", "application/x-ndjson", body).await;
    assert_eq!(r.body["inserted"], 3000, "{}", r.body);
    for (query, strategy) in [
        (json!({"filter": {"g": 1}, "limit": 50}), "index_scan"),
        (json!({"filter": {"g": 1, "h": 2}, "limit": 50}), "intersection"),
        (json!({"filter": {"_id": {"$gte": "d01000"}}, "limit": 50}), "id_range"),
    ] {
        let first = examined_on_page(&s, "pg", &query, None).await;
        assert_eq!(first["strategy"], strategy, "{first}");
        let mut cursor: Option<String> = None;
        let mut page = 0;
        loop {
            let mut q = query.clone();
            if let Some(c) = &cursor {
                q["cursor"] = json!(c);
            }
            let (st, got) = s.post("/v1/tables/pg/query", q).await;
            assert_eq!(st, 200);
            let Some(next) = got["cursor"].as_str() else { break };
            cursor = Some(next.to_owned());
            page += 1;
            let later = examined_on_page(&s, "pg", &query, cursor.as_deref()).await;
            assert_eq!(later["strategy"], strategy, "{later}");
            // the scan starts at the cursor: page N reads what page 1 reads (its limit + 1)
            assert!(
                later["examined_rows"].as_u64().unwrap() <= first["examined_rows"].as_u64().unwrap(),
                "{query} page {page}: {later} vs first {first}"
            );
        }
        assert!(page >= 9, "{query}: {page} pages");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_stops_at_the_request_timeout() {
    // the scan's own deadline (the request timeout, set short here), with the HTTP layer's
    // timeout long: the 408 can only come from the scan giving up
    let s = TestServer::start_with(|c| {
        c.options.query_timeout = Some(std::time::Duration::from_millis(50));
        c.limits.timeout = std::time::Duration::from_secs(600);
    })
    .await;
    s.create_table("slow").await;
    let mut body = String::new();
    for i in 0..20_000 {
        body.push_str(&format!("{}\n", json!({"_id": format!("d{i:05}"), "n": i})));
    }
    let r = s.raw(Method::POST, "/v1/tables/slow/import", "application/x-ndjson", body).await;
    assert_eq!(r.body["inserted"], 20_000, "{}", r.body);
    // a full scan whose every document is checked against 1000 values, 64 times over
    let nin: Vec<Value> = (0..1000).map(|i| json!(format!("x{i}"))).collect();
    let ands: Vec<Value> = (0..64).map(|_| json!({"n": {"$nin": nin}})).collect();
    let query = json!({"filter": {"$and": ands, "missing": true}});
    let r = s.send(Method::POST, "/v1/tables/slow/query", Some(&query), &[]).await;
    assert!(r.is_problem(408, "request_timeout"), "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("scan"), "{}", r.body);
    // and the server answers the next request
    assert_eq!(s.get("/v1/tables/slow/documents/d00001").await.0, 200);
}

#[tokio::test]
async fn a_sorted_multikey_scan_reads_each_document_once() {
    let s = TestServer::start().await;
    s.create_table("mks").await;
    let (st, _) = s.post("/v1/tables/mks/indexes", json!({"name": "by_t", "kind": "range", "fields": ["t"]})).await;
    assert_eq!(st, 201);
    // 20 documents of 50 values each: 1000 keys, interleaved across the whole index
    let docs: Vec<Value> = (0..20)
        .map(|i| json!({"_id": format!("d{i:02}"), "t": (0..50).map(|j| i + 20 * j).collect::<Vec<_>>()}))
        .collect();
    assert_eq!(s.post("/v1/tables/mks/documents", json!(docs)).await.0, 201);
    for (sort, want) in [("t", (0..20).collect::<Vec<_>>()), ("-t", (0..20).rev().collect())] {
        let want: Vec<String> = want.iter().map(|i| format!("d{i:02}")).collect();
        assert_eq!(ids(&s, "mks", json!({"sort": [sort], "limit": 1000})).await, want, "{sort}");
        let p = explain(&s, "mks", json!({"sort": [sort], "limit": 1000})).await;
        assert_eq!((p["order"].as_str(), p["scans"][0]["index"].as_str()), (Some("index"), Some("by_t")), "{p}");
        assert_eq!(p["examined_rows"], 20, "each document once, not once per element: {p}");
        assert_eq!(p["returned_rows"], 20, "{p}");
    }
}

/// Found in review: empty filter objects cost a step per candidate document but counted against
/// no limit, so an `$or` tree of millions of `{"$not": {}}` passed every cap.
#[tokio::test]
async fn filter_objects_are_counted_too() {
    let s = TestServer::start().await;
    s.create_table("nodes").await;
    // 64 branches of 16 `{"$not": {}}` each: 1 + 64 * 16 * 2 filter objects, no field condition
    let branch = json!({"$and": vec![json!({"$not": {}}); 16]});
    let wide = json!({"$or": vec![branch; 64]});
    let r = s.send(Method::POST, "/v1/tables/nodes/query", Some(&json!({"filter": wide})), &[]).await;
    assert!(r.is_problem(400, "query_too_complex"), "{}", r.body);
    let small = json!({"$or": vec![json!({"$not": {}}); 64]});
    let (st, page) = s.post("/v1/tables/nodes/query", json!({"filter": small})).await;
    assert_eq!(st, 200, "{page}");
}
