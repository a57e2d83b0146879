//! Full and failing disks under the real server, injected by powerfs (`tests/powerfs`): what a
//! client and an operator see, and that nothing acknowledged is lost.
//!
//! - a nearly full disk: writes answer 507 `insufficient_storage` before anything is written,
//!   `/ready` says why, reads go on, and writes resume on their own once space returns;
//! - ENOSPC on a journal write, ENOSPC or EIO on an fsync: the store stops taking writes (503
//!   `store_failed`, `/ready` with the reason), reads go on and never show the failed write, and
//!   a restart recovers every acknowledged write with no file edited;
//! - EIO on reads of the documents' table files: 503 `io_error` for what needs them, the rest
//!   answers, and reads recover when the disk does;
//! - a flipped byte in a table file: 503 `data_corrupted`, never served; in the journal: the
//!   open refuses with `data_corrupted` rather than drop acknowledged writes.
//!
//! Needs root, `/dev/fuse` and the powerfs binary (see `mount.rs`: elsewhere each test says so
//! and checks nothing). Run:
//!
//! ```sh
//! cargo build --release --manifest-path tests/powerfs/Cargo.toml
//! MOSAIC_POWERFS=$PWD/tests/powerfs/target/release/powerfs cargo test --test crash disk_faults::
//! ```

use crate::mount::PowerFs;
use crate::process::{BIN, ServerProc, kill, start_with, stop};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Flags of every server here: a small free-space reserve (powerfs reports its capacity), no
/// document cache (so reads reach the disk).
const FLAGS: &[&str] = &["--min-free-disk-mb", "8", "--row-cache-mb", "0"];

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(server: &ServerProc) -> Client {
        Client { http: reqwest::Client::new(), base: server.base.clone() }
    }

    async fn put(&self, id: &str, doc: Value) -> (u16, Value, Option<String>) {
        let r = self.http.put(format!("{}/v1/tables/t/documents/{id}", self.base)).json(&doc).send().await.unwrap();
        let (status, retry) = (r.status().as_u16(), r.headers().get("retry-after").map(|v| v.to_str().unwrap().into()));
        (status, r.json().await.unwrap_or(Value::Null), retry)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn doc(&self, id: &str) -> (u16, Value) {
        self.get(&format!("/v1/tables/t/documents/{id}")).await
    }

    async fn table(&self) {
        let r = self.http.post(format!("{}/v1/tables", self.base)).json(&json!({"name": "t"})).send().await.unwrap();
        assert_eq!(r.status(), 201);
        let index = json!({"name": "by_n", "kind": "range", "fields": ["n"]});
        let r = self.http.post(format!("{}/v1/tables/t/indexes", self.base)).json(&index).send().await.unwrap();
        assert_eq!(r.status(), 201);
    }

    async fn check_ok(&self) {
        let r = self.http.post(format!("{}/v1/admin/check", self.base)).json(&json!({})).send().await.unwrap();
        let report: Value = r.json().await.unwrap();
        assert_eq!(report["ok"], true, "{report}");
    }
}

/// Writes `n` documents `{prefix}{i}` and returns their ids: every one acknowledged.
async fn acknowledged(c: &Client, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{prefix}{i}");
        let (status, body, _) = c.put(&id, json!({"n": i, "prefix": prefix})).await;
        assert_eq!(status, 201, "{body}");
        ids.push(id);
    }
    ids
}

async fn all_there(c: &Client, ids: &[String]) {
    for id in ids {
        let (status, body) = c.doc(id).await;
        assert_eq!(status, 200, "acknowledged {id} is gone: {body}");
        assert_eq!(body["_id"], json!(id));
    }
}

async fn boot(fs: &PowerFs) -> (ServerProc, Client) {
    let server = start_with(&fs.data(), "sync", FLAGS, &reqwest::Client::new()).await;
    let client = Client::new(&server);
    (server, client)
}

#[tokio::test]
async fn a_nearly_full_disk_refuses_writes_with_507_until_space_returns() {
    let Some(fs) = PowerFs::try_mount("dirs") else { return };
    let (_server, c) = boot(&fs).await;
    c.table().await;
    let kept = acknowledged(&c, "a", 5).await;
    // 4 MB free, under the 8 MiB reserve
    let used = fs.status()["used"].as_u64().unwrap();
    fs.ctl(&format!("capacity {}", used + 4_000_000));
    let deadline = Instant::now() + Duration::from_secs(5);
    let (status, body, retry) = loop {
        let answer = c.put("full", json!({"n": 99})).await;
        if ![200, 201].contains(&answer.0) || Instant::now() > deadline {
            break answer;
        }
        // the free space is read at most every 200 ms: a write may still pass meanwhile
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((status, body["code"].as_str()), (507, Some("insufficient_storage")), "{body}");
    assert_eq!(retry.as_deref(), Some("10"));
    let (status, ready) = c.get("/ready").await;
    assert_eq!((status, ready["code"].as_str()), (503, Some("insufficient_storage")), "{ready}");
    // reads go on
    all_there(&c, &kept).await;
    // space returns: writes resume on their own
    fs.ctl("capacity off");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, body, _) = c.put("later", json!({"n": 100})).await;
        if status == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(c.get("/ready").await.0, 200);
    c.check_ok().await;
}

