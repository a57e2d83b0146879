//! `/v1/tables/{table}/indexes`: definitions, uniqueness, backfill, drop; concurrent writers.

mod common;
use common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn index_definitions_and_errors() {
    let s = TestServer::start().await;
    s.create_table("ix").await;
    let r = s
        .send(
            Method::POST,
            "/v1/tables/ix/indexes",
            Some(&json!({"name": "by_a", "kind": "range", "fields": ["a"]})),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "an empty table's index is ready at once: {}", r.body);
    assert_eq!(r.body["state"], "ready");
    assert_eq!(r.header("location"), Some("/v1/tables/ix/indexes/by_a"));
    let cases = [
        (json!({"name": "by_a", "kind": "hash", "fields": ["a"]}), 409, "index_exists"),
        (json!({"name": "x", "kind": "range", "fields": ["a", "b"]}), 400, "invalid_request"),
        (json!({"name": "x", "kind": "hash", "fields": []}), 400, "invalid_request"),
        (json!({"name": "x", "kind": "hash", "fields": ["a..b"]}), 400, "invalid_request"),
        (json!({"name": "", "kind": "hash", "fields": ["a"]}), 400, "invalid_request"),
        (json!({"name": "x", "kind": "fulltext", "fields": ["a"]}), 422, "unsupported_index_kind"),
        (json!({"name": "x", "kind": "btree", "fields": ["a"]}), 422, "invalid_body"),
    ];
    for (body, status, code) in cases {
        let r = s.send(Method::POST, "/v1/tables/ix/indexes", Some(&body), &[]).await;
        assert!(r.is_problem(status, code), "{body}: {}", r.body);
    }
    let r = s
        .send(
            Method::POST,
            "/v1/tables/nope/indexes",
            Some(&json!({"name": "x", "kind": "hash", "fields": ["a"]})),
            &[],
        )
        .await;
    assert!(r.is_problem(404, "table_not_found"));
    let r = s.send(Method::GET, "/v1/tables/ix/indexes/nope", None, &[]).await;
    assert!(r.is_problem(404, "index_not_found"));
    let (_, list) = s.get("/v1/tables/ix/indexes").await;
    assert_eq!(list["indexes"].as_array().unwrap().len(), 1);
    assert_eq!(s.delete("/v1/tables/ix/indexes/by_a").await.0, 204);
    let r = s.send(Method::DELETE, "/v1/tables/ix/indexes/by_a", None, &[]).await;
    assert!(r.is_problem(404, "index_not_found"));
}

#[tokio::test]
async fn unique_indexes_refuse_duplicates_and_write_nothing() {
    let s = TestServer::start().await;
    s.create_table("uq").await;
    s.post("/v1/tables/uq/indexes", json!({"name": "by_email", "kind": "unique", "fields": ["email"]})).await;
    assert_eq!(s.put("/v1/tables/uq/documents/a", json!({"email": "a@x"})).await.0, 201);
    let r = s.send(Method::PUT, "/v1/tables/uq/documents/b", Some(&json!({"email": "a@x", "n": 1})), &[]).await;
    assert!(r.is_problem(409, "unique_violation"), "{}", r.body);
    assert_eq!(s.get("/v1/tables/uq/documents/b").await.0, 404, "nothing was written");
    // the owner may rewrite its own value; nulls and missing fields never collide
    assert_eq!(s.put("/v1/tables/uq/documents/a", json!({"email": "a@x", "v": 2})).await.0, 200);
    assert_eq!(s.put("/v1/tables/uq/documents/c", json!({"email": null})).await.0, 201);
    assert_eq!(s.put("/v1/tables/uq/documents/d", json!({})).await.0, 201);
    assert_eq!(s.put("/v1/tables/uq/documents/e", json!({})).await.0, 201);
    // a batch that would duplicate within itself fails whole
    let ops = json!({"operations": [
        {"op": "put", "table": "uq", "id": "f", "document": {"email": "f@x"}},
        {"op": "put", "table": "uq", "id": "g", "document": {"email": "f@x"}},
    ]});
    let r = s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await;
    assert!(r.is_problem(409, "unique_violation"), "{}", r.body);
    assert_eq!(r.body["operation"], 1);
    assert_eq!(s.get("/v1/tables/uq/documents/f").await.0, 404);
    // after a delete the value is free again
    assert_eq!(s.delete("/v1/tables/uq/documents/a").await.0, 204);
    assert_eq!(s.put("/v1/tables/uq/documents/b", json!({"email": "a@x"})).await.0, 201);
    let (_, page) = s.post("/v1/tables/uq/query", json!({"filter": {"email": "a@x"}})).await;
    assert_eq!(page["documents"], json!([{"_id": "b", "email": "a@x"}]));
    s.check_ok().await;
}

