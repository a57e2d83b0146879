//! The server out of descriptors for a while (issue 51): the storage engine's memtable flush
//! cannot create its table file, the engine stops, and the server neither dies nor refuses writes
//! until a restart — writes answer 503 `store_recovering` with `Retry-After` while it lasts and
//! are taken again once descriptors are back, with every acknowledged write there.
//!
//! The shortage is made from outside: the test lowers the server process's soft descriptor limit
//! (`prlimit`) to its lowest free descriptor, and raises it back. Requests go over one
//! connection opened before, which needs no new descriptor.
#![cfg(target_os = "linux")]

use crate::spawned::Spawned;
use rustix::process::{Pid, Resource, Rlimit, prlimit};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");

/// The lowest descriptor number `pid` has free.
fn lowest_free_fd(pid: u32) -> u64 {
    let used: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|n| !used.contains(n)).unwrap()
}

fn body(i: u32) -> Value {
    // about 8 KiB: a few hundred writes fill a 1 MiB memtable
    let text: String = (0..8000u32).map(|j| char::from(b'a' + ((i * 7 + j * 13) % 26) as u8)).collect();
    json!({"n": i, "text": text})
}

struct Server {
    spawned: Spawned,
    base: String,
    client: reqwest::Client,
}

impl Server {
    async fn put(&self, i: u32) -> (u16, Option<String>, Value) {
        let r =
            self.client.put(format!("{}/v1/tables/t/documents/d{i}", self.base)).json(&body(i)).send().await.unwrap();
        let status = r.status().as_u16();
        let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        (status, retry, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(format!("{}{path}", self.base)).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn writes_are_refused_while_descriptors_are_short_and_taken_again_after() {
    let spawned = Spawned::start(&["--memtable-mb", "1", "--cache-mb", "8"], None);
    // one connection, opened now and kept: the server cannot accept another while short
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).timeout(Duration::from_secs(60)).build().unwrap();
    let base = format!("http://{}", spawned.addr);
    let mut server = Server { spawned, base, client };
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.client.get(format!("{}/ready", server.base)).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = server.client.post(format!("{}/v1/tables", server.base)).json(&json!({"name": "t"})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let index = json!({"name": "by_n", "kind": "range", "fields": ["n"]});
    let r = server.client.post(format!("{}/v1/tables/t/indexes", server.base)).json(&index).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // every write's fate: true = acknowledged
    let mut fate = std::collections::BTreeMap::new();
    let mut i = 0;
    for _ in 0..50 {
        assert_eq!(server.put(i).await.0, 201);
        fate.insert(i, true);
        i += 1;
    }

    // Short of descriptors: writes are acknowledged until a flush fails, then refused.
    let pid = Pid::from_raw(server.spawned.child.id() as i32).unwrap();
    let limit = prlimit(Some(pid), Resource::Nofile, Rlimit { current: None, maximum: None }).ok();
    let limit = limit.unwrap_or_else(|| rustix::process::getrlimit(Resource::Nofile));
    let short = Rlimit { current: Some(lowest_free_fd(server.spawned.child.id())), maximum: limit.maximum };
    prlimit(Some(pid), Resource::Nofile, short).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (retry, problem) = loop {
        assert!(Instant::now() < deadline, "no write refused after {i} writes");
        match server.put(i).await {
            (201, _, _) => {
                fate.insert(i, true);
            }
            (503, retry, problem) if problem["code"] == "store_recovering" => {
                fate.insert(i, false);
                break (retry, problem);
            }
            other => panic!("write {i}: {other:?}"),
        }
        i += 1;
        // a descriptor the server closed meanwhile is taken by the next open: close it too
        let free = lowest_free_fd(server.spawned.child.id());
        if free < short.current.unwrap() {
            prlimit(Some(pid), Resource::Nofile, Rlimit { current: Some(free), maximum: limit.maximum }).unwrap();
        }
    };
    i += 1;
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=30).contains(&retry), "{retry}");
    assert!(problem["detail"].as_str().unwrap().contains("Too many open files"), "{problem}");
    let (status, ready) = server.get("/ready").await;
    assert_eq!((status, ready["code"].as_str()), (503, Some("store_recovering")), "{ready}");
    assert!(ready["detail"].as_str().unwrap().contains("Too many open files"), "{ready}");
    for _ in 0..3 {
        let (status, _, problem) = server.put(i).await;
        assert_eq!((status, problem["code"].as_str()), (503, Some("store_recovering")), "{problem}");
        fate.insert(i, false);
        i += 1;
    }

    // Descriptors are back: writes are taken again, on their own.
    prlimit(Some(pid), Resource::Nofile, limit).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, ready) = server.get("/ready").await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "not recovered: {ready}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        assert_eq!(server.put(i).await.0, 201);
        fate.insert(i, true);
        i += 1;
    }
    for (&n, &acked) in &fate {
        let (status, doc) = server.get(&format!("/v1/tables/t/documents/d{n}")).await;
        if acked {
            assert_eq!((status, &doc["text"]), (200, &body(n)["text"]), "acknowledged write {n}");
        } else {
            assert_eq!(status, 404, "refused write {n}: {doc}");
        }
    }
    // the indexes agree with the documents
    let r = server.client.post(format!("{}/v1/admin/check", server.base)).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let report: Value = r.json().await.unwrap();
    assert_eq!(report["ok"], true, "{report}");

    // a clean stop, and the offline check finds the indexes whole
    server.spawned.stop();
    let out = Command::new(BIN).arg("check").arg(server.spawned.data_dir()).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // the engine's own words reach the log, and the store's
    let log = server.spawned.log();
    assert!(log.lines().any(|l| l.contains("fjall::worker_pool") && l.contains("crashed")), "{log}");
    assert!(log.contains("stopped its background work for a cause that passes"), "{log}");
    assert!(log.contains("opened its data again"), "{log}");
}
