//! NDJSON streams of query results and of whole tables (`Accept: application/x-ndjson`): the same
//! documents as the pages, in the same order; exports that import back; backpressure (a client
//! that stops reading holds a few pieces of the server's memory, not the answer, stalls nobody
//! else, and is cut off after the stall window); and streams that outlast the request timeout.

use crate::common::{Rng, TestServer};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const NDJSON: &str = "application/x-ndjson";

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
        let paged = s.query_pages("people", &query, 1000).await;
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

/// Sends `request` over a plain TCP connection and reads the answer until the server closes it
/// (or `within` passes): the raw bytes.
async fn raw_exchange(s: &TestServer, request: &str, half_close: bool, within: Duration) -> String {
    use std::io::{Read, Write};
    let (addr, request) = (s.base.trim_start_matches("http://").to_owned(), request.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(within)).unwrap();
        tcp.write_all(request.as_bytes()).unwrap();
        if half_close {
            tcp.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let mut out = Vec::new();
        let _ = tcp.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .unwrap()
}

/// At most `--max-streams` streamed answers run at once (each holds a blocking thread and a
/// snapshot): one more is refused with 503 `too_many_streams` and `Retry-After`, pages go on, and
/// the slot is free again once the stream ends. A backup takes a slot too.
#[tokio::test]
async fn streams_are_capped_and_the_cap_frees_up() {
    let s = TestServer::start_with(|c| c.limits.max_streams = 1).await;
    fill(&s, "t", 3000, 200).await;
    let open = || {
        s.client
            .get(format!("{}/v1/tables/t/documents", s.base))
            .header("accept", NDJSON)
            .header("accept-encoding", "identity")
            .send()
    };
    // held open, unread: it keeps its slot
    let first = open().await.unwrap();
    assert_eq!(first.status(), 200);
    let r =
        s.send(Method::POST, "/v1/tables/t/query", Some(&json!({"filter": {"age": 3}})), &[("accept", NDJSON)]).await;
    assert!(r.is_problem(503, "too_many_streams"), "{:?} {}", r.status, r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    let r = s.send(Method::POST, "/v1/admin/backup", None, &[]).await;
    assert!(r.is_problem(503, "too_many_streams"), "{:?} {}", r.status, r.body);
    // pages are not streams
    let (st, page) = s.post("/v1/tables/t/query", json!({"filter": {"age": 3}, "limit": 5})).await;
    assert_eq!(st, 200, "{page}");
    // the first stream read to its end frees its slot
    let (_, whole) = read_slowly(first, Duration::ZERO, Duration::ZERO).await;
    assert!(whole);
    let mut tries = 0;
    loop {
        let resp = open().await.unwrap();
        if resp.status() == 200 {
            let (_, whole) = read_slowly(resp, Duration::ZERO, Duration::ZERO).await;
            assert!(whole);
            break;
        }
        tries += 1;
        assert!(tries < 50, "the slot was not freed: {}", resp.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client that reads a little every window, but less than `--import-min-bytes` per window (the
/// request timeout), is cut: it cannot hold a thread and a snapshot for as long as it likes.
#[tokio::test]
async fn a_stream_read_too_slowly_is_cut() {
    let s = TestServer::start_with(|c| {
        c.limits.timeout = Duration::from_secs(1);
        c.limits.min_import_bytes = 2 << 20;
    })
    .await;
    fill(&s, "big", 20_000, 1000).await;
    let resp = s
        .client
        .get(format!("{}/v1/tables/big/documents", s.base))
        .header("accept", NDJSON)
        .header("accept-encoding", "identity")
        .send()
        .await
        .unwrap();
    let started = Instant::now();
    // a piece every 200 ms: well under 2 MiB per second
    let (read, whole) = read_slowly(resp, Duration::ZERO, Duration::from_millis(200)).await;
    assert!(!whole, "a client reading {read} bytes in {:?} must be cut", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(40), "{:?}", started.elapsed());
}

/// Shutdown does not wait for a stream whose client stops reading but keeps the socket open:
/// the stream ends (cut short) at once, and a connection still open after the grace period (the
/// request timeout) is dropped.
#[tokio::test]
async fn shutdown_ends_a_stream_nobody_reads() {
    let s = TestServer::start_with(|c| c.limits.timeout = Duration::from_secs(3)).await;
    fill(&s, "big", 20_000, 1000).await;
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    let request = "GET /v1/tables/big/documents HTTP/1.1\r\nhost: localhost\r\naccept: application/x-ndjson\r\n\r\n";
    std::io::Write::write_all(&mut tcp, request.as_bytes()).unwrap();
    // let the server fill every buffer on the way
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let stopped = tokio::time::timeout(Duration::from_secs(20), s.stop()).await;
    assert!(stopped.is_ok(), "shutdown hung on a stream nobody reads");
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
    drop(tcp);
}

/// A client may half-close its connection after the request (HTTP/1.1 allows it) and still
/// read the whole stream: its FIN is not taken for leaving.
#[tokio::test]
async fn a_half_closed_client_gets_the_whole_stream() {
    let s = TestServer::start().await;
    fill(&s, "t", 3000, 300).await;
    let request = "GET /v1/tables/t/documents HTTP/1.1\r\nhost: localhost\r\naccept: application/x-ndjson\r\nconnection: close\r\n\r\n";
    let answer = raw_exchange(&s, request, true, Duration::from_secs(20)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..answer.len().min(300)]);
    assert!(answer.ends_with("\r\n0\r\n\r\n"), "the stream was cut: {} bytes", answer.len());
    assert_eq!(answer.matches("\"_id\":").count(), 3000);
}

/// Headers of the routes that answer pages or streams by `Accept`: pages vary on `Accept`, streams
/// are not stored by caches and not compressed (a compressor would hold pieces back), a tie in
/// `Accept` goes to JSON, and HTTP/1.0 (no chunked encoding: a cut stream would look whole) gets
/// 406 for a stream.
#[tokio::test]
async fn stream_and_page_headers() {
    let s = TestServer::start().await;
    fill(&s, "t", 200, 100).await;
    let r = s.send(Method::POST, "/v1/tables/t/query", Some(&json!({"filter": {}})), &[]).await;
    assert_eq!(r.status, 200);
    assert!(r.header("vary").is_some_and(|v| v.to_ascii_lowercase().contains("accept")), "{:?}", r.headers);
    let r = s.send(Method::GET, "/v1/tables/t/documents", None, &[]).await;
    assert!(r.header("vary").is_some_and(|v| v.to_ascii_lowercase().contains("accept")), "{:?}", r.headers);
    let tie = s
        .send(Method::GET, "/v1/tables/t/documents", None, &[("accept", "application/json, application/x-ndjson")])
        .await;
    assert!(tie.header("content-type").is_some_and(|c| c.starts_with("application/json")), "{:?}", tie.headers);

    let request = "GET /v1/tables/t/documents HTTP/1.1\r\nhost: localhost\r\naccept: application/x-ndjson\r\n\
        accept-encoding: gzip\r\nconnection: close\r\n\r\n";
    let answer = raw_exchange(&s, request, false, Duration::from_secs(20)).await;
    let head = answer.split("\r\n\r\n").next().unwrap_or("").to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("cache-control: no-store"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert_eq!(answer.matches("\"_id\":").count(), 200);

    let request = "GET /v1/tables/t/documents HTTP/1.0\r\naccept: application/x-ndjson\r\n\r\n";
    let answer = raw_exchange(&s, request, false, Duration::from_secs(20)).await;
    assert!(answer.starts_with("HTTP/1.0 406") || answer.starts_with("HTTP/1.1 406"), "{answer}");
    assert!(answer.contains("not_acceptable"), "{answer}");
}

/// `"sort": ["_id"]` is the scan's own order: a stream of more matches than a stream sorts in
/// memory is not refused, and equals the export.
#[tokio::test]
async fn a_stream_sorted_by_id_is_not_sorted_in_memory() {
    let s = TestServer::start().await;
    fill(&s, "t", 10_500, 10).await;
    let sorted = stream(&s, Method::POST, "/v1/tables/t/query", Some(&json!({"sort": ["_id"]}))).await;
    assert_eq!(sorted.len(), 10_500);
    assert_eq!(sorted, stream(&s, Method::GET, "/v1/tables/t/documents", None).await);
    // and pages sorted by `_id` give the same
    let paged = s.query_pages("t", &json!({"sort": ["_id"], "filter": {"age": {"$lt": 10}}}), 1000).await;
    let want: Vec<Value> = sorted.iter().filter(|d| d["age"].as_u64().unwrap() < 10).cloned().collect();
    assert_eq!(paged, want);
}
