//! `/v1/tables`: create, list, describe, add columns, drop; typed tables validate every write.

use crate::common;
use common::TestServer;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn create_list_get_and_drop() {
    let s = TestServer::start().await;
    let r = s.send(Method::POST, "/v1/tables", Some(&json!({"name": "people"})), &[]).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("/v1/tables/people"));
    assert_eq!(r.body["name"], "people");
    assert_eq!(r.body["kind"], "document");
    assert!(r.body["created_at"].as_i64().unwrap() > 1_700_000_000_000);

    let r = s.send(Method::POST, "/v1/tables", Some(&json!({"name": "people"})), &[]).await;
    assert!(r.is_problem(409, "table_exists"), "{}", r.body);

    s.put("/v1/tables/people/documents/a", json!({"n": 1})).await;
    s.put("/v1/tables/people/documents/b", json!({"n": 2})).await;
    let (status, t) = s.get("/v1/tables/people").await;
    assert_eq!(status, 200);
    assert_eq!(t["documents"], 2);
    let (_, list) = s.get("/v1/tables").await;
    assert_eq!(list["tables"].as_array().unwrap().iter().filter(|t| t["name"] == "people").count(), 1);

    assert_eq!(s.delete("/v1/tables/people").await.0, 204);
    let r = s.send(Method::GET, "/v1/tables/people", None, &[]).await;
    assert!(r.is_problem(404, "table_not_found"));
    let r = s.send(Method::GET, "/v1/tables/people/documents/a", None, &[]).await;
    assert!(r.is_problem(404, "table_not_found"));
    let r = s.send(Method::DELETE, "/v1/tables/people", None, &[]).await;
    assert!(r.is_problem(404, "table_not_found"));

    // a new table of the same name starts empty
    s.create_table("people").await;
    let (_, t) = s.get("/v1/tables/people").await;
    assert_eq!(t["documents"], 0);
    let (status, _) = s.get("/v1/tables/people/documents/a").await;
    assert_eq!(status, 404);
    let (_, page) = s.get("/v1/tables/people/documents").await;
    assert_eq!(page["documents"], json!([]));
}

#[tokio::test]
async fn dropping_a_table_leaves_its_neighbours_alone() {
    let s = TestServer::start().await;
    for t in ["user", "users", "users2"] {
        s.create_table(t).await;
        for i in 0..30 {
            s.put(&format!("/v1/tables/{t}/documents/d{i}"), json!({"t": t})).await;
        }
    }
    assert_eq!(s.delete("/v1/tables/users").await.0, 204);
    for t in ["user", "users2"] {
        let (_, info) = s.get(&format!("/v1/tables/{t}")).await;
        assert_eq!(info["documents"], 30, "{t}");
        let (_, page) = s.get(&format!("/v1/tables/{t}/documents?limit=1000")).await;
        assert_eq!(page["documents"].as_array().unwrap().len(), 30);
    }
}

/// A table drop purged in many small writes, each resuming after the last key removed: it
/// removes every key of the table across keyspaces (documents, index entries, adjacency), none of
/// its neighbours', and the name is free again with an empty table.
#[tokio::test]
async fn a_drop_purged_in_small_chunks_removes_exactly_the_tables_keys() {
    let s = TestServer::start_with(|c| c.options.purge_chunk = 7).await;
    s.create_table("v").await;
    let vertices: Vec<_> = (0..=40).map(|i| json!({"_id": i.to_string()})).collect();
    assert_eq!(s.post("/v1/tables/v/documents", json!(vertices)).await.0, 201);
    for t in ["e", "e2"] {
        let (st, _) = s.post("/v1/tables", json!({"name": t, "kind": "edge"})).await;
        assert_eq!(st, 201);
        s.post(&format!("/v1/tables/{t}/indexes"), json!({"name": "w", "kind": "range", "fields": ["w"]})).await;
        for i in 0..40 {
            let edge = json!({"_from": format!("v/{i}"), "_to": format!("v/{}", i + 1), "w": i});
            assert_eq!(s.put(&format!("/v1/tables/{t}/documents/d{i}"), edge).await.0, 201);
        }
    }
    let (_, before) = s.post("/v1/admin/check", json!({})).await;
    assert_eq!(s.delete("/v1/tables/e").await.0, 204);
    let (_, after) = s.post("/v1/admin/check", json!({})).await;
    assert_eq!(after["ok"], true, "{after}");
    for (what, per_table) in [("documents", 40), ("index_entries", 40), ("graph_entries", 80)] {
        let (b, a) = (before["checked"][what].as_u64().unwrap(), after["checked"][what].as_u64().unwrap());
        assert_eq!(b - a, per_table, "{what}");
    }
    assert_eq!(s.get("/v1/tables/e2").await.1["documents"], 40);
    s.create_table("e").await;
    assert_eq!(s.get("/v1/tables/e").await.1["documents"], 0);
    let (_, page) = s.get("/v1/tables/e/documents").await;
    assert_eq!(page["documents"], json!([]));
    s.check_ok().await;
}

