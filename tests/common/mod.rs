//! The test harness: a real server on 127.0.0.1:0 over a temp dir, and typed helpers that return
//! `(StatusCode, serde_json::Value)`. Tests use their own table names. Every test binary
//! includes it (`#[path = "../common/mod.rs"] mod common;`), and with it [`model`], the in-memory
//! model the model-based tests check the server against.
#![allow(dead_code)]

pub mod model;
pub mod postgres;

use mosaicdb::server::{Server, ServerConfig};
use mosaicdb::storage::Durability;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A server on a temp dir. Dropped without [`TestServer::stop`], it is stopped first (gracefully,
/// as `stop` does) and its data directory removed after: `server` is the first field, `dir` the
/// last, and fields drop in that order.
pub struct TestServer {
    server: Running,
    /// sends the admin key on a server started with keys
    pub client: reqwest::Client,
    /// sends no key
    pub anon: reqwest::Client,
    pub base: String,
    pub dir: tempfile::TempDir,
}

/// A started server and the runtime it runs on: its own, as in the binary, so that `Drop` can shut
/// it down whatever runtime the test has (on a test's current-thread runtime nothing would run the
/// server's shutdown while `drop` waits for it).
struct Running {
    server: Option<Server>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// How long a dropped server's runtime may still take after the shutdown, for work on its
/// blocking pool that the shutdown did not wait for.
const RUNTIME_CLOSE: std::time::Duration = std::time::Duration::from_secs(5);

impl Running {
    async fn start(config: ServerConfig) -> Running {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("test-server")
            .enable_all()
            .build()
            .unwrap();
        match runtime.spawn(Server::start(config)).await.unwrap() {
            Ok(server) => Running { server: Some(server), runtime: Some(runtime) },
            Err(e) => {
                // dropping it here would panic (see `stop`), and a panic while one unwinds aborts
                runtime.shutdown_background();
                panic!("the test server did not start: {e}")
            }
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.server.as_ref().unwrap().addr()
    }

    fn pg_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().unwrap().pg_addr()
    }

    /// Shuts the server down gracefully (see [`Server::shutdown`]); panics if that fails.
    async fn stop(mut self) {
        let (server, runtime) = (self.server.take().unwrap(), self.runtime.take().unwrap());
        let stopped = server.shutdown().await;
        // a runtime cannot be dropped on a thread that runs another (this test's): it would panic
        runtime.shutdown_background();
        stopped.unwrap();
    }
}

impl Drop for Running {
    /// What [`Running::stop`] does, on a thread that runs no runtime (this one may run the
    /// test's), waited for. A failed shutdown is only said on stderr: the test did not ask for one.
    fn drop(&mut self) {
        let (Some(server), Some(runtime)) = (self.server.take(), self.runtime.take()) else { return };
        let stopped = std::thread::spawn(move || {
            let stopped = runtime.block_on(server.shutdown());
            runtime.shutdown_timeout(RUNTIME_CLOSE);
            stopped
        })
        .join();
        match stopped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("the dropped test server did not shut down cleanly: {e}"),
            Err(_) => eprintln!("the dropped test server's shutdown panicked"),
        }
    }
}

/// A response: status, headers and the body as JSON (Null when empty or not JSON).
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn is_problem(&self, status: u16, code: &str) -> bool {
        self.status.as_u16() == status
            && self.header("content-type") == Some("application/problem+json")
            && self.body["code"] == code
            && self.body["status"] == status
            && self.body["type"] == format!("urn:mosaicdb:problem:{code}")
            && self.body["detail"].is_string()
    }
    /// An error of `/write` as InfluxDB 1.x answers one: `{"error": detail, "code"}`.
    pub fn is_influx_v1_error(&self, status: u16, code: &str) -> bool {
        self.status.as_u16() == status
            && self.header("content-type") == Some("application/json")
            && self.body["code"] == code
            && self.body["error"].as_str().is_some_and(|e| !e.is_empty())
    }
    /// An error of `/api/v2/write` as InfluxDB 2.x answers one: `{"code": influx_code,
    /// "message": detail, "mosaicdb_code": code}`.
    pub fn is_influx_v2_error(&self, status: u16, influx_code: &str, code: &str) -> bool {
        self.status.as_u16() == status
            && self.header("content-type") == Some("application/json")
            && self.body["code"] == influx_code
            && self.body["mosaicdb_code"] == code
            && self.body["message"].as_str().is_some_and(|m| !m.is_empty())
    }
}

