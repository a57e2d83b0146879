//! The changefeed over HTTP: concurrent writers on overlapping ids while a consumer follows the
//! feed (every seq once, in order; replaying the events reproduces every table), resume after a
//! restart, SSE with `Last-Event-ID`, table modes, long-poll, retention and 410, bad parameters.

use crate::common::{TestServer, seg};
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// No wait in this file lasts longer.
const WAIT: Duration = Duration::from_secs(30);

/// What a consumer rebuilt: table → id → document (`Null` for a keys-mode table's document).
type Replica = BTreeMap<String, BTreeMap<String, Value>>;

/// Applies events to a replica, checking that seqs follow `last` one by one and that each
/// event's `txn`/`count` enclose its seq; returns the last seq.
fn apply(replica: &mut Replica, events: &[Value], mut last: u64) -> u64 {
    for e in events {
        let seq = e["seq"].as_u64().unwrap();
        assert_eq!(seq, last + 1, "seqs must follow each other: {e}");
        let (txn, count) = (e["txn"].as_u64().unwrap(), e["count"].as_u64().unwrap());
        assert!(txn <= seq && seq < txn + count, "{e}");
        assert!(e["ts"].as_i64().unwrap() > 0);
        last = seq;
        let (table, id) = (e["table"].as_str().unwrap().to_owned(), e["id"].as_str().unwrap().to_owned());
        match e["op"].as_str().unwrap() {
            "put" => {
                let doc = e.get("document").cloned().unwrap_or(Value::Null);
                replica.entry(table).or_default().insert(id, doc);
            }
            "delete" => {
                replica.entry(table).or_default().remove(&id);
            }
            other => panic!("unknown op {other}"),
        }
    }
    last
}

async fn create(s: &TestServer, name: &str, mode: &str) {
    let (status, body) = s.post("/v1/tables", json!({"name": name, "changefeed": mode})).await;
    assert_eq!(status, 201, "{body}");
}

/// One page after `since` (no wait).
async fn page(s: &TestServer, since: u64, extra: &str) -> (Vec<Value>, u64) {
    let (status, body) = s.get(&format!("/v1/changes?since={since}{extra}")).await;
    assert_eq!(status, 200, "{body}");
    (body["events"].as_array().unwrap().clone(), body["next"].as_u64().unwrap())
}

/// Reads the feed from `since` until `last` (inclusive), checking contiguity.
async fn read_to(s: &TestServer, replica: &mut Replica, mut since: u64, last: u64) -> u64 {
    let deadline = Instant::now() + WAIT;
    while since < last {
        assert!(Instant::now() < deadline, "the feed did not reach {last}");
        let (events, next) = page(s, since, "&limit=500&wait_ms=1000").await;
        since = apply(replica, &events, since);
        assert_eq!(since, next);
    }
    since
}