#[tokio::test]
async fn invalid_names_and_bodies() {
    let s = TestServer::start().await;
    for name in ["", "a/b", "tab\u{0}le", &"x".repeat(257)] {
        let r = s.send(Method::POST, "/v1/tables", Some(&json!({"name": name})), &[]).await;
        assert!(r.is_problem(400, "invalid_table_name"), "{name:?}: {}", r.body);
    }
    let r = s.send(Method::POST, "/v1/tables", Some(&json!({"name": "t", "kind": "graph"})), &[]).await;
    assert!(r.is_problem(422, "invalid_body"), "{}", r.body);
    let r = s
        .send(Method::POST, "/v1/tables", Some(&json!({"name": "t", "columns": [{"name": "a", "type": "text"}]})), &[])
        .await;
    assert!(r.is_problem(422, "invalid_body"), "{}", r.body);
    let r = s.raw(Method::POST, "/v1/tables", "text/plain", r#"{"name":"t"}"#).await;
    assert!(r.is_problem(415, "unsupported_media_type"), "{}", r.body);
    let r = s.raw(Method::POST, "/v1/tables", "application/json", r#"{"name":"#).await;
    assert!(r.is_problem(400, "malformed_json"), "{}", r.body);
    let dup = json!({"name": "t", "columns": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]});
    let r = s.send(Method::POST, "/v1/tables", Some(&dup), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    // unicode names work, percent-encoded in paths
    s.create_table("ünï cödé:🦀").await;
    let (status, t) = s.get(&format!("/v1/tables/{}", common::seg("ünï cödé:🦀"))).await;
    assert_eq!(status, 200);
    assert_eq!(t["name"], "ünï cödé:🦀");
}

#[tokio::test]
async fn typed_tables_validate_every_write() {
    let s = TestServer::start().await;
    let def = json!({"name": "rows", "columns": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int", "nullable": true},
        {"name": "active", "type": "bool", "default": true},
        {"name": "at", "type": "timestamp", "nullable": true},
        {"name": "emb", "type": "vector(3)", "nullable": true}
    ]});
    assert_eq!(s.post("/v1/tables", def).await.0, 201);

    let (status, _) = s
        .put(
            "/v1/tables/rows/documents/1",
            json!({"name": "Ada", "at": "2024-01-02T03:04:05Z", "emb": [0.1, 0.2, 0.3]}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, doc) = s.get("/v1/tables/rows/documents/1").await;
    assert_eq!(
        doc,
        json!({"_id": "1", "name": "Ada", "active": true, "at": 1_704_164_645_000i64, "emb": [0.1, 0.2, 0.3]})
    );

    let bad = [
        (json!({"age": 3}), "name"),
        (json!({"name": 5}), "name"),
        (json!({"name": "x", "age": "old"}), "age"),
        (json!({"name": "x", "unknown": 1}), "unknown"),
        (json!({"name": "x", "emb": [1, 2]}), "emb"),
        (json!({"name": "x", "at": "noon"}), "at"),
        (json!({"name": "x", "active": null}), "active"),
    ];
    for (doc, field) in bad {
        let r = s.send(Method::PUT, "/v1/tables/rows/documents/2", Some(&doc), &[]).await;
        assert!(r.is_problem(422, "schema_violation"), "{doc}: {}", r.body);
        assert!(r.body["detail"].as_str().unwrap().contains(&format!("\"{field}\"")), "{}", r.body);
    }
    let (status, _) = s.get("/v1/tables/rows/documents/2").await;
    assert_eq!(status, 404, "a rejected write writes nothing");

    // patches are checked too
    let r = s.send(Method::PATCH, "/v1/tables/rows/documents/1", Some(&json!({"name": null})), &[]).await;
    assert!(r.is_problem(422, "schema_violation"), "{}", r.body);

    // adding columns
    let (status, t) = s
        .patch("/v1/tables/rows", json!({"add_columns": [{"name": "city", "type": "string", "default": "Oslo"}]}))
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["columns"].as_array().unwrap().len(), 6);
    let (status, _) = s.put("/v1/tables/rows/documents/3", json!({"name": "Bo"})).await;
    assert_eq!(status, 201);
    let (_, doc) = s.get("/v1/tables/rows/documents/3").await;
    assert_eq!(doc["city"], "Oslo");
    let r = s
        .send(Method::PATCH, "/v1/tables/rows", Some(&json!({"add_columns": [{"name": "req", "type": "int"}]})), &[])
        .await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    s.create_table("free").await;
    let r = s
        .send(
            Method::PATCH,
            "/v1/tables/free",
            Some(&json!({"add_columns": [{"name": "a", "type": "int", "nullable": true}]})),
            &[],
        )
        .await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
}

#[tokio::test]
async fn edge_tables_need_endpoints() {
    let s = TestServer::start().await;
    assert_eq!(s.post("/v1/tables", json!({"name": "knows", "kind": "edge"})).await.0, 201);
    s.create_table("users").await;
    assert_eq!(s.post("/v1/tables/users/documents", json!([{"_id": "a"}, {"_id": "b"}, {"_id": "c"}])).await.0, 201);
    let (status, _) =
        s.put("/v1/tables/knows/documents/e1", json!({"_from": "users/a", "_to": "users/b", "since": 2020})).await;
    assert_eq!(status, 201);
    let r = s.send(Method::PUT, "/v1/tables/knows/documents/e2", Some(&json!({"_from": "users/a"})), &[]).await;
    assert!(r.is_problem(422, "schema_violation"), "{}", r.body);
    // the adjacency entries are written with the edge, and go with it
    let data = s.stop().await;
    let mut out = Vec::new();
    mosaicdb::tools::inspect(crate::common::storage_config(data.path()), "graph:", &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("graph:out:knows:\"users/a\":e1  users/b"), "{text}");
    assert!(text.contains("graph:in:knows:\"users/b\":e1  users/a"), "{text}");

    let s = TestServer::start_in(data, |_| {}).await;
    assert_eq!(s.put("/v1/tables/knows/documents/e1", json!({"_from": "users/a", "_to": "users/c"})).await.0, 200);
    assert_eq!(s.delete("/v1/tables/knows/documents/e1").await.0, 204);
    let data = s.stop().await;
    let mut out = Vec::new();
    mosaicdb::tools::inspect(crate::common::storage_config(data.path()), "graph:", &mut out).unwrap();
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
}

/// A table dropped and created again at once is a new table: its `created_at` (its identity) is
/// new even within one millisecond, and a cursor of the old table is refused.
#[tokio::test]
async fn a_table_created_again_at_once_is_a_new_table() {
    let s = TestServer::start().await;
    let mut seen = std::collections::BTreeSet::new();
    let mut old_cursor: Option<String> = None;
    for _ in 0..30 {
        let (st, def) = s.post("/v1/tables", json!({"name": "again"})).await;
        assert_eq!(st, 201, "{def}");
        let created_at = def["created_at"].as_i64().unwrap();
        assert!(seen.insert(created_at), "created_at {created_at} given twice");
        assert_eq!(s.post("/v1/tables/again/documents", json!([{"_id": "a"}, {"_id": "b"}])).await.0, 201);
        if let Some(c) = old_cursor.take() {
            let r = s.send(Method::GET, &format!("/v1/tables/again/documents?limit=1&cursor={c}"), None, &[]).await;
            assert!(r.is_problem(400, "invalid_cursor"), "{}", r.body);
        }
        let (_, page) = s.get("/v1/tables/again/documents?limit=1").await;
        old_cursor = Some(page["cursor"].as_str().unwrap().to_owned());
        assert_eq!(s.delete("/v1/tables/again").await.0, 204);
    }
}
