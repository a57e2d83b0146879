//! TTL over HTTP: documents past their `_expires_at` (or a ttl index's expiry) are invisible to
//! every read before any sweep, writes treat them as gone, `sweep_expired` removes them with all
//! their entries, and `check` agrees with the expiry entries throughout.

use crate::common::TestServer;
use mosaicdb::service::{Db, DbOptions};
use mosaicdb::storage::Durability;
use serde_json::{Value, json};

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

async fn put(s: &TestServer, table: &str, id: &str, doc: Value) {
    let (st, body) = s.put(&format!("/v1/tables/{table}/documents/{id}"), doc).await;
    assert!(st == 201 || st == 200, "{table}/{id}: {body}");
}

async fn ids(s: &TestServer, table: &str) -> Vec<String> {
    let (st, page) = s.get(&format!("/v1/tables/{table}/documents?limit=100")).await;
    assert_eq!(st, 200, "{page}");
    page["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()).collect()
}

fn hit_ids(v: &Value, list: &str, field: &str) -> Vec<String> {
    let mut out: Vec<String> =
        v[list].as_array().unwrap().iter().map(|d| d[field].as_str().unwrap().to_owned()).collect();
    out.sort();
    out
}

/// Sweeps in-process on the stopped server's directory, and starts the server again.
async fn sweep_offline(s: TestServer) -> (TestServer, mosaicdb::service::SweepOutcome) {
    let dir = s.stop().await;
    let mut cfg = crate::common::storage_config(dir.path());
    cfg.durability = Durability::Buffered;
    let db = Db::open(cfg, DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    let outcome = db.pipeline.sweep_expired(now_ms(), 10_000).await.unwrap();
    db.core.close().unwrap();
    drop(db);
    (TestServer::start_in(dir, |_| {}).await, outcome)
}

#[tokio::test]
async fn expired_documents_are_invisible_then_swept() {
    let s = TestServer::start().await;
    s.create_table("people").await;
    let (st, body) =
        s.post("/v1/tables", json!({"name": "knows", "kind": "edge", "on_vertex_delete": "cascade"})).await;
    assert_eq!(st, 201, "{body}");
    for (name, kind, field) in [("ft", "fulltext", "bio"), ("by_city", "hash", "city")] {
        let (st, body) =
            s.post("/v1/tables/people/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
        assert_eq!(st, 201, "{body}");
    }
    let later = now_ms() + 3_600_000;
    for id in ["alice", "bob", "carol", "dave", "erin"] {
        put(&s, "people", id, json!({"city": "oslo", "bio": format!("{id} writes rust"), "_expires_at": later})).await;
    }
    put(&s, "knows", "k1", json!({"_from": "people/alice", "_to": "people/carol"})).await;
    put(&s, "knows", "k2", json!({"_from": "people/carol", "_to": "people/dave"})).await;
    put(&s, "knows", "k3", json!({"_from": "people/alice", "_to": "people/bob", "_expires_at": 0})).await;
    put(&s, "knows", "k4", json!({"_from": "people/alice", "_to": "people/erin"})).await;
    // carol's expiry moves into the past (RFC 3339); the stored field is returned as written
    let (st, body) = s.patch("/v1/tables/people/documents/carol", json!({"_expires_at": "2000-01-01T00:00:00Z"})).await;
    assert_eq!(st, 200, "{body}");
    let (st, bob) = s.get("/v1/tables/people/documents/bob").await;
    assert_eq!((st.as_u16(), &bob["_expires_at"]), (200, &json!(later)));
    s.check_ok().await;

    // every read treats carol and edge k3 as absent
    let r = s.send(reqwest::Method::GET, "/v1/tables/people/documents/carol", None, &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    assert_eq!(ids(&s, "people").await, ["alice", "bob", "dave", "erin"]);
    assert_eq!(ids(&s, "knows").await, ["k1", "k2", "k4"]);
    let (st, q) = s.post("/v1/tables/people/query", json!({"filter": {"city": "oslo"}})).await;
    assert_eq!(st, 200, "{q}");
    assert_eq!(hit_ids(&q, "documents", "_id"), ["alice", "bob", "dave", "erin"]);
    let (_, q) = s.post("/v1/tables/people/query", json!({"filter": {"city": "oslo"}, "explain": true})).await;
    assert_eq!(q["plan"]["matched_rows"], 4, "{q}");
    let (st, found) = s.post("/v1/tables/people/search", json!({"query": "rust"})).await;
    assert_eq!(st, 200, "{found}");
    assert_eq!(
        (hit_ids(&found, "hits", "_id").len(), &found["total"]),
        (4, &json!({"value": 4, "relation": "eq"})),
        "{found}"
    );
    let (st, found) = s.post("/v1/tables/people/search", json!({"query": "carol"})).await;
    assert_eq!((st.as_u16(), &found["total"]), (200, &json!({"value": 0, "relation": "eq"})), "{found}");
    let (st, walk) = s.post("/v1/graph/traverse", json!({"start": "people/alice", "max_depth": 3})).await;
    assert_eq!(st, 200, "{walk}");
    assert_eq!(hit_ids(&walk, "vertices", "_id"), ["people/erin"], "not bob (expired edge), not carol or dave");
    let (_, n) = s.get("/v1/graph/neighbors?vertex=people/alice&direction=any").await;
    assert_eq!(hit_ids(&n, "neighbors", "edge"), ["knows/k4"], "{n}");
    let r = s
        .send(
            reqwest::Method::POST,
            "/v1/graph/shortest-path",
            Some(&json!({"from": "people/alice", "to": "people/dave"})),
            &[],
        )
        .await;
    assert!(r.is_problem(404, "no_path"), "{}", r.body);
    let r = s.send(reqwest::Method::POST, "/v1/graph/traverse", Some(&json!({"start": "people/carol"})), &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    // an edge may not name an expired vertex
    let r = s
        .send(
            reqwest::Method::PUT,
            "/v1/tables/knows/documents/k9",
            Some(&json!({"_from": "people/carol", "_to": "people/bob"})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "invalid_document"), "{}", r.body);

    // the sweep removes carol (and k1, k2 by cascade) and k3, with every entry; check agrees
    let (s, outcome) = sweep_offline(s).await;
    assert_eq!((outcome.removed, outcome.skipped), (2, 0), "{outcome:?}");
    s.check_ok().await;
    assert_eq!(ids(&s, "knows").await, ["k4"]);
    let (_, info) = s.get("/v1/info").await;
    assert!(info.to_string().contains("ttlidx"), "{info}");
    let (_, t) = s.get("/v1/tables/people").await;
    assert_eq!(t["count"].as_u64().or(t["documents"].as_u64()), Some(4), "{t}");
    // PUT creates it again
    let (st, _) = s.put("/v1/tables/people/documents/carol", json!({"city": "oslo"})).await;
    assert_eq!(st, 201);
    s.check_ok().await;
}

#[tokio::test]
async fn a_ttl_index_backfills_and_writes_treat_expired_documents_as_gone() {
    let s = TestServer::start().await;
    s.create_table("sessions").await;
    put(&s, "sessions", "old", json!({"created_at": "2000-01-01T00:00:00Z"})).await;
    put(&s, "sessions", "new", json!({"created_at": now_ms()})).await;
    put(&s, "sessions", "none", json!({"user": "x"})).await;
    let (st, def) = s
        .post(
            "/v1/tables/sessions/indexes",
            json!({"name": "expiry", "kind": "ttl", "fields": ["created_at"], "options": {"expire_after": "1h"}}),
        )
        .await;
    assert!(st == 201 || st == 202, "{def}");
    let def = s.index_settled("sessions", "expiry").await;
    assert_eq!((&def["state"], &def["options"]), (&json!("ready"), &json!({"expire_after": "1h"})), "{def}");
    assert_eq!(ids(&s, "sessions").await, ["new", "none"]);
    s.check_ok().await;

    // writes: an expired document is absent for If-Match, PATCH and DELETE; a PUT creates it
    let r =
        s.send(reqwest::Method::PUT, "/v1/tables/sessions/documents/old", Some(&json!({})), &[("if-match", "*")]).await;
    assert!(r.is_problem(412, "precondition_failed"), "{}", r.body);
    let r = s.send(reqwest::Method::PATCH, "/v1/tables/sessions/documents/old", Some(&json!({"a": 1})), &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    let r = s.send(reqwest::Method::DELETE, "/v1/tables/sessions/documents/old", None, &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    let (st, _) = s.put("/v1/tables/sessions/documents/old", json!({"created_at": now_ms()})).await;
    assert_eq!(st, 201);
    s.check_ok().await;

    // invalid expiries and ttl options are refused, nothing stored
    for bad in [json!("soon"), json!(1.5), json!(true), json!(null), json!([1])] {
        let r = s
            .send(reqwest::Method::PUT, "/v1/tables/sessions/documents/bad", Some(&json!({"_expires_at": bad})), &[])
            .await;
        assert!(r.is_problem(422, "invalid_expiry"), "{bad}: {}", r.body);
    }
    let r =
        s.send(reqwest::Method::POST, "/v1/tables/sessions/documents", Some(&json!([{"_expires_at": "x"}])), &[]).await;
    assert!(r.is_problem(422, "invalid_expiry"), "{}", r.body);
    let ops = json!({"operations": [{"op": "put", "table": "sessions", "id": "b2", "document": {"_expires_at": {}}}]});
    let r = s.send(reqwest::Method::POST, "/v1/batch", Some(&ops), &[]).await;
    assert!(r.is_problem(422, "invalid_expiry"), "{}", r.body);
    // an import fails the bad lines only, on the fast path of a schemaless table too
    let lines = "{\"_id\": \"i1\", \"_expires_at\": \"never\"}\n{\"_id\": \"i2\", \"_expires_at\": 1.5}\n{\"_id\": \"i3\", \"_expires_at\": 18446744073709551615}\n";
    let r = s.raw(reqwest::Method::POST, "/v1/tables/sessions/import", "application/x-ndjson", lines).await;
    assert_eq!((r.status.as_u16(), &r.body["inserted"]), (200, &json!(0)), "{}", r.body);
    let codes: Vec<&Value> = r.body["failures"].as_array().unwrap().iter().map(|f| &f["code"]).collect();
    assert_eq!(codes, [&json!("invalid_expiry"); 3], "{}", r.body);
    assert_eq!(ids(&s, "sessions").await, ["new", "none", "old"]);
    for options in
        [json!({"expire_after": "1y"}), json!({}), json!({"expire_after": "1h", "x": 1}), json!({"expire_after": 60})]
    {
        let body = json!({"name": "t2", "kind": "ttl", "fields": ["created_at"], "options": options});
        let r = s.send(reqwest::Method::POST, "/v1/tables/sessions/indexes", Some(&body), &[]).await;
        assert!(r.is_problem(400, "invalid_request"), "{options}: {}", r.body);
    }
    let body = json!({"name": "t2", "kind": "ttl", "fields": ["a", "b"], "options": {"expire_after": "1h"}});
    let r = s.send(reqwest::Method::POST, "/v1/tables/sessions/indexes", Some(&body), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);

    // dropping the index: nothing expires by it any more
    put(&s, "sessions", "old", json!({"created_at": 0})).await;
    assert_eq!(ids(&s, "sessions").await, ["new", "none"]);
    let (st, _) = s.delete("/v1/tables/sessions/indexes/expiry").await;
    assert_eq!(st, 204);
    for _ in 0..500 {
        if ids(&s, "sessions").await.len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(ids(&s, "sessions").await, ["new", "none", "old"]);
    s.check_ok().await;
}
