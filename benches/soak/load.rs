//! The soak's load: every kind of client, each a loop bounded by the deadline and a count.

use super::verify::Acked;
use super::{BoxError, Tally, Target};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

pub struct Settings {
    pub duration: Duration,
    pub writers: usize,
    pub readers: usize,
}

/// Most requests one client sends (the deadline ends it first).
const MAX_REQUESTS: u64 = 50_000_000;
/// Points per line-protocol request.
const LINES: u64 = 500;
/// How long the feed consumers may take to catch up once the load stops.
const CATCH_UP: Duration = Duration::from_secs(300);
/// Line-protocol writers (one series each).
const TS_WRITERS: usize = 4;
const WORDS: [&str; 16] = [
    "graph", "vector", "series", "index", "query", "table", "search", "engine", "store", "change", "feed", "range",
    "point", "write", "read", "merge",
];

/// A small xorshift: the load needs spread, not quality.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn vector(&mut self) -> Vec<f32> {
        (0..8).map(|_| (self.below(2000) as f32) / 1000.0 - 1.0).collect()
    }
}

/// The tables and indexes the load writes to.
pub async fn prepare(target: &Target) -> Result<(), BoxError> {
    let post = |path: &str, body: serde_json::Value| target.http.post(target.url(path)).json(&body).send();
    post("/v1/tables", json!({"name": "docs", "changefeed": "keys"})).await?.error_for_status()?;
    post("/v1/tables", json!({"name": "links", "kind": "edge"})).await?.error_for_status()?;
    for index in [
        json!({"name": "by_age", "kind": "range", "fields": ["age"]}),
        json!({"name": "text_ft", "kind": "fulltext", "fields": ["text"]}),
        json!({"name": "emb", "kind": "vector", "fields": ["emb"], "options": {"dimension": 8, "metric": "cosine"}}),
    ] {
        post("/v1/tables/docs/indexes", index).await?.error_for_status()?;
    }
    Ok(())
}

/// What every client shares.
struct Shared {
    target: Arc<Target>,
    tally: Arc<Tally>,
    acked: Arc<Acked>,
    deadline: Instant,
    /// per document writer: how many documents it has sent (readers pick ids below it)
    progress: Vec<AtomicU64>,
    /// set once every writer has stopped, so the feed consumers can catch up for good
    writers_done: AtomicBool,
}

impl Shared {
    fn running(&self) -> bool {
        Instant::now() < self.deadline
    }

    /// Sends `request`, counts its answer as `kind`; the status if there was one.
    async fn send(&self, kind: &'static str, request: reqwest::RequestBuilder) -> Option<(u16, bytes::Bytes)> {
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let shed = matches!(status, 503 | 429) && response.headers().contains_key("retry-after");
                match response.bytes().await {
                    Ok(body) => {
                        self.tally.answer(kind, status, shed, &body);
                        Some((status, body))
                    }
                    Err(_) => {
                        self.tally.add(kind, "body cut".into());
                        None
                    }
                }
            }
            Err(_) => {
                self.tally.add(kind, "no answer".into());
                None
            }
        }
    }

    fn known_id(&self, rng: &mut Rng) -> String {
        let w = rng.below(self.progress.len() as u64) as usize;
        let n = rng.below(self.progress[w].load(Ordering::Relaxed));
        format!("w{w}-{n}")
    }
}

/// Runs every client until the deadline, then waits for all of them.
pub async fn run(target: &Arc<Target>, settings: &Settings, tally: &Arc<Tally>, acked: &Arc<Acked>) {
    let shared = Arc::new(Shared {
        target: target.clone(),
        tally: tally.clone(),
        acked: acked.clone(),
        deadline: Instant::now() + settings.duration,
        progress: (0..settings.writers).map(|_| AtomicU64::new(0)).collect(),
        writers_done: AtomicBool::new(false),
    });
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..settings.writers {
        writers.spawn(document_writer(shared.clone(), w));
    }
    for w in 0..TS_WRITERS {
        writers.spawn(line_writer(shared.clone(), w));
    }
    let mut others = tokio::task::JoinSet::new();
    for c in 0..settings.readers {
        others.spawn(reader(shared.clone(), c as u64));
    }
    for c in 0..2u64 {
        others.spawn(heavy_reads(shared.clone(), c));
        others.spawn(feed_consumer(shared.clone()));
        others.spawn(leaver(shared.clone(), c));
    }
    while writers.join_next().await.is_some() {}
    shared.writers_done.store(true, Ordering::Release);
    while others.join_next().await.is_some() {}
}

