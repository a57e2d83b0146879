//! The `mosaicdb` binary end to end: flags and env vars, SIGTERM shutdown with exit 0, the
//! `health`, `openapi`, `inspect` and `check` commands.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mosaicdb");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn serves_until_sigterm_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["--data-dir", dir.path().to_str().unwrap(), "--log", "info"])
        .env("MOSAIC_ADDR", format!("127.0.0.1:{port}"))
        .env("MOSAIC_DURABILITY", "sync")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(format!("{base}/health")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let info: serde_json::Value = client.get(format!("{base}/v1/info")).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["durability"], "sync", "MOSAIC_DURABILITY is honoured");
    let r = client.post(format!("{base}/v1/tables")).json(&serde_json::json!({"name": "t"})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let r =
        client.put(format!("{base}/v1/tables/t/documents/a")).json(&serde_json::json!({"x": 1})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    // the container health check: an unspecified address means this machine
    let health = Command::new(BIN).arg("health").env("MOSAIC_ADDR", format!("0.0.0.0:{port}")).output().unwrap();
    assert!(health.status.success(), "{}", String::from_utf8_lossy(&health.stderr));

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "exit status {exit:?}");
    let logs: Vec<String> = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok).collect();
    assert!(logs.iter().any(|l| l.contains("shutting down")), "{logs:?}");
    assert!(!logs.iter().any(|l| l.contains('\u{1b}')), "no colour codes when stdout is not a terminal");
    let health = Command::new(BIN).args(["health", "--addr", &format!("127.0.0.1:{port}")]).output().unwrap();
    assert_eq!(health.status.code(), Some(1), "a stopped server is not healthy");
    assert!(String::from_utf8_lossy(&health.stderr).contains("cannot reach"));

    let out = Command::new(BIN).args(["inspect", dir.path().to_str().unwrap(), "entity:t"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "entity:t:a  {\"x\":1}\n");
    let out = Command::new(BIN).args(["check", dir.path().to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["checked"]["documents"], 1);
}

#[test]
fn prints_the_openapi_document_and_rejects_bad_flags() {
    let out = Command::new(BIN).arg("openapi").output().unwrap();
    assert!(out.status.success());
    let spec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(spec["paths"]["/v1/tables/{table}/query"].is_object());
    let out = Command::new(BIN).args(["--durability", "sometimes"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("durability must be sync or buffered"));
}
