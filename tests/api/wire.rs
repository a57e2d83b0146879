//! Bad input from the wire: import's per-line promise, its limits and cancellation, duplicate
//! keys, numbers, nesting, column names, errors hyper would answer without a body, and slow or
//! idle connections.

use crate::common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const JSON: &str = "application/json";
const NDJSON: &str = "application/x-ndjson";

fn addr(s: &TestServer) -> String {
    s.base.trim_start_matches("http://").to_owned()
}

/// A raw HTTP/1.1 response: status, lower-cased head, body.
struct RawReply {
    status: u16,
    head: String,
    body: Value,
}

/// Reads one response from `tcp` (its body framed by Content-Length).
fn read_reply(tcp: &mut TcpStream) -> RawReply {
    read_response(tcp, true)
}

/// Reads one response; its body only if `with_body` (not for HEAD).
fn read_response(tcp: &mut TcpStream, with_body: bool) -> RawReply {
    let mut buf = Vec::new();
    let mut piece = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = tcp.read(&mut piece).expect("the server answers");
        assert!(n > 0, "connection closed before a response head: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&piece[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    let len: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).map(|v| v.trim().parse().unwrap()).unwrap_or(0);
    if !with_body {
        return RawReply { status, head, body: Value::Null };
    }
    while buf.len() < head_end + len {
        let n = tcp.read(&mut piece).unwrap();
        assert!(n > 0, "connection closed inside the body");
        buf.extend_from_slice(&piece[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
    RawReply { status, head, body }
}

fn connect(s: &TestServer) -> TcpStream {
    let tcp = TcpStream::connect(addr(s)).unwrap();
    // a bound on a broken server, far above any answer's time
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    tcp
}

impl RawReply {
    fn is_problem(&self, status: u16, code: &str) -> bool {
        self.status == status
            && self.head.contains("content-type: application/problem+json")
            && self.body["code"] == code
            && self.body["status"] == status
    }
}

async fn count(s: &TestServer, table: &str) -> u64 {
    s.get(&format!("/v1/tables/{table}")).await.1["documents"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_line_that_breaks_a_unique_index_fails_alone() {
    let s = TestServer::start().await;
    s.create_table("uimp").await;
    let r = s.post("/v1/tables/uimp/indexes", json!({"name": "by_email", "kind": "unique", "fields": ["email"]})).await;
    assert_eq!(r.0, 201, "{}", r.1);
    s.index_settled("uimp", "by_email").await;
    assert_eq!(s.put("/v1/tables/uimp/documents/old", json!({"email": "old@x"})).await.0, 201);
    let body = [
        r#"{"_id":"a","email":"a@x"}"#,
        r#"{"_id":"b","email":"b@x"}"#,
        r#"{"_id":"c","email":"a@x"}"#,
        r#"{"_id":"d","email":"d@x"}"#,
        r#"{"_id":"e","email":"old@x"}"#,
        r#"{"_id":"f","email":"f@x"}"#,
    ]
    .join("\n");
    let r = s.raw(Method::POST, "/v1/tables/uimp/import", NDJSON, body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["inserted"], 4);
    assert_eq!(r.body["failed"], 2);
    assert_eq!(r.body["failures"][0]["line"], 3);
    assert_eq!(r.body["failures"][0]["code"], "unique_violation");
    assert_eq!(r.body["failures"][1]["line"], 5);
    assert_eq!(count(&s, "uimp").await, 5);
    assert_eq!(s.get("/v1/tables/uimp/documents/c").await.0, 404);
    assert_eq!(s.get("/v1/tables/uimp/documents/f").await.1["email"], "f@x");
    s.check_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_keys_are_refused_on_every_path() {
    let s = TestServer::start().await;
    s.create_table("dup").await;
    s.post("/v1/tables", json!({"name": "tdup", "columns": [{"name": "x", "type": "int"}]})).await;
    assert_eq!(s.put("/v1/tables/dup/documents/p", json!({"x": 0})).await.0, 201);
    let top = r#"{"_id":"d1","x":1,"_id":"d2"}"#;
    let nested = r#"{"x":{"a":1,"b":2,"\u0061":3}}"#;
    for doc in [top, nested] {
        let cases = [
            (Method::PUT, "/v1/tables/dup/documents/d1".to_owned()),
            (Method::POST, "/v1/tables/dup/documents".to_owned()),
            (Method::POST, "/v1/tables/tdup/documents".to_owned()),
            (Method::PATCH, "/v1/tables/dup/documents/p".to_owned()),
        ];
        for (method, path) in cases {
            let r = s.raw(method.clone(), &path, JSON, doc.to_owned()).await;
            assert!(r.is_problem(400, "duplicate_key"), "{method} {path} {doc}: {}", r.body);
        }
        let many = format!("[{{\"_id\":\"ok\"}},{doc}]");
        let r = s.raw(Method::POST, "/v1/tables/dup/documents", JSON, many).await;
        assert!(r.is_problem(400, "duplicate_key"), "{}", r.body);
        let batch = format!(r#"{{"operations":[{{"op":"put","table":"dup","id":"b1","document":{doc}}}]}}"#);
        let r = s.raw(Method::POST, "/v1/batch", JSON, batch).await;
        assert!(r.is_problem(400, "duplicate_key"), "{}", r.body);
        for table in ["dup", "tdup"] {
            let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), NDJSON, format!("{doc}\n")).await;
            assert_eq!(
                (r.body["inserted"].clone(), r.body["failures"][0]["code"].clone()),
                (json!(0), json!("duplicate_key"))
            );
        }
    }
    // big bodies are parsed off the runtime's workers, under the same rules
    let pad = "x".repeat(300 << 10);
    let r = s.raw(Method::PUT, "/v1/tables/dup/documents/big", JSON, format!(r#"{{"pad":"{pad}","pad":1}}"#)).await;
    assert!(r.is_problem(400, "duplicate_key"), "{}", r.body);
    let r = s.raw(Method::PUT, "/v1/tables/dup/documents/big", JSON, format!(r#"{{"pad":"{pad}"}}"#)).await;
    assert_eq!(r.status, 201);
    assert_eq!(s.delete("/v1/tables/dup/documents/big").await.0, 204);
    assert_eq!(count(&s, "dup").await, 1, "nothing but the first document was written");
    assert_eq!(s.get("/v1/tables/dup/documents/p").await.1, json!({"_id": "p", "x": 0}));
    assert_eq!(count(&s, "tdup").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_are_stored_exactly_or_refused_on_every_path() {
    let s = TestServer::start().await;
    s.create_table("num").await;
    s.post("/v1/tables", json!({"name": "tnum", "columns": [{"name": "n", "type": "int"}]})).await;
    // -0 is the integer 0: an int column takes it, on PUT and on both import paths
    for (table, id) in [("num", "z"), ("tnum", "z")] {
        let r = s.raw(Method::PUT, &format!("/v1/tables/{table}/documents/{id}"), JSON, r#"{"n":-0}"#).await;
        assert!(r.status.is_success(), "{}", r.body);
        let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), NDJSON, "{\"_id\":\"i\",\"n\":-0}\n").await;
        assert_eq!(r.body["inserted"], 1, "{}", r.body);
        for id in [id, "i"] {
            let r = s.send(Method::GET, &format!("/v1/tables/{table}/documents/{id}"), None, &[]).await;
            assert!(r.body["n"].is_u64() && r.body["n"] == 0, "{table}/{id}: {}", r.body);
        }
    }
    // the ends of the integer ranges and -0.0 are kept exactly
    let edge = r#"{"big":18446744073709551615,"small":-9223372036854775808,"nz":-0.0,"tiny":5e-324}"#;
    assert_eq!(s.raw(Method::PUT, "/v1/tables/num/documents/edge", JSON, edge).await.status, 201);
    let r = s
        .raw(Method::POST, "/v1/tables/num/import", NDJSON, format!("{}\n", edge.replace("{", "{\"_id\":\"iedge\",")))
        .await;
    assert_eq!(r.body["inserted"], 1, "{}", r.body);
    for id in ["edge", "iedge"] {
        let text = s.client.get(format!("{}/v1/tables/num/documents/{id}", s.base)).send().await.unwrap();
        let text = text.text().await.unwrap();
        for part in ["\"big\":18446744073709551615", "\"small\":-9223372036854775808", "\"nz\":-0.0", "\"tiny\":5e-324"]
        {
            assert!(text.contains(part), "{id}: {text} lacks {part}");
        }
    }
    for bad in ["18446744073709551616", "-9223372036854775809", "1e-400", "1e400"] {
        let doc = format!("{{\"n\":{bad}}}");
        for (method, path) in [
            (Method::PUT, "/v1/tables/num/documents/bad"),
            (Method::POST, "/v1/tables/num/documents"),
            (Method::PATCH, "/v1/tables/num/documents/edge"),
        ] {
            let r = s.raw(method, path, JSON, doc.clone()).await;
            assert!(r.is_problem(400, "invalid_number"), "{path} {bad}: {}", r.body);
        }
        let batch = format!(r#"{{"operations":[{{"op":"put","table":"num","id":"b","document":{doc}}}]}}"#);
        assert!(s.raw(Method::POST, "/v1/batch", JSON, batch).await.is_problem(400, "invalid_number"));
        for table in ["num", "tnum"] {
            let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), NDJSON, format!("{doc}\n")).await;
            assert_eq!(r.body["failures"][0]["code"], "invalid_number", "{table} {bad}: {}", r.body);
        }
    }
    assert_eq!(count(&s, "num").await, 4);
    assert_eq!(s.get("/v1/tables/num/documents/edge").await.1["big"], json!(18446744073709551615u64));
}

/// `{"a":{"a":…{"a":1}…}}` with `levels` objects.
fn nested(levels: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_nesting_limit_on_every_path() {
    let s = TestServer::start().await;
    s.create_table("deep").await;
    let ok = nested(128);
    let r = s.raw(Method::PUT, "/v1/tables/deep/documents/put", JSON, ok.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    // what GET returns, PUT takes back
    let got =
        s.client.get(format!("{}/v1/tables/deep/documents/put", s.base)).send().await.unwrap().text().await.unwrap();
    assert_eq!(s.raw(Method::PUT, "/v1/tables/deep/documents/put", JSON, got).await.status, 200);
    let r = s.raw(Method::POST, "/v1/tables/deep/documents", JSON, format!("[{ok}]")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let batch = format!(r#"{{"operations":[{{"op":"put","table":"deep","id":"batch","document":{ok}}}]}}"#);
    let r = s.raw(Method::POST, "/v1/batch", JSON, batch).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.raw(Method::POST, "/v1/tables/deep/import", NDJSON, format!("{ok}\n")).await;
    assert_eq!(r.body["inserted"], 1, "{}", r.body);
    assert_eq!(count(&s, "deep").await, 4);

    for levels in [129, 200, 5000] {
        let bad = nested(levels);
        let r = s.raw(Method::PUT, "/v1/tables/deep/documents/x", JSON, bad.clone()).await;
        assert!(r.is_problem(422, "invalid_document"), "{levels}: {}", r.body);
        let r = s.raw(Method::POST, "/v1/tables/deep/documents", JSON, format!("[{bad}]")).await;
        assert!(r.is_problem(422, "invalid_document"), "{levels}: {}", r.body);
        let batch = format!(r#"{{"operations":[{{"op":"put","table":"deep","id":"x","document":{bad}}}]}}"#);
        let r = s.raw(Method::POST, "/v1/batch", JSON, batch).await;
        assert!(r.is_problem(422, "invalid_document"), "{levels}: {}", r.body);
        let r = s.raw(Method::POST, "/v1/tables/deep/import", NDJSON, format!("{bad}\n")).await;
        assert_eq!(r.body["failures"][0]["code"], "invalid_document", "{levels}: {}", r.body);
    }
    assert_eq!(count(&s, "deep").await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_name_with_a_dot_is_refused() {
    let s = TestServer::start().await;
    let r = s.post("/v1/tables", json!({"name": "dots", "columns": [{"name": "a.b", "type": "int"}]})).await;
    assert_eq!(r.0, 400, "{}", r.1);
    assert_eq!(r.1["code"], "invalid_request");
    let r = s
        .post("/v1/tables", json!({"name": "dots", "columns": [{"name": "a", "type": "int", "nullable": true}]}))
        .await;
    assert_eq!(r.0, 201);
    let r =
        s.patch("/v1/tables/dots", json!({"add_columns": [{"name": "x.y", "type": "int", "nullable": true}]})).await;
    assert_eq!(r.0, 400, "{}", r.1);
    assert_eq!(r.1["code"], "invalid_request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_content_length_over_the_limit_is_refused_before_the_body() {
    let s = TestServer::start_with(|c| c.limits.max_body_bytes = 1 << 20).await;
    s.create_table("cl").await;
    let mut tcp = connect(&s);
    // the head only: the server must not wait for 2 GB that will never come
    write!(
        tcp,
        "PUT /v1/tables/cl/documents/x HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 2000000000\r\n\r\n"
    )
    .unwrap();
    let r = read_reply(&mut tcp);
    assert!(r.is_problem(413, "payload_too_large"), "{} {} {}", r.status, r.head, r.body);
    assert_eq!(count(&s, "cl").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_line_over_the_cap_is_refused_while_the_client_still_sends() {
    let s = TestServer::start_with(|c| c.limits.max_body_bytes = 64 << 10).await;
    s.create_table("cap").await;
    let mut tcp = connect(&s);
    write!(
        tcp,
        "POST /v1/tables/cap/import HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let mut send = |data: &[u8]| {
        write!(tcp, "{:x}\r\n", data.len()).unwrap();
        tcp.write_all(data).unwrap();
        tcp.write_all(b"\r\n").unwrap();
    };
    send(b"{\"_id\":\"first\"}\n{\"long\":\"");
    // just past the cap, in small pieces; the body never ends
    for _ in 0..65 {
        send(&[b'x'; 1024]);
    }
    let r = read_reply(&mut tcp);
    assert!(r.is_problem(413, "payload_too_large"), "{} {}", r.status, r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("line 2"), "{}", r.body);
    assert_eq!(count(&s, "cap").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_whose_body_stalls_is_stopped() {
    let s = TestServer::start_with(|c| c.limits.timeout = Duration::from_secs(1)).await;
    s.create_table("stall").await;
    let mut tcp = connect(&s);
    let line = "{\"_id\":\"a\"}\n";
    write!(
        tcp,
        "POST /v1/tables/stall/import HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{line}\r\n",
        line.len()
    )
    .unwrap();
    // then nothing: the import must end by itself, and say so
    let r = read_reply(&mut tcp);
    assert!(r.is_problem(408, "request_timeout"), "{} {}", r.status, r.body);
    assert_eq!(count(&s, "stall").await, 1, "the complete line was written");
    assert_eq!(s.get("/v1/info").await.1["imports_running"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_stops_when_its_client_goes_away() {
    let s = TestServer::start().await;
    s.create_table("gone").await;
    let mut tcp = connect(&s);
    write!(
        tcp,
        "POST /v1/tables/gone/import HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let lines: String =
        (0..5000).map(|i| format!("{{\"_id\":\"{i:05}\",\"pad\":\"{}\"}}\n", "p".repeat(100))).collect();
    write!(tcp, "{:x}\r\n{lines}\r\n", lines.len()).unwrap();
    // the import is under way and the rest of the server answers meanwhile
    let mut running = 0;
    for _ in 0..500 {
        running = s.get("/v1/info").await.1["imports_running"].as_u64().unwrap();
        if running == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(running, 1);
    assert_eq!(s.get("/health").await.0, 200);
    assert_eq!(s.put("/v1/tables/gone/documents/meanwhile", json!({"x": 1})).await.0, 201);
    drop(tcp);
    for _ in 0..500 {
        running = s.get("/v1/info").await.1["imports_running"].as_u64().unwrap();
        if running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(running, 0, "the import ended with its connection");
    // nothing more is written after it ended
    let settled = count(&s, "gone").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count(&s, "gone").await, settled);
    assert!(settled <= 5001);
    s.check_ok().await;
}

/// Sends `request` on a fresh connection and reads the one response. The request is written on a
/// thread of its own while the answer is read: a server that refuses a request before reading all
/// of it (an oversized head) answers and closes meanwhile, and the rest of the write then fails
/// with a broken pipe — which says nothing about the answer, already on its way.
fn exchange(s: &TestServer, request: &[u8]) -> RawReply {
    let mut tcp = connect(s);
    let mut writer = tcp.try_clone().unwrap();
    let request = request.to_vec();
    let sending = std::thread::spawn(move || {
        let _ = writer.write_all(&request);
    });
    let reply = read_reply(&mut tcp);
    let _ = sending.join();
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_hyper_refuses_get_problem_documents_too() {
    let s = TestServer::start().await;
    s.create_table("raw").await;
    let long = format!("GET /v1/tables/raw/documents/{} HTTP/1.1\r\nhost: localhost\r\n\r\n", "a".repeat(70 << 10));
    let r = exchange(&s, long.as_bytes());
    assert!(r.is_problem(414, "uri_too_long"), "{} {} {}", r.status, r.head, r.body);
    let cases: [&[u8]; 4] = [
        b"PUT /v1/tables/raw/documents/a HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1x\r\n\r\n{}",
        b"PUT /v1/tables/raw/documents/a HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
        b"GET /health HTTP/1.1\r\nhost: localhost\r\nbad header: 1\r\n\r\n",
        b"GET /health HTTP/1.1\r\nhost: localhost\r\nx-bytes: \x01\x02\r\n\r\n",
    ];
    for request in cases {
        let r = exchange(&s, request);
        assert!(
            r.is_problem(400, "malformed_request"),
            "{:?}: {} {}",
            String::from_utf8_lossy(request),
            r.head,
            r.body
        );
    }
    // a placeholder left in a URL: the problem names the character, where it is and its encoding
    let r = exchange(&s, b"GET /v1/tables/raw/documents?limit=2&cursor=<cursor> HTTP/1.1\r\nhost: localhost\r\n\r\n");
    assert!(r.is_problem(400, "malformed_request"), "{} {}", r.head, r.body);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("the request target holds '<' at byte 40, which a URL must percent-encode (as %3C)"),
        "{detail}"
    );
    // the rest of the malformed requests are told as before
    let r = exchange(&s, cases[0]);
    assert!(r.body["detail"].as_str().unwrap_or_default().contains("Content-Length"), "{}", r.body);
    let huge = format!(
        "GET /health HTTP/1.1\r\nhost: localhost\r\n{}\r\n",
        "x-pad: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n".repeat(20_000)
    );
    let r = exchange(&s, huge.as_bytes());
    assert!(r.is_problem(431, "headers_too_large"), "{} {} {}", r.status, r.head, r.body);
    assert_eq!(count(&s, "raw").await, 0);

    // a good request and then a malformed one on the same connection: the first is answered
    // normally, the second with a problem
    let mut tcp = connect(&s);
    tcp.write_all(
        b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\nGET /health HTTP/1.1\r\nhost: localhost\r\ncontent-length: -1\r\n\r\n",
    )
    .unwrap();
    // the server closes after the second: read both
    let mut all = Vec::new();
    tcp.read_to_end(&mut all).unwrap();
    let all = String::from_utf8_lossy(&all).to_ascii_lowercase();
    let second = all
        .find("http/1.1 400 bad request\r\ncontent-type: application/problem+json")
        .expect("a problem for the second");
    assert!(
        all[..second].starts_with("http/1.1 200 ok\r\n")
            && all[..second].ends_with(concat!("\"commit\":\"mosaicdb-", env!("CARGO_PKG_VERSION"), "\"}")),
        "{all}"
    );
    assert!(all.ends_with("\"code\":\"malformed_request\"}"), "{all}");
    // a HEAD answer for an error (no body) passes untouched
    let mut tcp = connect(&s);
    tcp.write_all(b"HEAD /v1/tables/none HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
    let r = read_response(&mut tcp, false);
    assert_eq!(r.status, 404, "{}", r.head);
    assert!(r.head.contains("content-type: application/problem+json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_stops_when_its_client_closes_with_body_bytes_still_unread() {
    let s = TestServer::start().await;
    s.create_table("unread").await;
    let mut tcp = connect(&s);
    write!(
        tcp,
        "POST /v1/tables/unread/import HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-ndjson\r\ncontent-length: 1000000000\r\n\r\n"
    )
    .unwrap();
    // fill the socket buffers with short lines, faster than the import takes them, then close:
    // hyper holds (or has yet to read) many complete lines when the client is gone
    tcp.set_nonblocking(true).unwrap();
    let piece = "{}\n".repeat(4096);
    let mut sent = 0u64;
    loop {
        match tcp.write(piece.as_bytes()) {
            Ok(n) => sent += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    let lines_sent = sent / 3;
    drop(tcp);
    let mut running = 1;
    for _ in 0..3000 {
        running = s.get("/v1/info").await.1["imports_running"].as_u64().unwrap();
        if running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(running, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // an import that read on until the connection's end would have written every line sent
    let written = count(&s, "unread").await;
    assert!(written < lines_sent, "{written} of {lines_sent} lines written after the client left");
}

/// Whether the server closed `tcp` (a FIN or a reset) within 10 s, reading nothing.
fn closed_by_server(tcp: &mut TcpStream) -> bool {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

/// The header-read and keep-alive timeouts close a connection idle after its answer, one that
/// sends half a head, and one that sends nothing — and never one whose request is being answered:
/// a long-poll and a change stream outlast both timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_time_out_but_answers_under_way_do_not() {
    let s = TestServer::start_with(|c| {
        c.timeouts = mosaicdb::server::ConnTimeouts { header: Duration::from_secs(1), idle: Duration::from_secs(1) };
    })
    .await;
    s.create_table("t").await;
    let (a, b, c, d, e) = (connect(&s), connect(&s), connect(&s), connect(&s), connect(&s));
    let waits = tokio::task::spawn_blocking(move || {
        let (mut idle, mut half, mut silent, mut poll, mut stream) = (a, b, c, d, e);
        write!(idle, "GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
        assert_eq!(read_reply(&mut idle).status, 200);
        write!(half, "GET /health HTTP/1.1\r\nhost: localhost\r\nx-slow").unwrap();
        write!(poll, "GET /v1/changes?table=t&wait_ms=3000 HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
        write!(stream, "GET /v1/changes/stream HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
        let started = std::time::Instant::now();
        for (what, tcp) in [("idle", &mut idle), ("half a head", &mut half), ("nothing sent", &mut silent)] {
            assert!(closed_by_server(tcp), "{what}: not closed");
        }
        assert!(started.elapsed() >= Duration::from_millis(900), "closed before the timeout");
        // the long-poll waited its 3 s, its connection kept
        let reply = read_reply(&mut poll);
        assert_eq!(reply.status, 200, "{}", reply.head);
        assert!(started.elapsed() >= Duration::from_millis(2900));
        stream
    });
    let mut stream = waits.await.unwrap();
    // the change stream, open for over 3 s, still carries the next event
    assert_eq!(s.put("/v1/tables/t/documents/late", json!({"x": 1})).await.0, 201);
    let seen = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        let mut piece = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("late") {
            let n = stream.read(&mut piece).expect("the stream goes on");
            assert!(n > 0, "the stream was closed: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&piece[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let seen = seen.await.unwrap();
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    let metrics = reqwest::get(format!("{}/metrics", s.base)).await.unwrap().text().await.unwrap();
    let count = |phase: &str| {
        let line = format!("mosaicdb_http_connections_timed_out_total{{phase=\"{phase}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(line.as_str())?.parse::<u64>().ok()).unwrap_or(0)
    };
    // the half head and the silent one; the idle one, and the test client's own pooled ones
    assert_eq!(count("header"), 2, "{metrics}");
    assert!(count("idle") >= 1, "{metrics}");
}