async fn document_writer(s: Arc<Shared>, w: usize) {
    let mut rng = Rng::new(w as u64 + 1);
    let mut n = 0u64;
    while s.running() && n < MAX_REQUESTS {
        // every fifth write replaces one of the writer's earlier documents
        let id = if n % 5 == 4 { format!("w{w}-{}", rng.below(n)) } else { format!("w{w}-{n}") };
        let text: Vec<&str> = (0..6).map(|_| WORDS[rng.below(16) as usize]).collect();
        let doc = json!({"v": n, "age": rng.below(90), "text": text.join(" "), "emb": rng.vector()});
        let request = s.target.http.put(s.target.url(&format!("/v1/tables/docs/documents/{id}"))).json(&doc);
        let answered = s.send("document PUT", request).await;
        match answered {
            Some((status, _)) if (200..300).contains(&status) => s.acked.doc(&id, n, true),
            // refused (shed, or a client error): not applied
            Some(_) => {}
            None => s.acked.doc(&id, n, false),
        }
        n += 1;
        s.progress[w].fetch_max(n, Ordering::Relaxed);
        if n.is_multiple_of(10) {
            // every fifth step replaces a document: the new ids are the others
            let (from, to) = (format!("docs/w{w}-{}", n - 2), format!("docs/w{w}-{}", 5 * rng.below(n / 5)));
            let edge = json!({"_from": from, "_to": to});
            let request = s.target.http.put(s.target.url(&format!("/v1/tables/links/documents/w{w}-{n}"))).json(&edge);
            s.send("edge PUT", request).await;
        }
    }
}

async fn line_writer(s: Arc<Shared>, w: usize) {
    let mut last_us = 0u64;
    let mut sent = 0u64;
    while s.running() && sent < MAX_REQUESTS {
        let now_us = u64::try_from(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros(),
        )
        .unwrap_or(0);
        let mut body = String::with_capacity(64 * LINES as usize);
        for i in 0..LINES {
            last_us = last_us.max(now_us).max(last_us + 1);
            body.push_str(&format!("soak,writer={w} value={} {last_us}\n", (sent * LINES + i) % 1000));
        }
        let request = s.target.http.post(s.target.url("/v1/timeseries/write?precision=us")).body(body);
        match s.send("line protocol", request).await {
            Some((status, _)) if (200..300).contains(&status) => s.acked.points(w, LINES, true),
            Some(_) => {}
            None => s.acked.points(w, LINES, false),
        }
        sent += 1;
    }
}

async fn reader(s: Arc<Shared>, c: u64) {
    let mut rng = Rng::new(1000 + c);
    let mut n = 0u64;
    while s.running() && n < MAX_REQUESTS {
        let id = s.known_id(&mut rng);
        s.send("document GET", s.target.http.get(s.target.url(&format!("/v1/tables/docs/documents/{id}")))).await;
        n += 1;
    }
}