/// Set to `postgres` (with [`postgres::ENV`]), test servers keep their keys in PostgreSQL.
pub const BACKEND_ENV: &str = "MOSAIC_TEST_BACKEND";

/// Whether test servers run on PostgreSQL (see [`BACKEND_ENV`]).
pub fn on_postgres() -> bool {
    std::env::var(BACKEND_ENV).is_ok_and(|b| b == "postgres")
}

/// The PostgreSQL database of the test server in `dir`, when test servers run on PostgreSQL: a
/// fresh one, remembered in the directory so that a server restarted on it finds its keys.
fn test_backend_url(dir: &std::path::Path) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    let remembered = dir.join("postgres-url");
    if let Ok(url) = std::fs::read_to_string(&remembered) {
        return Some(url);
    }
    let url = postgres::fresh_database("test server")
        .unwrap_or_else(|| panic!("{BACKEND_ENV}=postgres needs {}", postgres::ENV));
    std::fs::write(&remembered, &url).unwrap();
    Some(url)
}

/// The storage settings of the test server's directory `dir`, for opening its store offline
/// (with the server stopped): its PostgreSQL database when test servers run there.
pub fn storage_config(dir: &std::path::Path) -> mosaicdb::storage::StorageConfig {
    let mut config = mosaicdb::storage::StorageConfig::new(dir);
    if let Some(url) = test_backend_url(dir) {
        config.backend = mosaicdb::storage::Backend::Postgres { url };
    }
    config
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, configure).await
    }

    pub async fn start_in(dir: tempfile::TempDir, configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let mut config = ServerConfig::new(dir.path());
        config.addr = "127.0.0.1:0".parse().unwrap();
        config.storage.durability = Durability::Buffered;
        config.storage.cache_bytes = 16 << 20;
        if let Some(url) = test_backend_url(dir.path()) {
            config.storage.backend = mosaicdb::storage::Backend::Postgres { url };
        }
        configure(&mut config);
        let keyed = config.access.keys.verify(ADMIN_KEY.as_bytes()).is_some();
        let server = Running::start(config).await;
        let base = format!("http://{}", server.addr());
        let anon = reqwest::Client::new();
        let client = if keyed {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert("authorization", bearer(ADMIN_KEY).parse().unwrap());
            reqwest::Client::builder().default_headers(headers).build().unwrap()
        } else {
            anon.clone()
        };
        TestServer { server, client, anon, base, dir }
    }

    /// The address of the PostgreSQL wire listener (started with `config.pg_addr`).
    pub fn pg_addr(&self) -> std::net::SocketAddr {
        self.server.pg_addr().expect("the server was started without --pg-addr")
    }

    /// A server with the keys of [`KEYS`] (one per role); `client` and the typed helpers send the
    /// admin key, `anon` and [`TestServer::send_as`] send what they are told.
    pub async fn start_with_keys(configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
        Self::start_with(|config| {
            config.access.keys = mosaicdb::api::auth::KeySet::parse_env(KEYS).unwrap();
            configure(config)
        })
        .await
    }

    /// Sends a request with `authorization` as the Authorization header (none: no header), and
    /// `body` as JSON (`Value::String`: as text/plain).
    pub async fn send_as(
        &self,
        authorization: Option<&str>,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Reply {
        let mut req = self.anon.request(method, format!("{}{}", self.base, path));
        if let Some(value) = authorization {
            req = req.header("authorization", value);
        }
        req = match body {
            Some(Value::String(text)) => req.header("content-type", "text/plain").body(text.clone()),
            Some(b) => req.json(b),
            None => req,
        };
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        Reply { status, headers, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    /// Shuts down gracefully and hands back the data directory.
    pub async fn stop(self) -> tempfile::TempDir {
        let TestServer { server, dir, .. } = self;
        server.stop().await;
        dir
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> Reply {
        let mut req = self.client.request(method, format!("{}{}", self.base, path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply { status, headers, body }
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self.send(Method::GET, path, None, &[]).await;
        (r.status, r.body)
    }
    /// Every document of a table by id (with `_id`), read a page of 1000 at a time.
    pub async fn all_documents(&self, table: &str) -> std::collections::BTreeMap<String, Value> {
        let mut out = std::collections::BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/tables/{table}/documents?limit=1000&cursor={c}"),
                None => format!("/v1/tables/{table}/documents?limit=1000"),
            };
            let (status, page) = self.get(&path).await;
            assert_eq!(status, 200, "{page}");
            for d in page["documents"].as_array().unwrap() {
                out.insert(d["_id"].as_str().unwrap().to_owned(), d.clone());
            }
            match page["cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return out,
            }
        }
    }
    /// Every document a query returns, in order: its pages of `limit`, through the cursors.
    pub async fn query_pages(&self, table: &str, query: &Value, limit: usize) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut q = query.clone();
            q["limit"] = serde_json::json!(limit);
            if let Some(c) = &cursor {
                q["cursor"] = serde_json::json!(c);
            }
            let (status, page) = self.post(&format!("/v1/tables/{table}/query"), q).await;
            assert_eq!(status, 200, "{query}: {page}");
            out.extend(page["documents"].as_array().unwrap().iter().cloned());
            match page["cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return out,
            }
        }
    }
    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self.send(Method::POST, path, Some(&body), &[]).await;
        (r.status, r.body)
    }
    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self.send(Method::PUT, path, Some(&body), &[]).await;
        (r.status, r.body)
    }
    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self.send(Method::PATCH, path, Some(&body), &[]).await;
        (r.status, r.body)
    }
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let r = self.send(Method::DELETE, path, None, &[]).await;
        (r.status, r.body)
    }

    /// Sends a raw body with a content type.
    pub async fn raw(&self, method: Method, path: &str, content_type: &str, body: impl Into<reqwest::Body>) -> Reply {
        let resp = self
            .client
            .request(method, format!("{}{}", self.base, path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        Reply { status, headers, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    /// Waits until the index is no longer building and returns its definition.
    pub async fn index_settled(&self, table: &str, index: &str) -> Value {
        for _ in 0..1000 {
            let (_, def) = self.get(&format!("/v1/tables/{table}/indexes/{index}")).await;
            if def["state"] != "building" {
                return def;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("index {index} is still building");
    }

    /// Runs the consistency check and asserts it finds nothing wrong.
    pub async fn check_ok(&self) {
        let (status, report) = self.post("/v1/admin/check", serde_json::json!({})).await;
        assert_eq!(status, 200);
        assert_eq!(report["ok"], true, "{report}");
    }

    pub async fn create_table(&self, name: &str) {
        let (status, body) = self.post("/v1/tables", serde_json::json!({ "name": name })).await;
        assert_eq!(status, 201, "{body}");
    }
}

/// A key of each role, as `MOSAIC_API_KEYS` takes them ([`TestServer::start_with_keys`]).
pub const READ_KEY: &str = "test-read-key-0123456789";
/// the write role's
pub const WRITE_KEY: &str = "test-write-key-0123456789";
/// the admin role's
pub const ADMIN_KEY: &str = "test-admin-key-0123456789";
pub const KEYS: &str =
    "reader:read:test-read-key-0123456789,writer:write:test-write-key-0123456789,ops:admin:test-admin-key-0123456789";

/// `Bearer <key>`
pub fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

/// Percent-encodes a path segment.
pub fn seg(s: &str) -> String {
    mosaicdb::api::encode_path(s)
}

/// A small deterministic generator (xorshift64), so a failing run replays from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
