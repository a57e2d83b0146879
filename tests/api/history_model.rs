//! History against an in-memory model: random writes over time (PUT, PATCH, DELETE, batch) with a
//! restart in between, then the table read as of every moment between rounds — documents one by
//! one, queries (filtered, sorted, paged), listings and exports — and every document's history,
//! compared with a record of every acknowledged write.

use crate::common::{Rng, TestServer};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const IDS: u64 = 16;
const ROUNDS: usize = 6;

/// The state of the table at one moment, and that moment (ms since the epoch).
struct Mark {
    at_ms: i64,
    docs: BTreeMap<String, Value>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A moment after every write acknowledged so far and before any written after it returns.
async fn mark(docs: &BTreeMap<String, Value>) -> Mark {
    tokio::time::sleep(Duration::from_millis(3)).await;
    let at_ms = now_ms() - 1;
    tokio::time::sleep(Duration::from_millis(3)).await;
    Mark { at_ms, docs: docs.clone() }
}

fn with_id(id: &str, body: &Value) -> Value {
    let mut doc = body.clone();
    doc["_id"] = json!(id);
    doc
}

async fn export(s: &TestServer, path: &str, body: Option<&Value>) -> Vec<Value> {
    let method = if body.is_some() { Method::POST } else { Method::GET };
    let mut req = s.client.request(method, format!("{}{path}", s.base)).header("accept", "application/x-ndjson");
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let text = resp.text().await.unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

async fn listing_pages(s: &TestServer, at_ms: i64) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = format!("/v1/tables/h/documents?limit=5&as_of={at_ms}");
    loop {
        let (st, page) = s.get(&path).await;
        assert_eq!(st, 200, "{page}");
        out.extend(page["documents"].as_array().unwrap().iter().cloned());
        match page["cursor"].as_str() {
            Some(c) => path = format!("/v1/tables/h/documents?limit=5&as_of={at_ms}&cursor={c}"),
            None => return out,
        }
    }
}

#[tokio::test]
async fn reads_as_of_any_time_and_the_history_match_every_acknowledged_write() {
    let mut s = TestServer::start().await;
    let (st, def) = s.post("/v1/tables", json!({"name": "h", "history": {"max_versions": 1000}})).await;
    assert_eq!(st, 201, "{def}");
    // an index the plain queries use and the as-of ones must not (it describes the table now)
    let (st, body) = s.post("/v1/tables/h/indexes", json!({"name": "by_n", "kind": "range", "fields": ["n"]})).await;
    assert!(st == 201 || st == 202, "{body}");

    let mut rng = Rng(34);
    let mut docs: BTreeMap<String, Value> = BTreeMap::new();
    // per document, newest last: (op, document after the write)
    let mut events: BTreeMap<String, Vec<(&str, Value)>> = BTreeMap::new();
    let mut marks = vec![mark(&docs).await];
    for round in 0..ROUNDS {
        if round == ROUNDS / 2 {
            let dir = s.stop().await;
            s = TestServer::start_in(dir, |_| {}).await;
        }
        for _ in 0..30 {
            let id = format!("d{:02}", rng.below(IDS));
            let path = format!("/v1/tables/h/documents/{id}");
            let body = json!({"n": rng.below(100), "round": round});
            let exists = docs.contains_key(&id);
            let op = match rng.below(5) {
                0 => {
                    let (st, _) = s.delete(&path).await;
                    assert_eq!(st, if exists { 204 } else { 404 });
                    if exists {
                        docs.remove(&id);
                        events.entry(id.clone()).or_default().push(("delete", Value::Null));
                    }
                    continue;
                }
                1 if exists => {
                    let (st, out) = s.patch(&path, json!({"n": body["n"]})).await;
                    assert_eq!(st, 200, "{out}");
                    docs.get_mut(&id).unwrap()["n"] = body["n"].clone();
                    "update"
                }
                2 => {
                    let batch = json!({"operations": [{"op": "put", "table": "h", "id": id, "document": body}]});
                    let (st, out) = s.post("/v1/batch", batch).await;
                    assert_eq!(st, 200, "{out}");
                    docs.insert(id.clone(), with_id(&id, &body));
                    if exists { "update" } else { "create" }
                }
                _ => {
                    let (st, out) = s.put(&path, body.clone()).await;
                    assert_eq!(st, if exists { 200 } else { 201 }, "{out}");
                    docs.insert(id.clone(), with_id(&id, &body));
                    if exists { "update" } else { "create" }
                }
            };
            events.entry(id.clone()).or_default().push((op, docs[&id].clone()));
        }
        marks.push(mark(&docs).await);
    }

    for m in &marks {
        let at = m.at_ms;
        let want: Vec<Value> = m.docs.values().cloned().collect();
        // every document, in `_id` order: the query's pages, the listing's, the export
        let all = s.query_pages("h", &json!({"as_of": at}), 7).await;
        assert_eq!(all, want, "query as of {at}");
        assert_eq!(listing_pages(&s, at).await, want, "listing as of {at}");
        assert_eq!(export(&s, &format!("/v1/tables/h/documents?as_of={at}"), None).await, want, "export as of {at}");
        // filtered and sorted, as the model has it (ties by `_id` in the sort's direction)
        let mut high: Vec<Value> = want.iter().filter(|d| d["n"].as_u64().unwrap() >= 50).cloned().collect();
        high.sort_by(|a, b| (b["n"].as_u64(), b["_id"].as_str()).cmp(&(a["n"].as_u64(), a["_id"].as_str())));
        let q = json!({"as_of": at, "filter": {"n": {"$gte": 50}}, "sort": ["-n"]});
        assert_eq!(s.query_pages("h", &q, 3).await, high, "sorted query as of {at}");
        assert_eq!(export(&s, "/v1/tables/h/query", Some(&q)).await, high, "sorted stream as of {at}");
        // one document at a time
        for i in 0..IDS {
            let id = format!("d{i:02}");
            let r = s.send(Method::GET, &format!("/v1/tables/h/documents/{id}?as_of={at}"), None, &[]).await;
            match m.docs.get(&id) {
                Some(doc) => assert_eq!(&r.body, doc, "{id} as of {at}"),
                None => assert!(r.is_problem(404, "document_not_found"), "{id} as of {at}: {}", r.body),
            }
        }
    }
    // the as-of plan reads the history, not the index
    let (_, plan) =
        s.post("/v1/tables/h/query", json!({"as_of": marks[2].at_ms, "filter": {"n": 3}, "explain": true})).await;
    assert_eq!(plan["plan"]["strategy"], "as_of_scan", "{plan}");

    // every document's history, newest first, is its acknowledged writes
    for (id, written) in &events {
        let (st, page) = s.get(&format!("/v1/tables/h/documents/{id}/history?limit=1000")).await;
        assert_eq!(st, 200, "{page}");
        let got: Vec<(String, Value)> = page["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["op"].as_str().unwrap().to_owned(), v.get("document").cloned().unwrap_or(Value::Null)))
            .collect();
        let want: Vec<(String, Value)> = written.iter().rev().map(|(op, d)| ((*op).to_owned(), d.clone())).collect();
        assert_eq!(got, want, "history of {id}");
    }
    s.check_ok().await;
}

#[tokio::test]
async fn as_of_refusals_and_documents_older_than_the_history() {
    let s = TestServer::start().await;
    s.create_table("plain").await;
    s.put("/v1/tables/plain/documents/old", json!({"v": 1})).await;
    for (method, path, body) in [
        (Method::POST, "/v1/tables/plain/query", Some(json!({"as_of": 0}))),
        (Method::GET, "/v1/tables/plain/documents?as_of=0", None),
    ] {
        let r = s.send(method, path, body.as_ref(), &[]).await;
        assert!(r.is_problem(400, "invalid_request"), "{path}: {}", r.body);
    }
    let (st, _) = s.patch("/v1/tables/plain", json!({"history": {"max_age": "1d"}})).await;
    assert_eq!(st, 200);
    // written before the table kept history and never replaced since: there at any time
    let (_, page) = s.post("/v1/tables/plain/query", json!({"as_of": "2001-01-01T00:00:00Z"})).await;
    assert_eq!(page["documents"], json!([{"_id": "old", "v": 1}]), "{page}");
    let (st, doc) = s.get("/v1/tables/plain/documents/old?as_of=0").await;
    assert_eq!((st.as_u16(), doc), (200, json!({"_id": "old", "v": 1})));
    let (_, page) = s.get("/v1/tables/plain/documents/old/history").await;
    assert_eq!(page["versions"][0]["op"], "unknown", "{page}");
    assert_eq!(page["versions"][0]["current"], true, "{page}");
    // a cursor continues only its own time
    for i in 0..3 {
        s.put(&format!("/v1/tables/plain/documents/n{i}"), json!({"v": i})).await;
    }
    let now = now_ms() + 1000;
    let (_, page) = s.post("/v1/tables/plain/query", json!({"as_of": now, "limit": 1})).await;
    let cursor = page["cursor"].as_str().unwrap();
    let r = s
        .send(
            Method::POST,
            "/v1/tables/plain/query",
            Some(&json!({"as_of": now + 1, "limit": 1, "cursor": cursor})),
            &[],
        )
        .await;
    assert!(r.is_problem(400, "invalid_cursor"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/tables/plain/query", Some(&json!({"as_of": "noon"})), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
}

/// As of a time, a document whose TTL had passed by then was hidden then, swept or not.
#[tokio::test]
async fn as_of_hides_what_had_expired_by_then() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "tmp", "history": {"max_versions": 5}})).await;
    let expires = now_ms() + 400;
    let (st, _) = s.put("/v1/tables/tmp/documents/a", json!({"v": 1, "_expires_at": expires})).await;
    assert_eq!(st, 201);
    s.put("/v1/tables/tmp/documents/b", json!({"v": 2})).await;
    let before = expires - 100;
    tokio::time::sleep(Duration::from_millis(450)).await;
    let (st, _) = s.get(&format!("/v1/tables/tmp/documents/a?as_of={before}")).await;
    assert_eq!(st, 200);
    let after = expires + 1;
    let r = s.send(Method::GET, &format!("/v1/tables/tmp/documents/a?as_of={after}"), None, &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    let ids = |page: &Value| page["documents"].as_array().unwrap().iter().map(|d| d["_id"].clone()).collect::<Vec<_>>();
    let (_, page) = s.post("/v1/tables/tmp/query", json!({"as_of": before})).await;
    assert_eq!(ids(&page), [json!("a"), json!("b")], "{page}");
    let (_, page) = s.post("/v1/tables/tmp/query", json!({"as_of": after})).await;
    assert_eq!(ids(&page), [json!("b")], "{page}");
}

/// The as-of walk tells a document's keys from those of an id it is a prefix of.
#[tokio::test]
async fn as_of_walks_ids_that_prefix_one_another() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "p", "history": {"max_versions": 5}})).await;
    for id in ["a", "ab", "a.b", "b"] {
        s.put(&format!("/v1/tables/p/documents/{id}"), json!({"v": 1})).await;
    }
    let mid = mark(&BTreeMap::new()).await.at_ms;
    for id in ["a", "ab", "a.b", "b"] {
        s.put(&format!("/v1/tables/p/documents/{id}"), json!({"v": 2})).await;
    }
    s.delete("/v1/tables/p/documents/ab").await;
    let (_, then) = s.post("/v1/tables/p/query", json!({"as_of": mid})).await;
    let (_, now) = s.post("/v1/tables/p/query", json!({"as_of": now_ms() + 1000})).await;
    let pairs = |page: &Value| {
        page["documents"].as_array().unwrap().iter().map(|d| (d["_id"].clone(), d["v"].clone())).collect::<Vec<_>>()
    };
    assert_eq!(
        pairs(&then),
        [(json!("a"), json!(1)), (json!("a.b"), json!(1)), (json!("ab"), json!(1)), (json!("b"), json!(1))]
    );
    assert_eq!(pairs(&now), [(json!("a"), json!(2)), (json!("a.b"), json!(2)), (json!("b"), json!(2))]);
}
