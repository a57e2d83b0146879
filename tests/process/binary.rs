//! The `mosaicdb` binary end to end: flags and env vars, SIGTERM shutdown with exit 0, the
//! `health`, `openapi`, `inspect` and `check` commands, and the refusal to serve a public address
//! without API keys.

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
    // an origin is a scheme and a host: a bare host is refused before anything is served
    let out = Command::new(BIN).args(["--cors-origins", "app.example.com"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an origin such as https://app.example.com"));
    let out = Command::new(BIN).env("MOSAIC_CORS_ORIGINS", "*,https://a.example").output().unwrap();
    assert!(!out.status.success());
}

/// Serving on an address other than loopback needs API keys, or `--allow-unauthenticated`.
#[test]
fn refuses_to_serve_a_public_address_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    let out = start_without_keys(&data, &["--addr", &format!("0.0.0.0:{}", free_port())]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in ["without authentication", "--allow-unauthenticated", "MOSAIC_API_KEYS", "--api-keys-file"] {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
    assert!(!data.exists(), "the data directory was opened before the refusal");

    // cross-origin pages without keys: on purpose only, even on loopback
    let addr = format!("127.0.0.1:{}", free_port());
    let out = start_without_keys(&data, &["--addr", &addr, "--cors-origins", "https://app.example.com"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--cors-origins") && stderr.contains("--allow-unauthenticated"), "{stderr}");
    assert!(!data.exists(), "the data directory was opened before the refusal");
    let out = Command::new(BIN).args(["--allowed-hosts", "http://db.internal"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a host name"));

    // a weak key is refused by name, never shown
    let out = Command::new(BIN)
        .args(["--data-dir", data.to_str().unwrap()])
        .env("MOSAIC_API_KEYS", "ci:admin:tooshort123")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("weak key") && stderr.contains("\"ci\""), "{stderr}");
    assert!(!stderr.contains("tooshort123"), "{stderr}");
}

/// Starts the binary on 0.0.0.0 with `args` and `envs`, waits for /health over loopback, and
/// hands back the child and its base URL.
async fn start_public(args: &[&str], envs: &[(&str, &str)]) -> (std::process::Child, String) {
    let port = free_port();
    let mut command = Command::new(BIN);
    command
        .args(["--addr", &format!("0.0.0.0:{port}"), "--durability", "buffered"])
        .args(args)
        .env_remove("MOSAIC_API_KEYS")
        .env_remove("MOSAIC_API_KEYS_FILE")
        .env_remove("MOSAIC_ALLOW_UNAUTHENTICATED")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{base}/health")).await.is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("the server exited with {status}: {stderr}");
        }
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, base)
}

/// SIGTERM, wait for a clean exit, and the log it wrote.
fn stop(mut child: std::process::Child) -> String {
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut log = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut log).unwrap();
    log
}

#[tokio::test]
async fn serves_a_public_address_with_keys_or_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    let client = reqwest::Client::new();

    let (child, base) = start_public(&["--data-dir", data.to_str().unwrap(), "--allow-unauthenticated"], &[]).await;
    assert_eq!(client.get(format!("{base}/v1/tables")).send().await.unwrap().status(), 200);
    assert!(stop(child).contains("authentication off"));

    let key = "a-key-of-twenty-characters";
    let keys = format!("ci:admin:{key}");
    let (child, base) = start_public(&["--data-dir", data.to_str().unwrap()], &[("MOSAIC_API_KEYS", &keys)]).await;
    assert_eq!(client.get(format!("{base}/v1/tables")).send().await.unwrap().status(), 401);
    let r = client.get(format!("{base}/v1/tables")).bearer_auth(key).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let log = stop(child);
    assert!(log.contains("authentication on: 1 API key(s): 0 read, 0 write, 1 admin"), "{log}");
    assert!(!log.contains(key), "the key is in the log: {log}");
}

/// Runs the binary on `data` with `args` and no keys from the environment, to its exit.
fn start_without_keys(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("MOSAIC_API_KEYS")
        .env_remove("MOSAIC_API_KEYS_FILE")
        .env_remove("MOSAIC_ALLOW_UNAUTHENTICATED")
        .output()
        .unwrap()
}