#[tokio::test]
async fn backfill_builds_indexes_over_existing_documents() {
    let s = TestServer::start().await;
    s.create_table("bf").await;
    let body: String = (0..5000).map(|i| format!("{{\"_id\":\"{i:05}\",\"g\":{},\"k\":\"k{i}\"}}\n", i % 10)).collect();
    assert_eq!(s.raw(Method::POST, "/v1/tables/bf/import", "application/x-ndjson", body).await.body["inserted"], 5000);
    let r = s
        .send(
            Method::POST,
            "/v1/tables/bf/indexes",
            Some(&json!({"name": "by_g", "kind": "hash", "fields": ["g"]})),
            &[],
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.body["state"], "building");
    assert_eq!(r.body["total"], 5000);
    let def = s.index_settled("bf", "by_g").await;
    assert_eq!(def["state"], "ready");
    let (_, p) = s.post("/v1/tables/bf/query", json!({"filter": {"g": 3}, "explain": true, "limit": 1000})).await;
    assert_eq!(p["plan"]["scans"][0]["index"], "by_g");
    assert_eq!(p["plan"]["returned_rows"], 500);
    // a unique index over duplicates fails its build and is not used
    s.post("/v1/tables/bf/indexes", json!({"name": "u_g", "kind": "unique", "fields": ["g"]})).await;
    let def = s.index_settled("bf", "u_g").await;
    assert_eq!(def["state"], "failed", "{def}");
    assert!(def["error"].as_str().unwrap().contains("unique"), "{def}");
    // a unique index over distinct values builds
    s.post("/v1/tables/bf/indexes", json!({"name": "u_k", "kind": "unique", "fields": ["k"]})).await;
    assert_eq!(s.index_settled("bf", "u_k").await["state"], "ready");
    s.check_ok().await;
    // dropping removes the entries; a same-named index can be created again
    assert_eq!(s.delete("/v1/tables/bf/indexes/by_g").await.0, 204);
    let (_, p) = s.post("/v1/tables/bf/query", json!({"filter": {"g": 3}, "explain": true})).await;
    assert_eq!(p["plan"]["strategy"], "full_scan");
    let (st, _) = s.post("/v1/tables/bf/indexes", json!({"name": "by_g", "kind": "range", "fields": ["g"]})).await;
    assert_eq!(st, 202);
    assert_eq!(s.index_settled("bf", "by_g").await["state"], "ready");
    s.check_ok().await;
}

