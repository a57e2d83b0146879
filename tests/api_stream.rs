//! NDJSON streams of query results and of whole tables (`Accept: application/x-ndjson`): the same
//! documents as the pages, in the same order; exports that import back; backpressure (a client
//! that stops reading holds a few pieces of the server's memory, not the answer, stalls nobody
//! else, and is cut off after the stall window); and streams that outlast the request timeout.

mod common;
use common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const NDJSON: &str = "application/x-ndjson";

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const CITIES: [&str; 4] = ["Oslo", "Rome", "Lima", "Pune"];

/// `n` documents `{"_id", "name", "age" 0-99, "city" one of 4, "tags" 0-2 of 5, "pad"}`, imported.
async fn fill(s: &TestServer, table: &str, n: usize, pad: usize) {
    s.create_table(table).await;
    let mut rng = Rng(7);
    let mut lines = String::new();
    for i in 0..n {
        let tags: Vec<String> = (0..rng.below(3)).map(|k| format!("t{}", (i as u64 + k) % 5)).collect();
        let pad: String = (0..pad).map(|_| (b'a' + rng.below(26) as u8) as char).collect();
        let doc = json!({"_id": format!("d{:06}", (i * 7919) % n), "name": format!("n{i}"), "age": rng.below(100),
            "city": CITIES[rng.below(4) as usize], "tags": tags, "pad": pad});
        lines.push_str(&doc.to_string());
        lines.push('\n');
    }
    let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), NDJSON, lines).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["inserted"], n, "{}", r.body);
}

async fn index(s: &TestServer, table: &str, name: &str, kind: &str, field: &str) {
    let (st, body) =
        s.post(&format!("/v1/tables/{table}/indexes"), json!({"name": name, "kind": kind, "fields": [field]})).await;
    assert!(st == 201 || st == 202, "{body}");
    assert_eq!(s.index_settled(table, name).await["state"], "ready");
}

