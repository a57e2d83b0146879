//! The periodic background tasks in a started server, by themselves with 1 s intervals: the TTL
//! sweep deletes an expired document with every entry of it (after it was already invisible), the
//! retention task removes exactly the points older than their metric's `max_age`; both report at
//! `GET /v1/admin/tasks`; shutdown waits for no interval.

use crate::common::TestServer;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn task(tasks: &Value, name: &str) -> Value {
    tasks["tasks"].as_array().unwrap().iter().find(|t| t["name"] == name).cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_started_server_runs_its_periodic_tasks_by_itself() {
    let s = TestServer::start_with(|c| {
        c.tasks.retention_interval = Duration::from_secs(1);
        c.tasks.ttl_interval = Duration::from_secs(1);
    })
    .await;
    let now = now_ms();
    // a document with two indexes that expires in a moment, and one that does not
    s.create_table("sessions").await;
    for (name, kind, field) in [("by_user", "hash", "user"), ("by_age", "range", "age")] {
        let (status, body) =
            s.post("/v1/tables/sessions/indexes", json!({"name": name, "kind": kind, "fields": [field]})).await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, _) =
        s.put("/v1/tables/sessions/documents/s1", json!({"user": "ada", "age": 36, "_expires_at": now + 1200})).await;
    assert_eq!(status, 201);
    s.put("/v1/tables/sessions/documents/s2", json!({"user": "bob", "age": 40, "_expires_at": now + 3_600_000})).await;
    assert_eq!(s.get("/v1/tables/sessions/documents/s1").await.0, 200);
    // points on both sides of a one-hour retention
    let body = json!({"points": [
        {"entity": "a", "ts": now - 3_600_000 - 60_000, "value": 1},
        {"entity": "a", "ts": now - 3_600_000 + 60_000, "value": 2},
        {"entity": "a", "ts": now, "value": 3}]});
    s.post("/v1/timeseries/old/points", body).await;
    s.put("/v1/timeseries/old/retention", json!({"max_age": "1h"})).await;

    let mut tasks = Value::Null;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tasks = s.get("/v1/admin/tasks").await.1;
        let (ttl, retention) = (task(&tasks, "ttl_sweep"), task(&tasks, "retention"));
        if ttl["removed_total"] == 1 && retention["removed_total"] == 1 && retention["runs"].as_u64() >= Some(2) {
            break;
        }
    }
    for name in ["ttl_sweep", "retention"] {
        let t = task(&tasks, name);
        assert_eq!(t["interval_ms"], 1000, "{tasks}");
        assert_eq!(t["removed_total"], 1, "{tasks}");
        assert!(t["runs"].as_u64().unwrap() >= 2, "{tasks}");
        assert!(t["last_started_at"].is_string() && t["last_duration_ms"].is_u64(), "{t}");
        assert_eq!(t["last_error"], Value::Null, "{t}");
    }
    // the expired document is gone with its entries (the count and check agree), the other stays
    assert_eq!(s.get("/v1/tables/sessions/documents/s1").await.0, 404);
    assert_eq!(s.get("/v1/tables/sessions/documents/s2").await.0, 200);
    assert_eq!(s.get("/v1/tables/sessions").await.1["documents"], 1);
    let (_, found) = s.post("/v1/tables/sessions/query", json!({"filter": {"user": "ada"}})).await;
    assert_eq!(found["documents"], json!([]));
    let kept: Vec<f64> = s.get("/v1/timeseries/old/points").await.1["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .collect();
    assert_eq!(kept, [2.0, 3.0]);
    s.check_ok().await;
    // shutting down waits for no interval
    let started = std::time::Instant::now();
    let dir = s.stop().await;
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // the index entries went with the document: nothing of s1 is left in any family
    let mut out = Vec::new();
    mosaicdb::tools::inspect(crate::common::storage_config(dir.path()), "", &mut out).unwrap();
    let keys = String::from_utf8(out).unwrap();
    assert!(!keys.lines().any(|l| l.contains(":s1")), "{keys}");
    assert!(keys.lines().any(|l| l.contains(":s2")), "{keys}");
}