#[tokio::test]
async fn building_indexes_resume_after_a_restart() {
    let s = TestServer::start().await;
    s.create_table("rs").await;
    let body: String = (0..3000).map(|i| format!("{{\"_id\":\"{i:05}\",\"g\":{}}}\n", i % 7)).collect();
    s.raw(Method::POST, "/v1/tables/rs/import", "application/x-ndjson", body).await;
    s.post("/v1/tables/rs/indexes", json!({"name": "by_g", "kind": "range", "fields": ["g"]})).await;
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, |_| {}).await;
    assert_eq!(s.index_settled("rs", "by_g").await["state"], "ready");
    let (_, p) = s.post("/v1/tables/rs/query", json!({"filter": {"g": {"$gte": 5}}, "limit": 1000})).await;
    assert_eq!(p["documents"].as_array().unwrap().len(), 856);
    s.check_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_leave_no_stale_or_missing_entry() {
    let s = std::sync::Arc::new(TestServer::start().await);
    s.create_table("cw").await;
    for (name, kind, field) in [("h", "hash", "v"), ("r", "range", "v"), ("t", "range", "tags"), ("u", "unique", "own")]
    {
        s.post("/v1/tables/cw/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
    }
    let tasks: Vec<_> = (0..8u64)
        .map(|w| {
            let s = s.clone();
            tokio::spawn(async move {
                for i in 0..60u64 {
                    let id = format!("doc{}", (w * 7 + i) % 10);
                    let path = format!("/v1/tables/cw/documents/{id}");
                    let doc =
                        json!({"v": (w * 100 + i) % 13, "tags": [i % 3, w % 4], "own": format!("o{}", (w + i) % 12)});
                    let status = match i % 5 {
                        0 => s.delete(&path).await.0,
                        1 => s.patch(&path, json!({"v": -(i as i64), "tags": null})).await.0,
                        _ => s.put(&path, doc).await.0,
                    };
                    assert!([200, 201, 204, 404, 409].contains(&status.as_u16()), "{status}");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    s.check_ok().await;
}

#[tokio::test]
async fn spatial_queries_filter_by_exact_distance() {
    let s = TestServer::start().await;
    s.create_table("geo").await;
    let (st, _) = s.post("/v1/tables/geo/indexes", json!({"name": "loc", "kind": "spatial", "fields": ["loc"]})).await;
    assert_eq!(st, 201);
    let places = [
        ("oslo", 59.9139, 10.7522),
        ("bergen", 60.3913, 5.3221),
        ("drammen", 59.7439, 10.2045),
        ("stockholm", 59.3293, 18.0686),
        ("fiji", -17.7134, 178.0650),
        ("samoa", -13.7590, -172.1046),
    ];
    for (id, lat, lon) in places {
        let doc = if id == "bergen" { json!({"loc": [lon, lat]}) } else { json!({"loc": {"lat": lat, "lon": lon}}) };
        s.put(&format!("/v1/tables/geo/documents/{id}"), doc).await;
    }
    s.put("/v1/tables/geo/documents/nowhere", json!({"loc": "not a point"})).await;
    let near = |lat: f64, lon: f64, meters: f64| json!({"filter": {"loc": {"$near": {"lat": lat, "lon": lon, "meters": meters}}}});
    let ids = |v: &Value| -> Vec<String> {
        v["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()).collect()
    };
    let (_, p) = s.post("/v1/tables/geo/query", near(59.9139, 10.7522, 50_000.0)).await;
    assert_eq!(ids(&p), ["drammen", "oslo"]);
    let (_, p) = s.post("/v1/tables/geo/query", near(59.9139, 10.7522, 350_000.0)).await;
    assert_eq!(ids(&p), ["bergen", "drammen", "oslo"]);
    let (_, p) = s.post("/v1/tables/geo/query", near(59.9139, 10.7522, 420_000.0)).await;
    assert_eq!(ids(&p), ["bergen", "drammen", "oslo", "stockholm"]);
    // across the antimeridian: Fiji and Samoa are ~1150 km apart
    let (_, p) = s.post("/v1/tables/geo/query", near(-17.7134, 178.0650, 1_300_000.0)).await;
    assert_eq!(ids(&p), ["fiji", "samoa"]);
    let mut q = near(59.9139, 10.7522, 50_000.0);
    q["explain"] = json!(true);
    let (_, p) = s.post("/v1/tables/geo/query", q).await;
    assert_eq!(
        (p["plan"]["strategy"].as_str(), p["plan"]["scans"][0]["kind"].as_str()),
        (Some("index_scan"), Some("spatial"))
    );
    let (_, p) = s
        .post(
            "/v1/tables/geo/query",
            json!({"filter": {"loc": {"$box": {"min_lat": 59, "min_lon": 5, "max_lat": 61, "max_lon": 11}}}}),
        )
        .await;
    assert_eq!(ids(&p), ["bergen", "drammen", "oslo"]);
    s.check_ok().await;
}

#[tokio::test]
async fn query_errors_and_projection() {
    let s = TestServer::start().await;
    s.create_table("qe").await;
    s.put("/v1/tables/qe/documents/a", json!({"x": 1, "n": {"y": 2, "z": 3}, "w": 4})).await;
    let (_, p) = s.post("/v1/tables/qe/query", json!({"fields": ["n.y", "w", "missing"]})).await;
    assert_eq!(p["documents"], json!([{"_id": "a", "n": {"y": 2}, "w": 4}]));
    for (body, code) in [
        (json!({"filter": {"x": {"$gt": [1]}}}), "invalid_filter"),
        (json!({"filter": {"$nope": 1}}), "invalid_filter"),
        (json!({"sort": ["-"]}), "invalid_filter"),
        (json!({"limit": 0}), "invalid_request"),
        (json!({"cursor": "@@"}), "invalid_cursor"),
        (json!({"fields": [""]}), "invalid_request"),
    ] {
        let r = s.send(Method::POST, "/v1/tables/qe/query", Some(&body), &[]).await;
        assert!(r.is_problem(400, code), "{body}: {}", r.body);
    }
    let r = s.send(Method::POST, "/v1/tables/qe/query", Some(&json!({"bogus": 1})), &[]).await;
    assert!(r.is_problem(422, "invalid_body"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/tables/none/query", Some(&json!({})), &[]).await;
    assert!(r.is_problem(404, "table_not_found"));
}