/// A streamed answer, whole: its documents (each line one), after checking the status, the
/// content type and that the body ended cleanly with a newline.
async fn stream(s: &TestServer, method: Method, path: &str, body: Option<&Value>) -> Vec<Value> {
    let mut req = s.client.request(method, format!("{}{}", s.base, path)).header("accept", NDJSON);
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let content_type = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap_or_else(|e| panic!("{path} {body:?}: {e}"));
    assert_eq!(status, 200, "{path} {body:?}: {text}");
    assert_eq!(content_type.as_deref(), Some(NDJSON));
    assert!(text.is_empty() || text.ends_with('\n'));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Every page of a query (pages of 1000, through the cursors).
async fn pages(s: &TestServer, table: &str, query: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = query.clone();
        q["limit"] = json!(1000);
        if let Some(c) = &cursor {
            q["cursor"] = json!(c);
        }
        let (st, page) = s.post(&format!("/v1/tables/{table}/query"), q).await;
        assert_eq!(st, 200, "{query}: {page}");
        out.extend(page["documents"].as_array().unwrap().iter().cloned());
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

#[tokio::test]
async fn streams_equal_the_pages_and_exports_import_back() {
    let s = TestServer::start().await;
    fill(&s, "people", 20_000, 40).await;
    index(&s, "people", "by_age", "range", "age").await;
    index(&s, "people", "by_city", "hash", "city").await;
    index(&s, "people", "by_tag", "hash", "tags").await;
    for (query, strategy) in [
        // the whole table, `_id` order (many pieces of the stream)
        (json!({}), "full_scan"),
        // a range scan's natural order; covered (ids only)
        (json!({"filter": {"age": {"$gte": 10, "$lt": 13}}}), "index_scan"),
        (json!({"filter": {"age": {"$gte": 10, "$lt": 13}}, "fields": ["_id"]}), "index_scan"),
        // an equality scan in `_id` order; a multikey one
        (json!({"filter": {"city": "Oslo"}, "fields": ["_id", "age"]}), "index_scan"),
        (json!({"filter": {"tags": "t1"}}), "index_scan"),
        // two equality ranges: sorted in memory by `_id`, or (over 10,000 matches) a full scan
        (json!({"filter": {"city": {"$in": ["Oslo", "Lima"]}, "age": {"$lt": 30}}}), "index_scan"),
        (json!({"filter": {"city": {"$in": ["Oslo", "Lima", "Rome"]}}}), "index_scan"),
        // a sort served by the index, and one sorted in memory
        (json!({"filter": {"age": {"$gte": 90}}, "sort": ["-age"]}), "index_scan"),
        (json!({"filter": {"age": {"$lt": 5}}, "sort": ["city", "-age"], "fields": ["city", "age"]}), "index_scan"),
        (json!({"filter": {"$or": [{"city": "Pune"}, {"age": 3}]}, "fields": ["name"]}), "union"),
        (json!({"filter": {"name": "n77"}}), "full_scan"),
    ] {
        let mut explain = query.clone();
        explain["explain"] = json!(true);
        let (_, plan) = s.post("/v1/tables/people/query", explain).await;
        assert_eq!(plan["plan"]["strategy"], strategy, "{query}: {plan}");
        let streamed = stream(&s, Method::POST, "/v1/tables/people/query", Some(&query)).await;
        let paged = pages(&s, "people", &query).await;
        assert_eq!(streamed.len(), paged.len(), "{query}");
        assert!(streamed == paged, "{query}: the stream differs from the pages");
        assert!(!streamed.is_empty(), "{query}");
    }

    // a sort no index gives, over more than 10,000 matches: refused before the answer starts
    let r =
        s.send(Method::POST, "/v1/tables/people/query", Some(&json!({"sort": ["city"]})), &[("accept", NDJSON)]).await;
    assert!(r.is_problem(422, "stream_sort_too_large"), "{}", r.body);
    for bad in [json!({"limit": 10}), json!({"cursor": "x"}), json!({"explain": true})] {
        let r = s.send(Method::POST, "/v1/tables/people/query", Some(&bad), &[("accept", NDJSON)]).await;
        assert!(r.is_problem(400, "invalid_request"), "{bad}: {}", r.body);
    }
    let r = s.send(Method::POST, "/v1/tables/nope/query", Some(&json!({})), &[("accept", NDJSON)]).await;
    assert!(r.is_problem(404, "table_not_found"), "{}", r.body);
    let r = s.send(Method::GET, "/v1/tables/people/documents?limit=5", None, &[("accept", NDJSON)]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    // `*/*` or JSON still get a page
    let r = s.send(Method::POST, "/v1/tables/people/query", Some(&json!({})), &[("accept", "*/*")]).await;
    assert_eq!(r.body["documents"].as_array().map(Vec::len), Some(100));

    // the export: every document in `_id` order, which the import reads back as an equal table
    let exported = stream(&s, Method::GET, "/v1/tables/people/documents", None).await;
    let all = s.all_documents("people").await;
    assert_eq!(exported, all.values().cloned().collect::<Vec<_>>());
    let text: String = exported.iter().map(|d| format!("{d}\n")).collect();
    s.create_table("copy").await;
    let r = s.raw(Method::POST, "/v1/tables/copy/import", NDJSON, text).await;
    assert_eq!(r.body["inserted"], 20_000, "{}", r.body);
    assert_eq!(s.all_documents("copy").await, all);
    // an empty table streams nothing
    s.create_table("empty").await;
    assert!(stream(&s, Method::GET, "/v1/tables/empty/documents", None).await.is_empty());
}

/// Reads a streamed answer piece by piece: after the first piece it waits `stop` once, then
/// `pause` after each piece; returns the bytes read and whether the body ended cleanly.
async fn read_slowly(resp: reqwest::Response, stop: Duration, pause: Duration) -> (usize, bool) {
    let mut resp = resp;
    let mut read = 0;
    loop {
        match resp.chunk().await {
            Ok(Some(piece)) => {
                if read == 0 {
                    tokio::time::sleep(stop).await;
                }
                read += piece.len();
                tokio::time::sleep(pause).await;
            }
            Ok(None) => return (read, true),
            Err(_) => return (read, false),
        }
    }
}

#[tokio::test]
async fn a_stream_outlasts_the_timeout_but_not_a_client_that_stops_reading() {
    let s = TestServer::start_with(|c| c.limits.timeout = Duration::from_secs(1)).await;
    // about 20 MB of hardly compressible NDJSON: far more than the socket buffers hold
    fill(&s, "big", 20_000, 1000).await;
    let full: usize =
        stream(&s, Method::GET, "/v1/tables/big/documents", None).await.iter().map(|d| d.to_string().len() + 1).sum();
    let open = || {
        s.client
            .get(format!("{}/v1/tables/big/documents", s.base))
            .header("accept", NDJSON)
            .header("accept-encoding", "identity")
            .send()
    };

    // read with short pauses: the stream takes longer than the 1 s request timeout, and is whole
    let started = Instant::now();
    let (read, whole) = read_slowly(open().await.unwrap(), Duration::ZERO, Duration::from_millis(2)).await;
    assert!(whole && read == full, "read {read} of {full} bytes");
    assert!(started.elapsed() > Duration::from_secs(1), "{:?}", started.elapsed());

    // a client that reads a little and then nothing for longer than the stall window (the
    // request timeout): the server holds a few pieces, not the answer, so its writer waits, gives
    // up, and the body is cut short; meanwhile other requests are answered at once
    let resp = open().await.unwrap();
    let reader = tokio::spawn(read_slowly(resp, Duration::from_secs(3), Duration::ZERO));
    for i in 0..5 {
        let asked = Instant::now();
        let (st, _) = s.put(&format!("/v1/tables/big/documents/other{i}"), json!({"age": 1})).await;
        assert_eq!(st, 201);
        let (st, page) = s.post("/v1/tables/big/query", json!({"filter": {"age": 1}, "fields": ["_id"]})).await;
        assert_eq!(st, 200, "{page}");
        assert!(asked.elapsed() < Duration::from_millis(500), "{:?}", asked.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (read, whole) = reader.await.unwrap();
    assert!(!whole, "the body of a client that stopped reading must be cut short");
    assert!(read < full, "read {read} of {full} bytes");

    // a client that goes away: the server goes on serving
    let resp = open().await.unwrap();
    drop(resp);
    let (st, _) = s.get("/v1/tables/big").await;
    assert_eq!(st, 200);
}
