//! `POST /v1/tables/{table}/import` with `Content-Type: text/csv`: a header row, then a document
//! per row, typed by the table's columns or inferred; bad rows reported like NDJSON lines.

use crate::common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

const CSV: &str = "text/csv";

async fn import(
    s: &TestServer,
    table: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> crate::common::Reply {
    s.raw(Method::POST, &format!("/v1/tables/{table}/import"), content_type, body).await
}

/// (line, code, detail) of each failure of a report.
fn failures(report: &Value) -> Vec<(u64, String, String)> {
    report["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["code"].as_str().unwrap().to_owned(),
                f["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn rows_of_a_schemaless_table_are_inferred_conservatively() {
    let s = TestServer::start().await;
    s.create_table("csv_free").await;
    let body = "_id,name,age,score,active,zip,note\r\n\
        a,Ann,30,1.5,true,007,\r\n\
        b,\"Bo, Jr.\",,-2e0,false,12345,\"line one\nline \"\"two\"\"\"\r\n\
        \r\n\
        ,Cy,x,1e400,TRUE, 5,null\r\n\
        d,Di\r\n";
    let r = import(&s, "csv_free", CSV, body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!((r.body["inserted"].as_u64(), r.body["failed"].as_u64()), (Some(3), Some(1)), "{}", r.body);
    // the failing row is named by the line it starts on, like an NDJSON line
    assert_eq!(
        failures(&r.body),
        [(7, "invalid_document".to_owned(), "invalid document: the row has 2 field(s), the header 7".to_owned())]
    );
    let docs = s.all_documents("csv_free").await;
    assert_eq!(docs["a"], json!({"_id": "a", "name": "Ann", "age": 30, "score": 1.5, "active": true, "zip": "007"}));
    assert_eq!(
        docs["b"],
        json!({"_id": "b", "name": "Bo, Jr.", "score": -2.0, "active": false, "zip": 12345, "note": "line one\nline \"two\""})
    );
    // no _id: one is generated; what is not exactly a number or a boolean stays the text
    let cy = docs.values().find(|d| d["name"] == "Cy").unwrap();
    assert_eq!(cy["age"], "x");
    assert_eq!(
        (&cy["score"], &cy["active"], &cy["zip"], &cy["note"]),
        (&json!("1e400"), &json!("TRUE"), &json!(" 5"), &json!("null"))
    );
    assert_eq!(cy["_id"].as_str().unwrap().len(), 36, "a UUIDv7");
    s.check_ok().await;
}

#[tokio::test]
async fn rows_of_a_typed_table_are_typed_by_its_columns() {
    let s = TestServer::start().await;
    let columns = json!([
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int", "nullable": true},
        {"name": "born", "type": "timestamp", "nullable": true},
        {"name": "vip", "type": "bool", "default": false},
        {"name": "tags", "type": "json", "nullable": true},
        {"name": "zip", "type": "string", "nullable": true},
        {"name": "emb", "type": "vector(2)", "nullable": true},
    ]);
    let (status, body) = s.post("/v1/tables", json!({"name": "csv_typed", "columns": columns})).await;
    assert_eq!(status, 201, "{body}");
    let body = "_id,name,age,born,vip,tags,zip,emb\n\
        p1,Ann,30,2025-01-02T03:04:05Z,True,\"[\"\"x\"\"]\",007,\"[0.5, 1]\"\n\
        p2,Bo,thirty,,,,,\n\
        p3,Cy,,1735700000000,,not json,12345,\n\
        p4,Di,,,maybe,,,\n\
        p5,Ed,,,,\"{\"\"a\"\":1,\"\"a\"\":2}\",,\n";
    let r = import(&s, "csv_typed", "text/csv; charset=utf-8", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["inserted"], 2, "{}", r.body);
    let failed: Vec<(u64, String)> = failures(&r.body).into_iter().map(|(line, code, _)| (line, code)).collect();
    assert_eq!(
        failed,
        [(3, "schema_violation".to_owned()), (5, "schema_violation".to_owned()), (6, "duplicate_key".to_owned())]
    );
    assert!(failures(&r.body)[0].2.contains("age"), "the detail names the column: {}", r.body);
    let (_, p1) = s.get("/v1/tables/csv_typed/documents/p1").await;
    assert_eq!(
        p1,
        json!({"_id": "p1", "name": "Ann", "age": 30, "born": 1735787045000_i64, "vip": true, "tags": ["x"], "zip": "007",
            "emb": [0.5, 1.0]})
    );
    // a string column keeps digits as text; a json column keeps text that is not JSON; defaults apply
    let (_, p3) = s.get("/v1/tables/csv_typed/documents/p3").await;
    assert_eq!(
        p3,
        json!({"_id": "p3", "name": "Cy", "born": 1735700000000_i64, "vip": false, "tags": "not json", "zip": "12345"})
    );
    // a column the table does not have: the row fails by the schema
    let r = import(&s, "csv_typed", CSV, "_id,name,extra\nq1,Q,1\n").await;
    assert_eq!(failures(&r.body).first().map(|f| f.1.as_str()), Some("schema_violation"), "{}", r.body);
    s.check_ok().await;
}

#[tokio::test]
async fn a_header_that_cannot_name_fields_refuses_the_import() {
    let s = TestServer::start().await;
    s.create_table("csv_head").await;
    for (body, says) in
        [("a,,b\n1,2,3\n", "the header row's field 2 is empty"), ("a,b,a\n1,2,3\n", "the header row names \"a\" twice")]
    {
        let r = import(&s, "csv_head", CSV, body).await;
        assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
        assert!(r.body["detail"].as_str().unwrap().contains(says), "{}", r.body);
    }
    assert_eq!(s.get("/v1/tables/csv_head").await.1["documents"], 0);
    // a header alone, or nothing: nothing to write
    for body in ["a,b\n", ""] {
        let r = import(&s, "csv_head", CSV, body).await;
        assert_eq!((r.status.as_u16(), &r.body["inserted"]), (200, &json!(0)), "{}", r.body);
    }
    for content_type in ["text/csv; charset=latin1", "text/plain", "application/csv"] {
        let r = import(&s, "csv_head", content_type, "a\n1\n").await;
        assert!(r.is_problem(415, "unsupported_media_type"), "{content_type}: {}", r.body);
    }
}

#[tokio::test]
async fn a_csv_import_streams_in_chunks_and_stops_at_a_row_over_the_limit() {
    let s = TestServer::start_with(|c| c.limits.max_body_bytes = 1 << 10).await;
    s.create_table("csv_big").await;
    // more rows than one chunk holds, a quoted field across lines among them
    let mut body = "_id,i,text\n".to_owned();
    for i in 0..10_000 {
        body.push_str(&format!("r{i:05},{i},\"row {i}\"\n"));
    }
    body.push_str("multi,-1,\"a\nb\"");
    let r = import(&s, "csv_big", CSV, body).await;
    assert_eq!(
        (r.status.as_u16(), &r.body["inserted"], &r.body["failed"]),
        (200, &json!(10_001), &json!(0)),
        "{}",
        r.body
    );
    assert_eq!(
        s.get("/v1/tables/csv_big/documents/r09999").await.1,
        json!({"_id": "r09999", "i": 9999, "text": "row 9999"})
    );
    assert_eq!(s.get("/v1/tables/csv_big/documents/multi").await.1["text"], "a\nb");

    // a row longer than the body limit ends the import; the rows before it are written
    s.create_table("csv_long").await;
    let mut body = "_id,pad\n".to_owned();
    for i in 0..50 {
        body.push_str(&format!("k{i},{}\n", "p".repeat(20)));
    }
    body.push_str(&format!("big,\"{}\"\n", "x".repeat(4 << 10)));
    let r = import(&s, "csv_long", CSV, body).await;
    assert!(r.is_problem(413, "payload_too_large"), "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("line 52"), "{}", r.body);
    assert_eq!(s.get("/v1/tables/csv_long").await.1["documents"], 50);
}

#[tokio::test]
async fn edges_import_from_csv() {
    let s = TestServer::start().await;
    s.create_table("csv_people").await;
    for id in ["ann", "bo"] {
        s.put(&format!("/v1/tables/csv_people/documents/{id}"), json!({})).await;
    }
    let (status, body) = s.post("/v1/tables", json!({"name": "csv_knows", "kind": "edge"})).await;
    assert_eq!(status, 201, "{body}");
    let body = "_id,_from,_to,since\ne1,csv_people/ann,csv_people/bo,2020\ne2,csv_people/ann,csv_people/nobody,2021\n";
    let r = import(&s, "csv_knows", CSV, body).await;
    assert_eq!((r.body["inserted"].as_u64(), r.body["failed"].as_u64()), (Some(1), Some(1)), "{}", r.body);
    assert_eq!(failures(&r.body)[0].1, "invalid_document", "{}", r.body);
    let (_, n) = s.get("/v1/graph/neighbors?vertex=csv_people/ann&direction=out").await;
    assert_eq!(n["neighbors"], json!([{"vertex": "csv_people/bo", "edge": "csv_knows/e1", "direction": "out"}]));
    assert_eq!(s.get("/v1/tables/csv_knows/documents/e1").await.1["since"], 2020);
}