async fn last_seq(s: &TestServer) -> u64 {
    let (status, stats) = s.get("/v1/changes/stats").await;
    assert_eq!(status, 200);
    stats["last_seq"].as_u64().unwrap()
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Random writes of every kind on ids 0..8 of tables `full` and `keys`.
async fn writer(s: &TestServer, w: u64, ops: usize) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w + 1));
    for n in 0..ops {
        let table = if rng.below(2) == 0 { "full" } else { "keys" };
        let id = format!("d{}", rng.below(8));
        let stamp = json!({"w": w, "n": n});
        match rng.below(6) {
            0 | 1 => {
                s.put(&format!("/v1/tables/{table}/documents/{id}"), json!({"v": stamp, "keep": w})).await;
            }
            2 => {
                // 404 when absent: nothing written, no event
                s.patch(&format!("/v1/tables/{table}/documents/{id}"), json!({"p": stamp, "keep": null})).await;
            }
            3 => {
                s.delete(&format!("/v1/tables/{table}/documents/{id}")).await;
            }
            4 => {
                let other = format!("d{}", rng.below(8));
                let ops = json!({"operations": [
                    {"op": "put", "table": "full", "id": id, "document": {"b": stamp}},
                    {"op": "put", "table": "keys", "id": other, "document": {"b": stamp}},
                    {"op": "delete", "table": "keys", "id": id},
                ]});
                s.post("/v1/batch", ops).await;
            }
            _ => {
                let body = format!("{}\n{}\n", json!({"_id": id, "i": stamp}), json!({"_id": "d9", "i": stamp}));
                let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), "application/x-ndjson", body).await;
                assert_eq!(r.status, 200, "{}", r.body);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_and_a_follower_see_every_seq_once_and_replay_every_table() {
    let s = std::sync::Arc::new(TestServer::start().await);
    create(&s, "full", "full").await;
    create(&s, "keys", "keys").await;
    create(&s, "quiet", "off").await;
    create(&s, "gone", "full").await;
    for i in 0..30 {
        s.put(&format!("/v1/tables/gone/documents/g{i}"), json!({"i": i})).await;
    }
    s.put("/v1/tables/quiet/documents/q", json!({"i": 1})).await;
    let start = last_seq(&s).await;

    // the follower long-polls while the writers write
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = {
        let (s, done) = (s.clone(), done.clone());
        tokio::spawn(async move {
            let (mut replica, mut since) = (Replica::new(), 0);
            loop {
                let finished = done.load(std::sync::atomic::Ordering::Acquire);
                let (events, next) = page(&s, since, "&limit=100&wait_ms=200").await;
                since = apply(&mut replica, &events, since);
                assert_eq!(since, next);
                if finished && events.is_empty() {
                    return (replica, since);
                }
            }
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let s = s.clone();
            tokio::spawn(async move { writer(&s, w, 60).await })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    // a table drop: one delete event per document, from the purge
    assert_eq!(s.delete("/v1/tables/gone").await.0, 204);
    let deadline = Instant::now() + WAIT;
    while s.post("/v1/tables", json!({"name": "gone"})).await.0 != 201 {
        assert!(Instant::now() < deadline, "the drop did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let (mut replica, since) = follower.await.unwrap();
    let last = last_seq(&s).await;
    assert!(last > start);
    let since = read_to(&s, &mut replica, since, last).await;
    assert_eq!(since, last);

    // the replay is every table's state: full documents, keys' ids, nothing of `quiet`
    let full = s.all_documents("full").await;
    assert_eq!(replica.get("full").cloned().unwrap_or_default(), full);
    let keys = s.all_documents("keys").await;
    let replayed: Vec<_> = replica.get("keys").map(|t| t.keys().cloned().collect()).unwrap_or_default();
    assert_eq!(replayed, keys.keys().cloned().collect::<Vec<_>>());
    assert!(replica.get("keys").unwrap().values().all(Value::is_null), "keys mode carries no document");
    assert!(!replica.contains_key("quiet"), "an off table is not in the feed");
    assert!(replica.get("gone").is_none_or(BTreeMap::is_empty), "a dropped table replays empty");
    assert!(!full.is_empty() && !keys.is_empty());

    // the stats agree
    let (_, stats) = s.get("/v1/changes/stats").await;
    assert_eq!(stats["first_seq"], 1);
    assert_eq!(stats["events"], last);
    s.check_ok().await;
}

#[tokio::test]
async fn a_consumer_resumes_after_a_restart_with_no_loss_or_duplicate() {
    let s = TestServer::start().await;
    create(&s, "r", "full").await;
    for i in 0..20 {
        s.put(&format!("/v1/tables/r/documents/{i}"), json!({"i": i})).await;
    }
    let mut replica = Replica::new();
    let (events, next) = page(&s, 0, "&limit=7").await;
    assert_eq!(events.len(), 7);
    let since = apply(&mut replica, &events, 0);
    assert_eq!(since, next);
    let dir = s.stop().await;

    let s = TestServer::start_in(dir, |_| {}).await;
    for i in 20..25 {
        s.put(&format!("/v1/tables/r/documents/{i}"), json!({"i": i})).await;
    }
    s.delete("/v1/tables/r/documents/3").await;
    let last = last_seq(&s).await;
    assert_eq!(last, 26, "seqs go on after the restart");
    let since = read_to(&s, &mut replica, since, last).await;
    assert_eq!(since, 26);
    assert_eq!(replica["r"], s.all_documents("r").await);
}

/// Reads SSE events (`id`, parsed data) from a response until `n` have come.
async fn sse_events(resp: reqwest::Response, n: usize) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut body = resp.bytes_stream();
    let deadline = Instant::now() + WAIT;
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline.into(), body.next()).await.expect("events in time");
        buf.push_str(std::str::from_utf8(&chunk.unwrap().unwrap()).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let (mut id, mut data) = (None, None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().parse::<u64>().unwrap());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = Some(serde_json::from_str::<Value>(v.trim()).unwrap());
                }
            }
            // keep-alive comments carry neither
            if let (Some(id), Some(data)) = (id, data) {
                assert_eq!(data["seq"], id);
                out.push((id, data));
            }
        }
    }
    out
}

#[tokio::test]
async fn sse_streams_events_and_resumes_with_last_event_id() {
    let s = TestServer::start().await;
    create(&s, "sse", "keys").await;
    create(&s, "other", "keys").await;
    for i in 0..5 {
        s.put(&format!("/v1/tables/sse/documents/{i}"), json!({"i": i})).await;
    }
    let url = format!("{}/v1/changes/stream", s.base);
    let resp = s.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let first = sse_events(resp, 3).await;
    assert_eq!(first.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2, 3]);
    // the consumer went away after seq 3; it resumes with Last-Event-ID, and writes made since
    // arrive as they commit
    let resp = s.client.get(&url).header("Last-Event-ID", "3").send().await.unwrap();
    let writes = async {
        for i in 5..8 {
            s.put(&format!("/v1/tables/sse/documents/{i}"), json!({"i": i})).await;
        }
    };
    let (events, ()) = tokio::join!(sse_events(resp, 5), writes);
    assert_eq!(events.iter().map(|e| e.0).collect::<Vec<_>>(), [4, 5, 6, 7, 8]);
    assert_eq!(events[4].1["id"], "7");

    // a table filter, and the query's since
    s.put("/v1/tables/other/documents/x", json!({})).await;
    let resp = s.client.get(format!("{url}?since=2&table=other")).send().await.unwrap();
    let events = sse_events(resp, 1).await;
    assert_eq!((events[0].0, events[0].1["table"].clone()), (9, json!("other")));

    // bad resumption points are problems, not streams
    let r = s.send(Method::GET, "/v1/changes/stream", None, &[("Last-Event-ID", "x")]).await;
    assert!(r.is_problem(400, "invalid_header"), "{}", r.body);

    // an open stream does not hold the server up: shutdown ends it
    let resp = s.client.get(format!("{url}?since=9")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    tokio::time::timeout(WAIT, s.stop()).await.expect("shutdown ends the stream");
    let rest = tokio::time::timeout(WAIT, resp.bytes()).await.expect("the stream ended");
    // what was sent before the end: keep-alive comments at most
    assert!(!rest.map(|b| String::from_utf8_lossy(&b).contains("data:")).unwrap_or(false));
}

#[tokio::test]
async fn table_modes_shape_the_events() {
    let s = TestServer::start().await;
    create(&s, "f", "full").await;
    let (_, def) = s.post("/v1/tables", json!({"name": "k"})).await;
    assert!(def.get("changefeed").is_none(), "keys is the default: {def}");
    create(&s, "o", "off").await;
    s.put("/v1/tables/f/documents/a", json!({"x": 1, "s": "é\n"})).await;
    s.put("/v1/tables/k/documents/a", json!({"x": 1})).await;
    s.put("/v1/tables/o/documents/a", json!({"x": 1})).await;
    s.delete("/v1/tables/f/documents/a").await;
    let (events, next) = page(&s, 0, "").await;
    assert_eq!(next, 3);
    assert_eq!(events[0]["document"], json!({"_id": "a", "x": 1, "s": "é\n"}));
    assert_eq!((events[0]["op"].clone(), events[0]["table"].clone()), (json!("put"), json!("f")));
    assert!(events[1].get("document").is_none());
    assert_eq!((events[2]["op"].clone(), events[2]["table"].clone()), (json!("delete"), json!("f")));
    assert!(events[2].get("document").is_none());

    // PATCH switches a table's mode; events of one write share txn and count
    let (status, def) = s.patch("/v1/tables/o", json!({"changefeed": "full"})).await;
    assert_eq!((status, def["changefeed"].clone()), (StatusCode::OK, json!("full")));
    let (status, _) = s.patch("/v1/tables/k", json!({"changefeed": "off"})).await;
    assert_eq!(status, 200);
    let ops = json!({"operations": [
        {"op": "put", "table": "o", "id": "b", "document": {"y": 2}},
        {"op": "put", "table": "k", "id": "b", "document": {"y": 2}},
        {"op": "put", "table": "f", "id": "b", "document": {"y": 3}},
    ]});
    assert_eq!(s.post("/v1/batch", ops).await.0, 200);
    let (events, _) = page(&s, 3, "").await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["document"], json!({"_id": "b", "y": 2}));
    for e in &events {
        assert_eq!((e["txn"].clone(), e["count"].clone()), (json!(4), json!(2)));
    }
    // a table filter
    let (events, next) = page(&s, 0, "&table=o,k").await;
    assert_eq!((events.len(), next), (2, 5));
    assert_eq!((events[0]["seq"].clone(), events[1]["seq"].clone()), (json!(2), json!(4)));
    assert_eq!(s.patch("/v1/tables/o", json!({"changefeed": "sometimes"})).await.0, 422);
}

