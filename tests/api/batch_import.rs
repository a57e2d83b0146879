//! `POST /v1/batch` (all or nothing) and `POST /v1/tables/{table}/import` (NDJSON).

use crate::common::TestServer;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn batch_is_all_or_nothing() {
    let s = TestServer::start().await;
    s.create_table("b1").await;
    s.create_table("b2").await;
    s.put("/v1/tables/b1/documents/old", json!({"v": 1})).await;
    let ops = json!({"operations": [
        {"op": "put", "table": "b1", "id": "x", "document": {"v": 1}},
        {"op": "patch", "table": "b1", "id": "old", "document": {"v": 2}},
        {"op": "put", "table": "b2", "id": "y", "document": {"v": 3}},
        {"op": "delete", "table": "b1", "id": "x"},
    ]});
    let (status, body) = s.post("/v1/batch", ops).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"].as_array().unwrap().len(), 4);
    assert_eq!(body["results"][0], json!({"op": "put", "table": "b1", "_id": "x", "created": true}));
    assert_eq!(s.get("/v1/tables/b1/documents/x").await.0, 404, "deleted later in the batch");
    assert_eq!(s.get("/v1/tables/b1/documents/old").await.1["v"], 2);
    assert_eq!(s.get("/v1/tables/b2/documents/y").await.1["v"], 3);

    // a failing operation aborts everything and is named
    let ops = json!({"operations": [
        {"op": "put", "table": "b1", "id": "z", "document": {"v": 1}},
        {"op": "delete", "table": "b2", "id": "y"},
        {"op": "delete", "table": "b1", "id": "missing"},
    ]});
    let r = s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    assert_eq!(r.body["operation"], 2);
    assert_eq!(s.get("/v1/tables/b1/documents/z").await.0, 404);
    assert_eq!(s.get("/v1/tables/b2/documents/y").await.0, 200);
    let (_, t) = s.get("/v1/tables/b2").await;
    assert_eq!(t["documents"], 1);

    for (ops, status, code) in [
        (json!({"operations": []}), 400, "invalid_request"),
        (json!({"operations": [{"op": "put", "table": "nope", "id": "a", "document": {}}]}), 404, "table_not_found"),
        (json!({"operations": [{"op": "put", "table": "b1", "id": "a"}]}), 422, "invalid_document"),
        (json!({"operations": [{"op": "put", "table": "b1", "id": "", "document": {}}]}), 400, "invalid_id"),
        (json!({"operations": [{"op": "upsert", "table": "b1", "id": "a"}]}), 422, "invalid_body"),
    ] {
        let r = s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await;
        assert!(r.is_problem(status, code), "{ops}: {}", r.body);
    }
}

#[tokio::test]
async fn import_streams_ndjson_and_reports_bad_lines() {
    let s = TestServer::start().await;
    s.create_table("imp").await;
    let mut body = String::new();
    for i in 0..10_000 {
        match i {
            17 => body.push_str("{not json\n"),
            42 => body.push_str("[1,2]\n"),
            43 => body.push_str("{\"_id\": 5}\n"),
            44 => body.push('\n'),
            _ => body.push_str(&format!("{{\"_id\":\"d{i:05}\",\"i\":{i},\"name\":\"n{i}\"}}\r\n")),
        }
    }
    body.push_str("{\"_id\":\"last\",\"no_newline\":true}");
    let r = s.raw(Method::POST, "/v1/tables/imp/import", "application/x-ndjson", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["inserted"], 9_997);
    assert_eq!(r.body["failed"], 3);
    let lines: Vec<u64> = r.body["failures"].as_array().unwrap().iter().map(|f| f["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [18, 43, 44]);
    assert_eq!(r.body["failures"][0]["code"], "malformed_json");
    assert_eq!(r.body["failures"][1]["code"], "invalid_document", "JSON, but not an object");
    let (_, t) = s.get("/v1/tables/imp").await;
    assert_eq!(t["documents"], 9_997);
    assert_eq!(s.get("/v1/tables/imp/documents/d09999").await.1, json!({"_id": "d09999", "i": 9999, "name": "n9999"}));
    assert_eq!(s.get("/v1/tables/imp/documents/last").await.1["no_newline"], true);

    let r = s.raw(Method::POST, "/v1/tables/imp/import", "application/json", "{}").await;
    assert!(r.is_problem(415, "unsupported_media_type"));
    let r = s.raw(Method::POST, "/v1/tables/none/import", "application/x-ndjson", "{}").await;
    assert!(r.is_problem(404, "table_not_found"));
}

#[tokio::test]
async fn a_malformed_import_line_says_what_json_error_it_has_and_at_which_byte() {
    let s = TestServer::start().await;
    s.create_table("bad_lines").await;
    s.post("/v1/tables", json!({"name": "bad_typed", "columns": [{"name": "n", "type": "int", "nullable": true}]}))
        .await;
    let body = "{\"_id\":\"a\"}\nnot json\n{\"n\": 1,}\n{\"n\": 1\n{\"n\": tru}\r\n{\"n\": 1} x\n";
    let want = [
        (2, "malformed JSON at byte 1 ('o'): expected ident"),
        (3, "malformed JSON at byte 8 ('}'): trailing comma"),
        (4, "malformed JSON at byte 7 (the end of the line): EOF while parsing an object"),
        (5, "malformed JSON at byte 9 ('}'): expected ident"),
        (6, "malformed JSON at byte 9 ('x'): trailing characters"),
    ];
    // the schemaless path (simd-json) and the typed one (serde_json) tell the same
    for table in ["bad_lines", "bad_typed"] {
        let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), "application/x-ndjson", body).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!((r.body["inserted"].as_u64(), r.body["failed"].as_u64()), (Some(1), Some(5)), "{}", r.body);
        let failures = r.body["failures"].as_array().unwrap();
        for (failure, (line, detail)) in failures.iter().zip(want) {
            assert_eq!(failure["line"], line, "{table}: {failure}");
            assert_eq!(failure["code"], "malformed_json", "{table}: {failure}");
            assert_eq!(failure["detail"], detail, "{table}: {failure}");
        }
    }
}

#[tokio::test]
async fn import_into_a_typed_table_checks_each_line() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "timp", "columns": [{"name": "n", "type": "int"}]})).await;
    let body = "{\"_id\":\"a\",\"n\":1}\n{\"_id\":\"b\",\"n\":\"x\"}\n{\"n\":3}\n";
    let r = s.raw(Method::POST, "/v1/tables/timp/import", "application/x-ndjson", body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["inserted"], 2);
    assert_eq!(r.body["failures"][0]["line"], 2);
    assert_eq!(r.body["failures"][0]["code"], "schema_violation");
}

#[tokio::test]
async fn an_import_line_longer_than_the_limit_is_refused() {
    let s = TestServer::start_with(|c| c.limits.max_body_bytes = 1 << 10).await;
    s.create_table("lim").await;
    // the body as a whole may exceed the limit: it streams
    let mut body: String = (0..200).map(|i| format!("{{\"_id\":\"{i}\",\"pad\":\"{}\"}}\n", "p".repeat(20))).collect();
    assert!(body.len() > 1 << 10);
    body.push_str(&format!("{{\"big\":\"{}\"}}\n", "x".repeat(4 << 10)));
    let r = s.raw(Method::POST, "/v1/tables/lim/import", "application/x-ndjson", body).await;
    assert!(r.is_problem(413, "payload_too_large"), "{}", r.body);
    let (_, t) = s.get("/v1/tables/lim").await;
    assert_eq!(t["documents"], 200, "the lines before it were written");
}
