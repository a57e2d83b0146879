//! The audit's descriptor flood (issue 51): thousands of connections that send half a request
//! head, against the binary under a low open-file limit and small memtables (so that flushes and
//! journal rotations need new files while the flood lasts). Without a cap the connections took
//! every descriptor and the store poisoned itself on its next flush; with it, the server stops
//! accepting at `--max-connections` (the limit less the store's reserve), the header timeout
//! closes the half-open connections, and writes are acknowledged during and after the flood.
#![cfg(target_os = "linux")]

use crate::spawned::Spawned;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The server's open-file limit: 768 connections at most, 256 descriptors kept for the store.
const OPEN_FILES: u64 = 1024;
const CAP: i64 = 768;
/// Half-open connections, nearly three times the limit.
const FLOOD: usize = 3000;

/// The value of a metric line `name{labels} value` (the first whose name and labels start so).
fn metric(text: &str, prefix: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// What became of one flood connection.
#[derive(Debug, PartialEq)]
enum Fate {
    /// the server closed it (FIN or reset) without answering
    Closed,
    /// never connected within the bound
    NoConnect,
    /// still open at the bound
    Open,
    /// the server answered something
    Answered,
}

async fn half_open(addr: String) -> Fate {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
    let Ok(Ok(mut tcp)) = tokio::time::timeout_at(deadline, tokio::net::TcpStream::connect(&addr)).await else {
        return Fate::NoConnect;
    };
    // a request head that never ends
    if tcp.write_all(b"GET /v1/tables HTTP/1.1\r\nhost: localhost\r\nx-slow: ").await.is_err() {
        return Fate::Closed;
    }
    let mut buf = [0u8; 256];
    match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => Fate::Closed,
        Ok(Ok(_)) => Fate::Answered,
        Err(_) => Fate::Open,
    }
}

async fn put(client: &reqwest::Client, base: &str, id: &str, body: &Value) -> u16 {
    let url = format!("{base}/v1/tables/t/documents/{id}");
    client.put(url).json(body).send().await.map(|r| r.status().as_u16()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_under_a_low_descriptor_limit_leaves_writes_working() {
    // the flood's own sockets need descriptors in this process
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum },
    );
    assert!(limit.maximum.is_none_or(|m| m > FLOOD as u64 + 512), "this test needs {FLOOD} descriptors");
    let mut server = Spawned::start(
        &["--memtable-mb", "1", "--durability", "buffered", "--header-timeout-secs", "2"],
        Some(OPEN_FILES),
    );
    server.wait_listening();
    let base = format!("http://{}", server.addr);
    // one keep-alive connection, opened before the flood (the pool reuses it)
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    let r = client.post(format!("{base}/v1/tables")).json(&json!({"name": "t"})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    assert!(server.log().contains("max_connections=768"), "{}", server.log());

    let flood: Vec<_> = (0..FLOOD).map(|_| tokio::spawn(half_open(server.addr.clone()))).collect();
    // the server is at its cap while the flood lasts
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
        if metric(&text, "mosaicdb_http_connection_limit_reached_total") > 0.0 {
            assert!(metric(&text, "mosaicdb_http_connections ") <= CAP as f64, "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "the cap was never reached: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // writes go on meanwhile: ~4 MB of documents, four 1 MiB memtables and more to flush
    let filler = "x".repeat(2000);
    let mut acked = Vec::new();
    for i in 0..2000 {
        let id = format!("d{i}");
        assert_eq!(put(&client, &base, &id, &json!({"i": i, "filler": filler})).await, 201, "{}", server.log());
        acked.push(id);
    }
    let r = client.get(format!("{base}/ready")).send().await.unwrap();
    assert_eq!(r.status(), 200, "ready during the flood");

    // a new client waits in the listen queue, and is served once timeouts free places
    let fresh = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let r = fresh.get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);

    let mut fates = Vec::new();
    for f in flood {
        fates.push(f.await.unwrap());
    }
    let closed = fates.iter().filter(|f| **f == Fate::Closed).count();
    assert_eq!(closed, FLOOD, "every half-open connection is closed by the header timeout: {:?}", {
        let mut other: Vec<_> = fates.iter().filter(|f| **f != Fate::Closed).collect();
        other.dedup();
        other
    });

    // afterwards: new connections, writes acknowledged, everything read back, ready
    let after = reqwest::Client::new();
    for i in 2000..2200 {
        let id = format!("d{i}");
        assert_eq!(put(&after, &base, &id, &json!({"i": i, "filler": filler})).await, 201);
        acked.push(id);
    }
    for (i, id) in acked.iter().enumerate() {
        let r = after.get(format!("{base}/v1/tables/t/documents/{id}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{id}");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["i"], i, "{id}");
    }
    let r = after.get(format!("{base}/ready")).send().await.unwrap();
    assert_eq!(r.status(), 200, "ready after the flood: {}", r.text().await.unwrap());
    let text = after.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metric(&text, "mosaicdb_storage_table_files") > 0.0, "memtables were flushed: {text}");
    assert!(metric(&text, "mosaicdb_http_connections_timed_out_total{phase=\"header\"}") >= FLOOD as f64, "{text}");
    assert_eq!(metric(&text, "mosaicdb_http_connections_refused_total{reason=\"accept_error\"}"), 0.0, "{text}");
    assert!(metric(&text, "mosaicdb_http_connections_accepted_total") >= FLOOD as f64, "{text}");
    let log = server.log();
    assert!(log.contains("connection limit reached"), "{log}");
    assert!(!log.contains("Too many open files"), "{log}");
    // and the store closes cleanly
    server.stop();
}