#[tokio::test]
async fn a_long_poll_answers_when_an_event_commits() {
    let s = std::sync::Arc::new(TestServer::start().await);
    create(&s, "lp", "keys").await;
    let poll = {
        let s = s.clone();
        tokio::spawn(async move { page(&s, 0, "&wait_ms=60000").await })
    };
    // the poll waits (nothing to see) until the write below commits
    s.put("/v1/tables/lp/documents/a", json!({})).await;
    let (events, next) = tokio::time::timeout(WAIT, poll).await.unwrap().unwrap();
    assert_eq!((events.len(), next), (1, 1));
    // nothing after: an empty page with the same next, after the wait
    let (events, next) = page(&s, 1, "&wait_ms=10").await;
    assert_eq!((events.len(), next), (0, 1));
}

#[tokio::test]
async fn bad_parameters_are_problems() {
    let s = TestServer::start().await;
    for (query, status, code) in [
        ("limit=0", 400, "invalid_request"),
        ("limit=10001", 400, "invalid_request"),
        ("wait_ms=60001", 400, "invalid_request"),
        ("since=-1", 400, "invalid_query"),
        ("since=x", 400, "invalid_query"),
        ("table=a,,b", 400, "invalid_request"),
    ] {
        let r = s.send(Method::GET, &format!("/v1/changes?{query}"), None, &[]).await;
        assert!(r.is_problem(status, code), "{query}: {} {}", r.status, r.body);
    }
    let (status, stats) = s.get("/v1/changes/stats").await;
    assert_eq!((status, stats), (StatusCode::OK, json!({"first_seq": null, "last_seq": 0, "events": 0, "bytes": 0})));
}