/// Queries, searches, kNN, traversals and PromQL, in turn.
async fn heavy_reads(s: Arc<Shared>, c: u64) {
    let mut rng = Rng::new(2000 + c);
    let mut n = 0u64;
    let http = &s.target.http;
    while s.running() && n < MAX_REQUESTS {
        let (kind, request) = match n % 5 {
            0 => {
                let age = rng.below(88);
                let body = json!({"filter": {"age": {"$gte": age, "$lt": age + 2}}, "limit": 100});
                ("query", http.post(s.target.url("/v1/tables/docs/query")).json(&body))
            }
            1 => {
                let query = format!("{} {}", WORDS[rng.below(16) as usize], WORDS[rng.below(16) as usize]);
                (
                    "search",
                    http.post(s.target.url("/v1/tables/docs/search")).json(&json!({"query": query, "limit": 10})),
                )
            }
            2 => {
                let body = json!({"field": "emb", "vector": rng.vector(), "k": 10});
                ("kNN", http.post(s.target.url("/v1/tables/docs/vector-search")).json(&body))
            }
            3 => {
                let body =
                    json!({"start": format!("docs/{}", s.known_id(&mut rng)), "direction": "any", "max_depth": 3});
                ("traversal", http.post(s.target.url("/v1/graph/traverse")).json(&body))
            }
            _ => {
                let end =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
                let query = [
                    ("query", "sum by (writer) (rate(soak[1m]))".to_owned()),
                    ("start", (end - 300).to_string()),
                    ("end", end.to_string()),
                    ("step", "15".to_owned()),
                ];
                ("PromQL", http.get(s.target.url(&format!("/api/v1/query_range?{}", encoded(&query)))))
            }
        };
        s.send(kind, request).await;
        n += 1;
    }
}

/// A query string of `pairs`.
fn encoded(pairs: &[(&str, String)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// Follows the feed by long-poll; once the writers stopped, reads it to its end and hands over
/// the document ids it saw.
async fn feed_consumer(s: Arc<Shared>) {
    let mut seen = HashSet::new();
    let mut since = 0u64;
    let mut requests = 0u64;
    loop {
        let finishing = !s.running() && s.writers_done.load(Ordering::Acquire);
        let wait = if finishing { 0 } else { 1000 };
        let url = s.target.url(&format!("/v1/changes?since={since}&limit=1000&wait_ms={wait}&table=docs"));
        requests += 1;
        let Some((200, body)) = s.send("changefeed", s.target.http.get(url)).await else {
            if requests > MAX_REQUESTS || Instant::now() > s.deadline + CATCH_UP {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(page) = serde_json::from_slice::<serde_json::Value>(&body) else { continue };
        let events = page["events"].as_array().map_or(&[][..], Vec::as_slice);
        for e in events {
            if let Some(id) = e["id"].as_str() {
                seen.insert(id.to_owned());
            }
        }
        since = page["next"].as_u64().unwrap_or(since);
        if (finishing && events.is_empty()) || Instant::now() > s.deadline + CATCH_UP {
            break;
        }
        if !s.running() && !s.writers_done.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    s.acked.feed(seen);
}

/// Clients that leave: heavy reads dropped after a few milliseconds, and connections that send
/// half a request head and close.
async fn leaver(s: Arc<Shared>, c: u64) {
    let mut rng = Rng::new(3000 + c);
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let addr = s.target.base.trim_start_matches("http://").to_owned();
    let mut n = 0u64;
    while s.running() && n < MAX_REQUESTS {
        let patience = Duration::from_millis(5 + rng.below(45));
        match n % 3 {
            0 => {
                let now = started + 3600;
                let query = [
                    ("query", "rate(soak[5m])".to_owned()),
                    ("start", (started - 60).to_string()),
                    ("end", now.to_string()),
                    ("step", "1".to_owned()),
                ];
                let url = s.target.url(&format!("/api/v1/query_range?{}", encoded(&query)));
                let request = s.target.http.get(url).send();
                let _ = tokio::time::timeout(patience, request).await;
            }
            1 => {
                let request = s
                    .target
                    .http
                    .get(s.target.url("/v1/tables/docs/documents"))
                    .header("accept", "application/x-ndjson")
                    .send();
                let _ = tokio::time::timeout(patience, async {
                    if let Ok(mut r) = request.await {
                        while let Ok(Some(_)) = r.chunk().await {}
                    }
                })
                .await;
            }
            _ => {
                if let Ok(mut tcp) = tokio::net::TcpStream::connect(&addr).await {
                    let _ = tcp.write_all(b"GET /v1/tables HTTP/1.1\r\nHost: 127.0.0.1\r\nAcc").await;
                    tokio::time::sleep(patience).await;
                }
            }
        }
        s.tally.add("left early", "dropped".into());
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
