//! Online backup and restore: a backup taken while writers insert, replace, patch and delete
//! documents (also batches across two indexed tables, edges and time-series points) restores to
//! exactly the writes before its snapshot point, with `check` clean; restores refuse a non-empty
//! directory and a damaged archive, leaving nothing behind; the `mosaicdb backup` / `restore`
//! commands round-trip through the binary and fail on a refused, cut or corrupt stream.

use crate::common::{Rng, TestServer};
use mosaicdb::service::backup::{ArchiveError, BackupError, restore};
use mosaicdb::storage::{StorageConfig, StorageError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");

/// A logical clock: every event the test observes (a write sent, a write acknowledged, the
/// backup sent, its head received) takes the next number, so events order across tasks.
static CLOCK: AtomicU64 = AtomicU64::new(1);

fn tick() -> u64 {
    CLOCK.fetch_add(1, SeqCst)
}

/// One acknowledged write of a key: when it was sent and acknowledged, and the key's state after
/// it (None: absent).
struct Write {
    sent: u64,
    acked: u64,
    after: Option<Value>,
}

/// Every key's writes in order: one writer owns a key and waits for each write's answer before
/// the next, so a key's writes form a chain.
type History = BTreeMap<String, Vec<Write>>;

/// What the writers share with the test.
struct Load {
    stop: AtomicBool,
    /// the backup's head arrived at this tick (u64::MAX before)
    head: AtomicU64,
    /// per writer: writes acknowledged, and those sent after the backup's head arrived
    acked: Vec<AtomicU64>,
    acked_after_head: Vec<AtomicU64>,
}

impl Load {
    fn new(writers: usize) -> Arc<Load> {
        Arc::new(Load {
            stop: AtomicBool::new(false),
            head: AtomicU64::new(u64::MAX),
            acked: (0..writers).map(|_| AtomicU64::new(0)).collect(),
            acked_after_head: (0..writers).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn record(&self, me: usize, history: &mut History, key: String, sent: u64, after: Option<Value>) {
        let acked = tick();
        self.acked[me].fetch_add(1, SeqCst);
        if sent > self.head.load(SeqCst) {
            self.acked_after_head[me].fetch_add(1, SeqCst);
        }
        history.entry(key).or_default().push(Write { sent, acked, after });
    }
}

async fn send(client: &reqwest::Client, method: reqwest::Method, url: String, body: Option<Value>) -> u16 {
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert!(status < 300, "{status} {text}");
    status
}

/// PUT (create or replace), PATCH and DELETE on 16 documents of `docs` of its own.
async fn document_writer(base: String, load: Arc<Load>, me: usize) -> History {
    let client = reqwest::Client::new();
    let (mut rng, mut history, mut state) = (Rng(0x9E37_79B9 + me as u64), History::new(), BTreeMap::new());
    let mut n = 0u64;
    while !load.stop.load(SeqCst) {
        n += 1;
        let id = format!("w{me}-{}", rng.below(16));
        let url = format!("{base}/v1/tables/docs/documents/{id}");
        let current: Option<Value> = state.get(&id).cloned().flatten();
        let sent = tick();
        let after = match (current, rng.below(4)) {
            (Some(_), 0) => {
                assert_eq!(send(&client, reqwest::Method::DELETE, url, None).await, 204);
                None
            }
            (Some(mut doc), 1) => {
                send(&client, reqwest::Method::PATCH, url, Some(json!({"p": n}))).await;
                doc["p"] = json!(n);
                Some(doc)
            }
            _ => {
                let doc = json!({"w": me, "v": n, "g": n % 7, "pad": "d".repeat(50 + (n % 200) as usize)});
                send(&client, reqwest::Method::PUT, url, Some(doc.clone())).await;
                Some(doc)
            }
        };
        state.insert(id.clone(), after.clone());
        load.record(me, &mut history, format!("docs/{id}"), sent, after);
    }
    history
}

/// Batches that write (or delete) a pair of documents in `pa` and `pb`, both indexed: a restored
/// pair is whole or absent.
async fn batch_writer(base: String, load: Arc<Load>, me: usize) -> History {
    let client = reqwest::Client::new();
    let (mut rng, mut history, mut state) = (Rng(0x51_7CC1 + me as u64), History::new(), BTreeMap::new());
    let mut n = 0u64;
    while !load.stop.load(SeqCst) {
        n += 1;
        let k = rng.below(8);
        let exists = state.get(&k).copied().unwrap_or(false);
        let sent = tick();
        let (ops, after) = if exists && rng.below(3) == 0 {
            let ops: Vec<Value> =
                ["pa", "pb"].iter().map(|t| json!({"op": "delete", "table": t, "id": format!("p{k}")})).collect();
            (ops, None)
        } else {
            let doc = json!({"v": n, "k": k});
            let ops: Vec<Value> = ["pa", "pb"]
                .iter()
                .map(|t| json!({"op": "put", "table": t, "id": format!("p{k}"), "document": doc}))
                .collect();
            (ops, Some(doc))
        };
        send(&client, reqwest::Method::POST, format!("{base}/v1/batch"), Some(json!({"operations": ops}))).await;
        state.insert(k, after.is_some());
        load.record(me, &mut history, format!("pair/p{k}"), sent, after);
    }
    history
}

/// Edges between five vertices: created, moved, deleted.
async fn edge_writer(base: String, load: Arc<Load>, me: usize) -> History {
    let client = reqwest::Client::new();
    let (mut rng, mut history, mut state) = (Rng(0xED6E + me as u64), History::new(), BTreeMap::new());
    let mut n = 0u64;
    while !load.stop.load(SeqCst) {
        n += 1;
        let id = format!("e{}", rng.below(8));
        let url = format!("{base}/v1/tables/links/documents/{id}");
        let exists = state.get(&id).copied().unwrap_or(false);
        let sent = tick();
        let after = if exists && rng.below(3) == 0 {
            send(&client, reqwest::Method::DELETE, url, None).await;
            None
        } else {
            let (from, to) = (rng.below(5), rng.below(5));
            let edge = json!({"_from": format!("vtx/v{from}"), "_to": format!("vtx/v{to}"), "n": n});
            send(&client, reqwest::Method::PUT, url, Some(edge.clone())).await;
            Some(edge)
        };
        state.insert(id.clone(), after.is_some());
        load.record(me, &mut history, format!("links/{id}"), sent, after);
    }
    history
}

/// Time-series writes: the n-th adds a point at ts n to the series h1 and h2 of `cpu`, so the
/// state after it is "points 1..=n in both".
async fn point_writer(base: String, load: Arc<Load>, me: usize) -> History {
    let client = reqwest::Client::new();
    let mut history = History::new();
    let mut n = 0i64;
    while !load.stop.load(SeqCst) {
        n += 1;
        let sent = tick();
        let points = json!({"points": [{"entity": "h1", "ts": n, "value": n}, {"entity": "h2", "ts": n, "value": -n}]});
        send(&client, reqwest::Method::POST, format!("{base}/v1/timeseries/cpu/points"), Some(points)).await;
        load.record(me, &mut history, "cpu".into(), sent, Some(json!(n)));
    }
    history
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every document of a table, by id (without `_id`).
async fn all_documents(s: &TestServer, table: &str) -> BTreeMap<String, Value> {
    let mut docs = s.all_documents(table).await;
    for doc in docs.values_mut() {
        doc.as_object_mut().unwrap().remove("_id");
    }
    docs
}

/// The timestamps of one series.
async fn series(s: &TestServer, entity: &str) -> Vec<i64> {
    let (status, page) = s.get(&format!("/v1/timeseries/cpu/points?entity={entity}&limit=100000")).await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{page}");
    page["points"].as_array().unwrap().iter().map(|p| p["ts"].as_i64().unwrap()).collect()
}

async fn create(s: &TestServer, path: &str, body: Value) {
    let (status, answer) = s.post(path, body).await;
    assert!(status == 201 || status == 200, "{status} {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_write_load_restores_exactly_the_writes_before_its_snapshot() {
    let s = TestServer::start().await;
    for (table, kind) in [("docs", "document"), ("pa", "document"), ("pb", "document"), ("vtx", "document")] {
        create(&s, "/v1/tables", json!({"name": table, "kind": kind})).await;
    }
    create(&s, "/v1/tables", json!({"name": "links", "kind": "edge"})).await;
    create(&s, "/v1/tables/docs/indexes", json!({"name": "by_g", "kind": "hash", "fields": ["g"]})).await;
    create(&s, "/v1/tables/docs/indexes", json!({"name": "by_v", "kind": "range", "fields": ["v"]})).await;
    for t in ["pa", "pb"] {
        create(&s, &format!("/v1/tables/{t}/indexes"), json!({"name": "by_v", "kind": "unique", "fields": ["v"]}))
            .await;
    }
    for v in 0..5 {
        s.put(&format!("/v1/tables/vtx/documents/v{v}"), json!({"v": v})).await;
    }
    // enough data that the archive outlasts the socket and channel buffers while nobody reads it
    create(&s, "/v1/tables", json!({"name": "bulk"})).await;
    let bulk: String =
        (0..12_000).map(|i| format!("{{\"_id\":\"b{i}\",\"i\":{i},\"pad\":\"{}\"}}\n", "b".repeat(900))).collect();
    let r = s.raw(reqwest::Method::POST, "/v1/tables/bulk/import", "application/x-ndjson", bulk).await;
    assert_eq!(r.body["inserted"], 12_000, "{}", r.body);

    let writers = 6;
    let load = Load::new(writers);
    let mut tasks = Vec::new();
    for me in 0..3 {
        tasks.push(tokio::spawn(document_writer(s.base.clone(), load.clone(), me)));
    }
    tasks.push(tokio::spawn(batch_writer(s.base.clone(), load.clone(), 3)));
    tasks.push(tokio::spawn(edge_writer(s.base.clone(), load.clone(), 4)));
    tasks.push(tokio::spawn(point_writer(s.base.clone(), load.clone(), 5)));
    wait_until("every writer has written", || load.acked.iter().all(|n| n.load(SeqCst) >= 10)).await;

    // uncompressed, so that the archive (11 MB) cannot sit in the buffers while it is not read
    let identity = reqwest::Client::builder().no_gzip().build().unwrap();
    let backup_sent = tick();
    let mut response = identity.post(format!("{}/v1/admin/backup", s.base)).send().await.unwrap();
    let backup_head = tick();
    load.head.store(backup_head, SeqCst);
    assert_eq!(response.status(), 200);
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert_eq!(header("content-type"), "application/octet-stream");
    assert_eq!(header("x-mosaic-backup-format"), "1");
    let snapshot_at = header("x-mosaic-snapshot-at");
    assert!(
        header("content-disposition").starts_with("attachment; filename=\"mosaicdb-"),
        "{}",
        header("content-disposition")
    );
    // the archive streams, but is not read on: writes go on meanwhile (nothing holds the
    // committer up)
    let mut archive = response.chunk().await.unwrap().unwrap().to_vec();
    wait_until("every writer has written after the snapshot", || {
        load.acked_after_head.iter().all(|n| n.load(SeqCst) >= 10)
    })
    .await;
    while let Some(chunk) = response.chunk().await.unwrap() {
        archive.extend_from_slice(&chunk);
    }
    assert!(archive.len() > 10 << 20, "{}", archive.len());
    wait_until("every writer has written after the archive", || {
        load.acked_after_head.iter().all(|n| n.load(SeqCst) >= 20)
    })
    .await;
    load.stop.store(true, SeqCst);
    let mut history = History::new();
    for task in tasks {
        history.extend(task.await.unwrap());
    }
    s.check_ok().await;

    let target = tempfile::tempdir().unwrap();
    let restored =
        restore(std::io::Cursor::new(archive.clone()), crate::common::storage_config(target.path())).await.unwrap();
    assert!(restored.check.ok, "{:?}", restored.check);
    assert_eq!(restored.header.created_at, snapshot_at);
    assert_eq!(restored.summary.bytes, archive.len() as u64);
    let r = TestServer::start_in(target, |_| {}).await;

    // what the restored server holds, per history key
    let mut found: BTreeMap<String, Option<Value>> = BTreeMap::new();
    for (id, doc) in all_documents(&r, "docs").await {
        found.insert(format!("docs/{id}"), Some(doc));
    }
    for (id, doc) in all_documents(&r, "links").await {
        found.insert(format!("links/{id}"), Some(doc));
    }
    let (pa, pb) = (all_documents(&r, "pa").await, all_documents(&r, "pb").await);
    assert_eq!(pa, pb, "a batch was restored in part");
    for (id, doc) in pa {
        found.insert(format!("pair/{id}"), Some(doc));
    }
    let (h1, h2) = (series(&r, "h1").await, series(&r, "h2").await);
    assert_eq!(h1, h2, "a time-series write was restored in part");
    assert_eq!(h1, (1..=h1.len() as i64).collect::<Vec<_>>(), "points are a prefix of the writes");
    if !h1.is_empty() {
        found.insert("cpu".into(), Some(json!(h1.len())));
    }
    for key in found.keys() {
        assert!(history.contains_key(key), "{key} was restored but never written");
    }

    let mut excluded = 0;
    for (key, writes) in &history {
        // writes acknowledged before the backup was asked for are in; writes sent after its
        // head arrived are out; those in between may go either way
        let must = writes.iter().take_while(|w| w.acked < backup_sent).count();
        let may = writes.iter().take_while(|w| w.sent < backup_head).count();
        let state = |k: usize| if k == 0 { None } else { writes[k - 1].after.as_ref() };
        let got = found.get(key).and_then(Option::as_ref);
        assert!(
            (must..=may).any(|k| state(k) == got),
            "{key}: restored {got:?}, but the state after write {must}..={may} of {} was expected",
            writes.len()
        );
        if state(writes.len()) != got {
            excluded += 1;
        }
    }
    assert!(excluded > 0, "no write after the snapshot point was seen to be left out");
    let (status, info) = r.get("/v1/tables/bulk").await;
    assert_eq!((status.as_u16(), &info["documents"]), (200, &json!(12_000)));
    let (_, doc) = r.get("/v1/tables/bulk/documents/b11999").await;
    assert_eq!(doc, json!({"_id": "b11999", "i": 11999, "pad": "b".repeat(900)}));
    // the indexes came along: a query served by the unique index of `pa`
    let (status, _) = r.post("/v1/tables/pa/query", json!({"filter": {"v": 1}, "allow_scan": false})).await;
    assert_eq!(status, 200);
    r.check_ok().await;
}

/// Sends a backup request over a plain socket and reads until the answer's head is in.
fn ask_for_backup(addr: &str) -> (std::net::TcpStream, Vec<u8>) {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    tcp.write_all(b"POST /v1/admin/backup HTTP/1.1\r\nhost: localhost\r\ncontent-length: 0\r\n\r\n").unwrap();
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut buf = [0u8; 1024];
        let n = tcp.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"), "{}", String::from_utf8_lossy(&got));
    (tcp, got)
}

async fn backups_running(s: &TestServer) -> u64 {
    s.get("/v1/info").await.1["backups_running"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_ends_when_its_client_goes_away_or_stops_reading() {
    let s = TestServer::start_with(|c| c.limits.timeout = Duration::from_secs(1)).await;
    create(&s, "/v1/tables", json!({"name": "bulk"})).await;
    let bulk: String = (0..8_000).map(|i| format!("{{\"_id\":\"b{i}\",\"pad\":\"{}\"}}\n", "p".repeat(1000))).collect();
    let r = s.raw(reqwest::Method::POST, "/v1/tables/bulk/import", "application/x-ndjson", bulk).await;
    assert_eq!(r.body["inserted"], 8_000, "{}", r.body);
    let addr = s.base.trim_start_matches("http://").to_owned();

    // a client that leaves after the head: the backup stops, its snapshot is let go
    let (tcp, _) = tokio::task::spawn_blocking({
        let addr = addr.clone();
        move || ask_for_backup(&addr)
    })
    .await
    .unwrap();
    // 8 MB cannot all wait in the buffers: the backup is under way
    assert_eq!(backups_running(&s).await, 1);
    drop(tcp);
    let deadline = Instant::now() + Duration::from_secs(60);
    while backups_running(&s).await != 0 {
        assert!(Instant::now() < deadline, "the backup outlived its client");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // a client that stays but reads nothing: after the request timeout (1 s) without progress
    // the backup ends, and the body is cut short — no last chunk, so no reader takes it as whole
    let (mut tcp, head) = tokio::task::spawn_blocking(move || ask_for_backup(&addr)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while backups_running(&s).await != 0 {
        assert!(Instant::now() < deadline, "the backup outlived its stalled client");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let received = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut all = head;
        let mut buf = vec![0u8; 1 << 16];
        // to the end of the connection (or its reset)
        while let Ok(n) = tcp.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    })
    .await
    .unwrap();
    assert!(received.len() > 1 << 20, "{}", received.len());
    assert!(!received.ends_with(b"\r\n0\r\n\r\n"), "the cut body ended like a whole one");
    s.check_ok().await;
}

async fn small_archive(s: &TestServer) -> Vec<u8> {
    s.create_table("t").await;
    create(s, "/v1/tables/t/indexes", json!({"name": "by_x", "kind": "range", "fields": ["x"]})).await;
    for i in 0..50 {
        s.put(&format!("/v1/tables/t/documents/d{i}"), json!({"x": i})).await;
    }
    let response = s.client.post(format!("{}/v1/admin/backup", s.base)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_restore_refuses_a_non_empty_directory_and_a_damaged_archive_and_leaves_nothing() {
    let s = TestServer::start().await;
    let archive = small_archive(&s).await;
    let dir = tempfile::tempdir().unwrap();

    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let err = restore(std::io::Cursor::new(archive.clone()), StorageConfig::new(dir.path())).await.unwrap_err();
    assert!(matches!(err, BackupError::Storage(StorageError::NotEmpty(_))), "{err}");
    assert_eq!(entries(dir.path()), ["notes.txt"], "a refused restore touches nothing");
    std::fs::remove_file(dir.path().join("notes.txt")).unwrap();

    // a flipped byte in the middle (found at the end, by the checksum or the framing), a cut
    // archive: the loaded records are removed, an empty directory stays empty, an absent one absent
    let mut flipped = archive.clone();
    flipped[archive.len() / 2] ^= 0x20;
    let cut = archive[..archive.len() - 1].to_vec();
    for (damaged, truncated) in [(flipped, false), (cut, true)] {
        let err = restore(std::io::Cursor::new(damaged.clone()), StorageConfig::new(dir.path())).await.unwrap_err();
        assert!(matches!(err, BackupError::Archive(_)), "{err}");
        assert_eq!(truncated, matches!(err, BackupError::Archive(ArchiveError::Truncated)), "{err}");
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
        let absent = dir.path().join("new");
        restore(std::io::Cursor::new(damaged), StorageConfig::new(&absent)).await.unwrap_err();
        assert!(!absent.exists());
    }

    let restored = restore(std::io::Cursor::new(archive), StorageConfig::new(dir.path().join("new"))).await.unwrap();
    assert!(restored.check.ok);
    assert_eq!(restored.check.checked.documents, 50);
    // a directory with an unfinished restore's marker does not open
    let target = dir.path().join("new");
    std::fs::write(target.join(mosaicdb::storage::RESTORE_MARKER), "").unwrap();
    let mut config = mosaicdb::server::ServerConfig::new(&target);
    config.addr = "127.0.0.1:0".parse().unwrap();
    let refused = mosaicdb::server::Server::start(config).await.err().unwrap();
    assert!(refused.to_string().contains("unfinished restore"), "{refused}");
}

/// Runs the binary with `args` (stdout to `stdout` if given); returns its status, stdout, stderr.
async fn run(
    args: Vec<String>,
    stdout: Option<std::fs::File>,
    env: Vec<(&'static str, String)>,
) -> (bool, String, String) {
    tokio::task::spawn_blocking(move || {
        let mut command = Command::new(BIN);
        command.args(&args).envs(env).stderr(Stdio::piped());
        let output = match stdout {
            Some(file) => command.stdout(file).output(),
            None => command.stdout(Stdio::piped()).output(),
        }
        .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (output.status.success(), text(&output.stdout), text(&output.stderr))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_backs_up_and_restores_and_fails_on_a_refused_cut_or_corrupt_stream() {
    let s = TestServer::start().await;
    let archive = small_archive(&s).await;
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("db.backup");
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();

    let out = std::fs::File::create(&file).unwrap();
    let (ok, _, stderr) = run(vec!["backup".into(), "--url".into(), format!("{}/", s.base)], Some(out), vec![]).await;
    assert!(ok, "{stderr}");
    assert!(stderr.contains("backup of 1") && stderr.contains("sha256 "), "{stderr}");
    let target = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = run(vec!["restore".into(), path(&file), path(target.path())], None, vec![]).await;
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((report["ok"].clone(), report["checked"]["documents"].clone()), (json!(true), json!(50)), "{report}");
    let r = TestServer::start_in(target, |_| {}).await;
    assert_eq!(all_documents(&r, "t").await, all_documents(&s, "t").await);

    // the same again into the now non-empty directory: refused
    let (ok, _, stderr) = run(vec!["restore".into(), path(&file), path(r.dir.path())], None, vec![]).await;
    assert!(!ok && stderr.contains("not empty"), "{stderr}");
    // a corrupt file, read from stdin: refused, nothing left
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    let absent = work.path().join("absent");
    let (ok, stderr) = tokio::task::spawn_blocking({
        let absent = absent.clone();
        move || {
            use std::io::Write;
            let mut child = Command::new(BIN)
                .args(["restore", "-", absent.to_str().unwrap()])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&bytes).unwrap();
            let output = child.wait_with_output().unwrap();
            (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
        }
    })
    .await
    .unwrap();
    assert!(!ok && stderr.contains("restore failed"), "{stderr}");
    assert!(!absent.exists());

    // a refusal: the problem's detail and code
    let sink = std::fs::File::create(work.path().join("refused")).unwrap();
    let (ok, _, stderr) =
        run(vec!["backup".into(), "--url".into(), format!("{}/elsewhere", s.base)], Some(sink), vec![]).await;
    assert!(!ok && stderr.contains("404") && stderr.contains("route_not_found"), "{stderr}");

    // a server that cuts the stream, or sends a damaged one; the key goes along as a bearer token
    let mut flipped = archive.clone();
    flipped[archive.len() - 40] ^= 0x04;
    for (body, expected) in [(archive[..archive.len() / 2].to_vec(), "truncated"), (flipped, "corrupt")] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut tcp, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8];
                tcp.read_exact(&mut byte).unwrap();
                head.push(byte[0]);
            }
            tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n\r\n")
                .unwrap();
            tcp.write_all(&body).unwrap();
            tcp.shutdown(std::net::Shutdown::Write).unwrap();
            String::from_utf8_lossy(&head).to_lowercase()
        });
        let sink = std::fs::File::create(work.path().join("cut")).unwrap();
        let env = vec![("MOSAIC_API_KEY", "k-123".to_owned())];
        let (ok, _, stderr) = run(vec!["backup".into(), "--url".into(), url], Some(sink), env).await;
        assert!(!ok && stderr.contains(expected), "{stderr}");
        let head = fake.join().unwrap();
        assert!(head.starts_with("post /v1/admin/backup http/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nauthorization: bearer k-123\r\n"), "{head}");
    }
}

/// Every key of the families that hold data (not the catalog's run records or the change feed),
/// in display form with its decoded value: two stores with equal dumps hold the same bytes.
fn dump(config: StorageConfig) -> String {
    let mut out = Vec::new();
    for family in ["entity", "idx", "ridx", "ftidx", "ftstat", "graph", "ts", "vec"] {
        mosaicdb::tools::inspect(config.clone(), family, &mut out).unwrap();
    }
    String::from_utf8(out).unwrap()
}

/// A backup of an embedded (fjall) server restores into PostgreSQL with the binary
/// (`restore --backend postgres`), serves the same answers there, and its backup restores into
/// fjall again holding the very keys and values the first server held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_moves_from_fjall_to_postgresql_and_back_byte_for_byte() {
    use mosaicdb::storage::Backend;
    let Some(url) = crate::common::postgres::fresh_database("a_backup_moves_between_backends") else { return };
    let s = TestServer::start_with(|c| c.storage.backend = Backend::Embedded).await;
    s.create_table("t").await;
    for (name, kind, fields) in [("by_x", "range", json!(["x"])), ("ft", "fulltext", json!(["text"]))] {
        create(&s, "/v1/tables/t/indexes", json!({"name": name, "kind": kind, "fields": fields})).await;
    }
    for i in 0..120 {
        let text = format!("document {i} about {}", ["rivers", "mountains", "cities"][i % 3]);
        s.put(&format!("/v1/tables/t/documents/d{i}"), json!({"x": i, "text": text})).await;
    }
    create(&s, "/v1/tables", json!({"name": "links", "kind": "edge"})).await;
    for i in 0..40 {
        let edge = json!({"_from": format!("t/d{i}"), "_to": format!("t/d{}", (i * 7) % 120)});
        assert_eq!(s.put(&format!("/v1/tables/links/documents/e{i}"), edge).await.0, 201);
    }
    let points: Vec<Value> =
        (0..200).map(|i| json!({"entity": format!("h{}", i % 4), "ts": i * 1000, "value": i})).collect();
    assert_eq!(s.post("/v1/timeseries/cpu/points", json!({ "points": points })).await.0, 200);
    let search = json!({"query": "rivers", "limit": 5});
    let answers = |s: &TestServer| {
        let (base, search) = (s.base.clone(), search.clone());
        let client = s.client.clone();
        async move {
            let get = |path: String| {
                let client = client.clone();
                async move { client.get(path).send().await.unwrap().json::<Value>().await.unwrap() }
            };
            let found = client.post(format!("{base}/v1/tables/t/search")).json(&search).send().await.unwrap();
            let found: Value = found.json().await.unwrap();
            (
                found["hits"].clone(),
                get(format!("{base}/v1/graph/neighbors?vertex=t%2Fd3&direction=any&limit=10")).await["neighbors"]
                    .clone(),
                get(format!("{base}/v1/timeseries/cpu/points?entity=h1&limit=1000")).await["points"].clone(),
            )
        }
    };
    let before = answers(&s).await;
    assert!(!before.0.as_array().unwrap().is_empty() && !before.1.as_array().unwrap().is_empty(), "{before:?}");
    let documents = all_documents(&s, "t").await;
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("fjall.backup");
    let response = s.client.post(format!("{}/v1/admin/backup", s.base)).send().await.unwrap();
    std::fs::write(&file, response.bytes().await.unwrap()).unwrap();
    let fjall_dir = s.stop().await;

    // into PostgreSQL with the binary
    let unused = work.path().join("unused");
    let args = ["restore", file.to_str().unwrap(), unused.to_str().unwrap(), "--backend", "postgres"];
    let (ok, stdout, stderr) =
        run(args.map(String::from).to_vec(), None, vec![("MOSAIC_POSTGRES_URL", url.clone())]).await;
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["ok"], json!(true), "{report}");
    assert!(stderr.contains("the PostgreSQL database"), "{stderr}");
    let pg_url = url.clone();
    let p = TestServer::start_with(move |c| c.storage.backend = Backend::Postgres { url: pg_url }).await;
    assert_eq!(all_documents(&p, "t").await, documents);
    assert_eq!(answers(&p).await, before);
    p.check_ok().await;
    let response = p.client.post(format!("{}/v1/admin/backup", p.base)).send().await.unwrap();
    let archive = response.bytes().await.unwrap().to_vec();
    p.stop().await;

    // and back into fjall: the same keys and values as the first server's
    let back = tempfile::tempdir().unwrap();
    let restored = restore(std::io::Cursor::new(archive), StorageConfig::new(back.path())).await.unwrap();
    assert!(restored.check.ok, "{:?}", restored.check);
    let original = dump(StorageConfig::new(fjall_dir.path()));
    assert!(original.lines().count() > 300, "{original}");
    assert_eq!(dump(StorageConfig::new(back.path())), original);
    let mut on_postgres = StorageConfig::new(work.path());
    on_postgres.backend = Backend::Postgres { url };
    assert_eq!(dump(on_postgres), original);
}