#[tokio::test]
async fn retention_removes_old_events_and_an_expired_since_is_gone() {
    let s = TestServer::start_with(|c| {
        c.tasks.retention_interval = Duration::from_secs(1);
        c.tasks.changefeed.max_age = Duration::from_millis(1);
    })
    .await;
    create(&s, "ret", "keys").await;
    for i in 0..10 {
        s.put(&format!("/v1/tables/ret/documents/{}", seg(&i.to_string())), json!({"i": i})).await;
    }
    // every event but the newest goes (the newest stays: seqs go on from it after a restart)
    let deadline = Instant::now() + WAIT;
    let stats = loop {
        let (_, stats) = s.get("/v1/changes/stats").await;
        if stats["first_seq"] == 10 {
            break stats;
        }
        assert!(Instant::now() < deadline, "retention did not run: {stats}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((stats["last_seq"].clone(), stats["events"].clone()), (json!(10), json!(1)));
    let r = s.send(Method::GET, "/v1/changes?since=3", None, &[]).await;
    assert!(r.is_problem(410, "changefeed_expired"), "{}", r.body);
    assert_eq!(r.body["oldest_seq"], 10);
    let r = s.send(Method::GET, "/v1/changes/stream?since=2", None, &[]).await;
    assert!(r.is_problem(410, "changefeed_expired"), "{}", r.body);
    let (events, next) = page(&s, 9, "").await;
    assert_eq!((events.len(), next), (1, 10));
    // since=0 (or none) means "from the oldest kept event", never 410
    let (events, next) = page(&s, 0, "").await;
    assert_eq!((events.len(), next, events[0]["seq"].clone()), (1, 10, json!(10)));
    // a since past the last event was never handed out by this feed: it was reset under the consumer
    for path in ["/v1/changes?since=11", "/v1/changes/stream?since=11"] {
        let r = s.send(Method::GET, path, None, &[]).await;
        assert!(r.is_problem(409, "changefeed_ahead"), "{path}: {}", r.body);
    }
    let (_, tasks) = s.get("/v1/admin/tasks").await;
    let task = tasks["tasks"].as_array().unwrap().iter().find(|t| t["name"] == "changefeed_retention").unwrap().clone();
    assert!(task["removed_total"].as_u64().unwrap() >= 9, "{task}");
    s.check_ok().await;
}
