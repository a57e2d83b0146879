//! Queries and index entries under hostile input: bounded work, `_id` filters, bound cursors, and
//! paging whose cost does not grow with the page number.

mod common;
use common::TestServer;
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
    let line = format!("{}\n", wide(256));
    let r = s.raw(Method::POST, "/v1/tables/cap/import", "application/x-ndjson", line).await;
    // (refused as a whole today: entries are computed in the import's commit, not per line)
    let line_failed = r.body["inserted"] == 0 && r.body["failures"][0]["code"] == "too_many_index_entries";
    assert!(line_failed || r.is_problem(422, "too_many_index_entries"), "{}", r.body);
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
    let r = s.send(Method::PUT, "/v1/tables/old/documents/big3", Some(&wide(256)), &[]).await;
    assert!(r.is_problem(422, "too_many_index_entries"), "{}", r.body);
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