/// A write fault that poisons the store: writes refused with `store_failed`, reads go on, the
/// failed write is never shown, and a restart recovers every acknowledged write.
async fn poisoning_fault(fault: &str, clear: &str) {
    let Some(fs) = PowerFs::try_mount("dirs") else { return };
    let (server, c) = boot(&fs).await;
    c.table().await;
    let mut kept = acknowledged(&c, "a", 10).await;
    fs.ctl(fault);
    let (status, body, _) = c.put("failed", json!({"n": 1000})).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("store_failed")), "{fault}: {body}");
    let (status, body, _) = c.put("after", json!({"n": 1001})).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("store_failed")), "{fault}: {body}");
    let (status, ready) = c.get("/ready").await;
    assert_eq!((status, ready["code"].as_str()), (503, Some("store_failed")), "{fault}: {ready}");
    assert!(ready["detail"].as_str().unwrap().contains("error"), "{ready}");
    // reads go on, and never show a write that was not acknowledged
    all_there(&c, &kept).await;
    assert_eq!(c.doc("failed").await.0, 404);
    assert_eq!(c.doc("after").await.0, 404);
    // the disk recovers; a restart (here after a crash) recovers the store, no file edited
    fs.ctl(clear);
    kill(server);
    let (server, c) = boot(&fs).await;
    assert_eq!(c.get("/ready").await.0, 200);
    all_there(&c, &kept).await;
    assert_eq!(c.doc("after").await.0, 404, "a write refused before it ran was written");
    kept.extend(acknowledged(&c, "b", 3).await);
    all_there(&c, &kept).await;
    c.check_ok().await;
    drop(server);
    let (ok, report) = offline_check(&fs);
    assert!(ok, "{fault}: {report}");
}

fn offline_check(fs: &PowerFs) -> (bool, String) {
    let out = std::process::Command::new(BIN).args(["check", fs.data().to_str().unwrap()]).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn enospc_on_a_journal_write_stops_writes_and_a_restart_recovers() {
    poisoning_fault("fail-write enospc", "fail-write off").await;
}

#[tokio::test]
async fn enospc_on_fsync_stops_writes_and_a_restart_recovers() {
    poisoning_fault("fail-fsync enospc", "fail-fsync off").await;
}

#[tokio::test]
async fn eio_on_fsync_stops_writes_and_a_restart_recovers() {
    poisoning_fault("fail-fsync eio", "fail-fsync off").await;
}

/// The documents' keyspace is the first one fjall creates after its own: `keyspaces/1`.
const ENTITY_TABLES: &str = "data/keyspaces/1/tables";

#[tokio::test]
async fn unreadable_table_files_answer_io_error_and_reads_recover_with_the_disk() {
    let Some(fs) = PowerFs::try_mount("data") else { return };
    let (server, c) = boot(&fs).await;
    c.table().await;
    let kept = acknowledged(&c, "a", 20).await;
    // a graceful stop flushes the documents to table files; the restart reads them from there
    assert!(stop(server));
    // (the open itself reads the table files' indexes: a disk unreadable then stops the start)
    let (_server, c) = boot(&fs).await;
    fs.ctl(&format!("fail-read eio {ENTITY_TABLES}"));
    let (status, body) = c.doc("a3").await;
    assert_eq!((status, body["code"].as_str()), (503, Some("io_error")), "{body}");
    // what does not need those files answers: the catalog, the index
    assert_eq!(c.get("/v1/tables/t").await.0, 200);
    let q = json!({"filter": {"n": {"$gte": 5}}, "fields": ["_id"]});
    let r = c.http.post(format!("{}/v1/tables/t/query", c.base)).json(&q).send().await.unwrap();
    assert_eq!(r.status(), 200, "a covered query reads only the index");
    fs.ctl("fail-read off");
    all_there(&c, &kept).await;
    c.check_ok().await;
}

#[tokio::test]
async fn a_flipped_byte_in_a_table_file_is_reported_never_served() {
    let Some(fs) = PowerFs::try_mount("data") else { return };
    let (server, c) = boot(&fs).await;
    c.table().await;
    acknowledged(&c, "a", 20).await;
    assert!(stop(server));
    let tables = fs.data().join("keyspaces/1/tables");
    let file =
        std::fs::read_dir(&tables).unwrap().map(|e| e.unwrap()).max_by_key(|e| e.metadata().unwrap().len()).unwrap();
    fs.ctl(&format!("flip {ENTITY_TABLES}/{} 40", file.file_name().to_str().unwrap()));
    let (_server, c) = boot(&fs).await;
    for i in 0..20 {
        let (status, body) = c.doc(&format!("a{i}")).await;
        // a document in the damaged block is refused; none is ever served altered
        match status {
            200 => assert_eq!(body["n"], json!(i), "{body}"),
            503 => assert_eq!(body["code"], "data_corrupted", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    let (status, body) = c.doc("a0").await;
    assert_eq!((status, body["code"].as_str()), (503, Some("data_corrupted")), "{body}");
}

#[tokio::test]
async fn a_flipped_byte_in_the_journal_stops_the_open_instead_of_dropping_writes() {
    let Some(fs) = PowerFs::try_mount("data") else { return };
    let (server, c) = boot(&fs).await;
    c.table().await;
    acknowledged(&c, "a", 40).await;
    // a crash leaves the writes in the journal only
    kill(server);
    let journal = std::fs::read(fs.data().join("0.jnl")).unwrap();
    let at = journal.windows(3).position(|w| w == b"a20").expect("a20 in the journal");
    fs.ctl(&format!("flip data/0.jnl {}", at + 1));
    let out = std::process::Command::new(BIN)
        .args(["--data-dir", fs.data().to_str().unwrap(), "--addr", "127.0.0.1:0", "--log", "error"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the journal is damaged"), "{said}");
}
