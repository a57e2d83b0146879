//! `/v1/databases` and the routes of a database under `/v1/db/{db}/…`: each database has its own
//! tables, documents, indexes and changefeed; a drop removes every key of it; the plain `/v1/…`
//! routes are the database `default`.

use crate::common;
use common::TestServer;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn create_list_describe_and_drop() {
    let s = TestServer::start().await;
    let (status, list) = s.get("/v1/databases").await;
    assert_eq!(status, 200);
    assert_eq!(list["databases"][0]["name"], "default");
    assert_eq!(list["databases"].as_array().unwrap().len(), 1);

    let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": "shop"})), &[]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location"), Some("/v1/databases/shop"));
    assert_eq!(r.body["name"], "shop");
    assert_eq!(r.body["id"], 1);
    assert!(r.body["created_ms"].as_u64().unwrap() > 1_700_000_000_000);
    let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": "shop"})), &[]).await;
    assert!(r.is_problem(409, "database_exists"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": "default"})), &[]).await;
    assert!(r.is_problem(409, "database_exists"), "{}", r.body);
    for bad in ["", "a/b", "tab\there", ".", ".."] {
        let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": bad})), &[]).await;
        assert!(r.is_problem(400, "invalid_database_name"), "{bad:?}: {}", r.body);
    }

    s.create_table("items").await;
    s.put("/v1/tables/items/documents/a", json!({"where": "default"})).await;
    let r = s.send(Method::POST, "/v1/db/shop/tables", Some(&json!({"name": "items"})), &[]).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("/v1/db/shop/tables/items"), "a resource of a database is at its path");
    for id in ["a", "b"] {
        let path = format!("/v1/db/shop/tables/items/documents/{id}");
        let r = s.send(Method::PUT, &path, Some(&json!({"where": "shop"})), &[]).await;
        assert_eq!(r.status, 201);
        assert_eq!(r.header("location"), Some(path.as_str()));
    }
    let (_, shop) = s.get("/v1/databases/shop").await;
    assert_eq!((shop["tables"].as_u64(), shop["documents"].as_u64()), (Some(1), Some(2)), "{shop}");
    let (_, doc) = s.get("/v1/tables/items/documents/a").await;
    assert_eq!(doc["where"], "default");
    let (_, doc) = s.get("/v1/db/shop/tables/items/documents/a").await;
    assert_eq!(doc["where"], "shop");
    let (_, doc) = s.get("/v1/db/default/tables/items/documents/a").await;
    assert_eq!(doc["where"], "default", "/v1/db/default is the plain routes' database");
    let (status, _) = s.get("/v1/tables/items/documents/b").await;
    assert_eq!(status, 404);
    let (_, list) = s.get("/v1/databases").await;
    let names: Vec<_> = list["databases"].as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
    assert_eq!(names, [json!("default"), json!("shop")]);

    let r = s.send(Method::GET, "/v1/db/nowhere/tables", None, &[]).await;
    assert!(r.is_problem(404, "database_not_found"), "{}", r.body);
    let r = s.send(Method::GET, "/v1/databases/nowhere", None, &[]).await;
    assert!(r.is_problem(404, "database_not_found"), "{}", r.body);
    let r = s.send(Method::DELETE, "/v1/databases/default", None, &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);

    assert_eq!(s.delete("/v1/databases/shop").await.0, 204);
    let r = s.send(Method::GET, "/v1/db/shop/tables/items/documents/a", None, &[]).await;
    assert!(r.is_problem(404, "database_not_found"), "{}", r.body);
    let r = s.send(Method::DELETE, "/v1/databases/shop", None, &[]).await;
    assert!(r.is_problem(404, "database_not_found"), "{}", r.body);
    // the name is free at once, for a new and empty database with a new id
    let (st, again) = s.post("/v1/databases", json!({"name": "shop"})).await;
    assert_eq!(st, 201);
    assert_eq!(again["id"], 2);
    let (_, tables) = s.get("/v1/db/shop/tables").await;
    assert_eq!(tables["tables"], json!([]));
    let (_, doc) = s.get("/v1/tables/items/documents/a").await;
    assert_eq!(doc["where"], "default");
    s.check_ok().await;
}

#[tokio::test]
async fn a_dropped_database_leaves_no_files_and_no_mark() {
    let s = TestServer::start().await;
    s.post("/v1/databases", json!({"name": "gone"})).await;
    s.post("/v1/db/gone/tables", json!({"name": "t"})).await;
    let docs: Vec<_> = (0..500).map(|i| json!({"_id": i.to_string(), "x": i})).collect();
    assert_eq!(s.post("/v1/db/gone/tables/t/documents", json!(docs)).await.0, 201);
    let folder = mosaicdb::storage::database_dir(s.dir.path(), 1);
    assert_eq!(folder.exists(), !common::on_postgres());
    assert_eq!(s.delete("/v1/databases/gone").await.0, 204);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while folder.exists() {
        assert!(std::time::Instant::now() < deadline, "the dropped database's folder is still there");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let dir = s.stop().await;
    // nothing left to resume: the mark went with the folder
    let s = TestServer::start_in(dir, |_| {}).await;
    let (_, list) = s.get("/v1/databases").await;
    assert_eq!(list["databases"].as_array().unwrap().len(), 1, "{list}");
    assert!(!folder.exists());
}

#[tokio::test]
async fn each_database_has_its_own_changefeed_and_indexes() {
    let s = TestServer::start().await;
    for db in ["a", "b"] {
        s.post("/v1/databases", json!({"name": db})).await;
    }
    for (db, n) in [("a", 3), ("b", 5)] {
        let (st, _) = s.post(&format!("/v1/db/{db}/tables"), json!({"name": "t", "changefeed": "full"})).await;
        assert_eq!(st, 201);
        let index = json!({"name": "by_k", "kind": "unique", "fields": ["k"]});
        assert_eq!(s.post(&format!("/v1/db/{db}/tables/t/indexes"), index).await.0, 201);
        for i in 0..n {
            let (st, body) = s.put(&format!("/v1/db/{db}/tables/t/documents/d{i}"), json!({"k": i})).await;
            assert_eq!(st, 201, "{body}");
        }
    }
    // both hold the unique values 0..3 with no conflict; within one, the index still holds
    let (st, body) = s.put("/v1/db/b/tables/t/documents/x", json!({"k": 0})).await;
    assert_eq!(st, 409, "{body}");
    for (db, n) in [("a", 3u64), ("b", 5)] {
        let (_, page) = s.get(&format!("/v1/db/{db}/changes?since=0&limit=100")).await;
        let seqs: Vec<u64> = page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "{db}: {page}");
        let q = json!({"filter": {"k": 1}});
        let (_, found) = s.post(&format!("/v1/db/{db}/tables/t/query"), q).await;
        assert_eq!(found["documents"].as_array().unwrap().len(), 1, "{db}: {found}");
    }
    let (_, page) = s.get("/v1/changes?since=0").await;
    assert_eq!(page["events"], json!([]), "the default database's feed is its own");
}

#[tokio::test]
async fn databases_survive_a_restart() {
    let s = TestServer::start().await;
    s.post("/v1/databases", json!({"name": "kept"})).await;
    s.post("/v1/db/kept/tables", json!({"name": "t"})).await;
    s.put("/v1/db/kept/tables/t/documents/one", json!({"v": 1})).await;
    let dir = s.stop().await;
    if !common::on_postgres() {
        // the offline check looks at every database
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mosaicdb"))
            .args(["check", dir.path().to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["ok"], true);
        assert_eq!(report["checked"]["documents"], 0, "{report}");
        assert_eq!(report["databases"]["kept"]["checked"]["documents"], 1, "{report}");
    }
    let s = TestServer::start_in(dir, |_| {}).await;
    let (_, doc) = s.get("/v1/db/kept/tables/t/documents/one").await;
    assert_eq!(doc["v"], 1);
    let (st, created) = s.post("/v1/databases", json!({"name": "next"})).await;
    assert_eq!(st, 201);
    assert_eq!(created["id"], 2, "ids are never given twice");
}

#[tokio::test]
async fn the_number_of_databases_is_bounded() {
    let s = TestServer::start_with(|c| c.max_databases = 2).await;
    assert_eq!(s.post("/v1/databases", json!({"name": "one"})).await.0, 201);
    let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": "two"})), &[]).await;
    assert!(r.is_problem(409, "too_many_databases"), "{}", r.body);
    assert_eq!(s.delete("/v1/databases/one").await.0, 204);
    assert_eq!(s.post("/v1/databases", json!({"name": "two"})).await.0, 201);
}

#[tokio::test]
async fn influx_writes_name_their_database() {
    let s = TestServer::start().await;
    s.post("/v1/databases", json!({"name": "telegraf"})).await;
    let r =
        s.raw(Method::POST, "/write?db=telegraf&precision=s", "text/plain", "cpu,host=a value=1 1700000000\n").await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = s
        .raw(
            Method::POST,
            "/api/v2/write?org=o&bucket=telegraf&precision=s",
            "text/plain",
            "cpu,host=b value=2 1700000000\n",
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.body);
    let (_, metrics) = s.get("/v1/db/telegraf/timeseries").await;
    assert_eq!(metrics["metrics"][0]["name"], "cpu", "{metrics}");
    assert_eq!(metrics["metrics"][0]["series"], 2, "{metrics}");
    let (_, metrics) = s.get("/v1/timeseries").await;
    assert_eq!(metrics["metrics"], json!([]));
    for query in ["db=nowhere", "db=", "db=%zz", "db"] {
        let r = s.raw(Method::POST, &format!("/write?{query}"), "text/plain", "cpu value=1\n").await;
        assert!(r.is_influx_v1_error(404, "database_not_found"), "{query}: {}", r.body);
    }
    // no db: the default database
    let r = s.raw(Method::POST, "/write", "text/plain", "mem value=1\n").await;
    assert_eq!(r.status, 204);
    let (_, metrics) = s.get("/v1/timeseries").await;
    assert_eq!(metrics["metrics"][0]["name"], "mem");
}

/// Keys limited to databases: a role in each listed one, 404 `database_not_found` for every
/// other (the plain routes are `default`), no database management; admin keys see all.
#[tokio::test]
async fn keys_limited_to_databases() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[[keys]]
name = "admin"
role = "admin"
key = "{}"
[[keys]]
name = "shop-writer"
role = "admin"
key = "shop-writer-key-0123456789"
databases = {{ shop = "write", other = "read" }}
"#,
            common::ADMIN_KEY
        ),
    )
    .unwrap();
    let keys = mosaicdb::api::auth::KeySet::load(Some(&file), None).unwrap();
    let s = TestServer::start_with(|c| c.access.keys = keys).await;
    for db in ["shop", "other", "secret"] {
        assert_eq!(s.post("/v1/databases", json!({"name": db})).await.0, 201);
        assert_eq!(s.post(&format!("/v1/db/{db}/tables"), json!({"name": "t"})).await.0, 201);
    }
    s.create_table("t").await;
    let key = common::bearer("shop-writer-key-0123456789");
    let who = Some(key.as_str());
    let doc = json!({"x": 1});
    let r = s.send_as(who, Method::PUT, "/v1/db/shop/tables/t/documents/a", Some(&doc)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = s.send_as(who, Method::PUT, "/v1/db/other/tables/t/documents/a", Some(&doc)).await;
    assert!(r.is_problem(403, "forbidden"), "{}", r.body);
    let r = s.send_as(who, Method::GET, "/v1/db/other/tables/t", None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // not listed: as if it did not exist, whatever the route, default included
    for (method, path) in [
        (Method::GET, "/v1/db/secret/tables/t"),
        (Method::PUT, "/v1/db/secret/tables/t/documents/a"),
        (Method::GET, "/v1/tables/t"),
        (Method::GET, "/v1/databases/secret"),
        (Method::GET, "/v1/db/nowhere/tables"),
    ] {
        let body = (method == Method::PUT).then(|| doc.clone());
        let r = s.send_as(who, method.clone(), path, body.as_ref()).await;
        assert!(r.is_problem(404, "database_not_found"), "{method} {path}: {}", r.body);
    }
    let r = s.send_as(who, Method::GET, "/v1/databases", None).await;
    let names: Vec<_> = r.body["databases"].as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
    assert_eq!(names, [json!("other"), json!("shop")]);
    let r = s.send_as(who, Method::POST, "/v1/databases", Some(&json!({"name": "mine"}))).await;
    assert!(r.is_problem(403, "forbidden"), "{}", r.body);
    let r = s.send_as(who, Method::DELETE, "/v1/databases/shop", None).await;
    assert!(r.is_problem(403, "forbidden"), "{}", r.body);
    // the server's metrics tell of every database
    let r = s.send_as(who, Method::GET, "/metrics", None).await;
    assert!(r.is_problem(403, "forbidden"), "{}", r.body);
    // the state numbers are default's, whichever database a request names, known or not
    let seqs: Vec<_> = [
        s.send_as(who, Method::GET, "/v1/db/secret/tables", None).await,
        s.send_as(who, Method::GET, "/v1/db/nowhere/tables", None).await,
        s.send_as(who, Method::GET, "/v1/db/shop/tables", None).await,
    ]
    .iter()
    .map(|r| r.header("x-mosaic-seq").unwrap().to_owned())
    .collect();
    assert!(seqs.iter().all(|q| *q == seqs[0]), "{seqs:?}");
    // and a request without a key learns none
    assert_eq!(s.send_as(None, Method::GET, "/v1/db/secret/tables", None).await.header("x-mosaic-seq"), None);
    let line = serde_json::Value::String("cpu value=1 1000000000".into());
    let r = s.send_as(who, Method::POST, "/write?db=shop", Some(&line)).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let r = s.send_as(who, Method::POST, "/write?db=secret", Some(&line)).await;
    assert!(r.is_influx_v1_error(404, "database_not_found"), "{}", r.body);
    // nothing refused was written; the admin key sees everything
    assert_eq!(s.get("/v1/db/other/tables/t/documents/a").await.0, 404);
    assert_eq!(s.get("/v1/db/secret/tables/t/documents/a").await.0, 404);
    assert_eq!(s.get("/v1/db/secret/timeseries").await.1["metrics"], json!([]));
    let (_, list) = s.get("/v1/databases").await;
    assert_eq!(list["databases"].as_array().unwrap().len(), 4);
}

/// A database over its quota refuses writes (507 `quota_exceeded`, nothing written) and still
/// serves reads, read-only POSTs and deletes; other databases write on.
#[tokio::test]
async fn a_database_over_its_quota_refuses_writes_only() {
    let s = TestServer::start().await;
    let r = s.send(Method::POST, "/v1/databases", Some(&json!({"name": "tiny", "quota_bytes": 1000})), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    let (st, info) = s.post("/v1/databases", json!({"name": "tiny", "quota_bytes": 1 << 20})).await;
    assert_eq!(st, 201);
    assert_eq!(info["quota_bytes"], 1 << 20);
    let (st, body) = s.post("/v1/db/tiny/tables", json!({"name": "t"})).await;
    assert_eq!(st, 201, "{body}");
    // not compressible (PostgreSQL compresses what it stores)
    let mut rng = common::Rng(7);
    let big: String = (0..64 << 10).map(|_| char::from(b"0123456789abcdef"[rng.below(16) as usize])).collect();
    let mut refused = None;
    // 64 KiB a write, the size measured every 250 ms: refused well within 100 writes
    for i in 0..100 {
        let path = format!("/v1/db/tiny/tables/t/documents/d{i}");
        let r = s.send(Method::PUT, &path, Some(&json!({"b": big})), &[]).await;
        if r.status == 507 {
            refused = Some((i, r));
            break;
        }
        assert_eq!(r.status, 201, "{}", r.body);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (_, info) = s.get("/v1/databases/tiny").await;
    let (last, r) = refused.unwrap_or_else(|| panic!("the quota never refused a write: {info}"));
    assert!(r.is_problem(507, "quota_exceeded"), "{}", r.body);
    // nothing of the refused write, and no more writes of any kind
    assert_eq!(s.get(&format!("/v1/db/tiny/tables/t/documents/d{last}")).await.0, 404);
    for (method, path, body) in [
        (Method::POST, "/v1/db/tiny/tables/t/documents", json!({"_id": "n"})),
        (Method::PATCH, "/v1/db/tiny/tables/t/documents/d0", json!({"c": 1})),
        (Method::POST, "/v1/db/tiny/tables", json!({"name": "u"})),
    ] {
        let r = s.send(method.clone(), path, Some(&body), &[]).await;
        assert!(r.is_problem(507, "quota_exceeded"), "{method} {path}: {}", r.body);
    }
    // reads, read-only POSTs and deletes go on
    assert_eq!(s.get("/v1/db/tiny/tables/t/documents/d0").await.0, 200);
    let (st, found) = s.post("/v1/db/tiny/tables/t/query", json!({"limit": 1})).await;
    assert_eq!(st, 200, "{found}");
    assert_eq!(s.delete("/v1/db/tiny/tables/t/documents/d0").await.0, 204);
    let (_, info) = s.get("/v1/databases/tiny").await;
    assert!(info["stored_bytes"].as_u64().unwrap() >= 1 << 20, "{info}");
    // a larger quota lets writes in again at once; none at all too
    let r = s.send(Method::PATCH, "/v1/databases/tiny", Some(&json!({"quota_bytes": 1u64 << 30})), &[]).await;
    assert_eq!((r.status.as_u16(), r.body["quota_bytes"].as_u64()), (200, Some(1 << 30)), "{}", r.body);
    let (st, _) = s.put("/v1/db/tiny/tables/t/documents/again", json!({"b": 1})).await;
    assert_eq!(st, 201);
    let r = s.send(Method::PATCH, "/v1/databases/tiny", Some(&json!({"quota_bytes": null})), &[]).await;
    assert_eq!((r.status.as_u16(), r.body["quota_bytes"].clone()), (200, json!(null)), "{}", r.body);
    let r = s.send(Method::PATCH, "/v1/databases/tiny", Some(&json!({"quota_bytes": 5})), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    let r = s.send(Method::PATCH, "/v1/databases/default", Some(&json!({"quota_bytes": 1u64 << 30})), &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    // the other databases are not held back
    s.create_table("t").await;
    assert_eq!(s.put("/v1/tables/t/documents/a", json!({"b": big})).await.0, 201);
}

#[tokio::test]
async fn metrics_are_labelled_by_database() {
    let s = TestServer::start().await;
    s.post("/v1/databases", json!({"name": "shop", "quota_bytes": 1 << 30})).await;
    s.post("/v1/db/shop/tables", json!({"name": "t", "changefeed": "full"})).await;
    for id in ["a", "b"] {
        s.put(&format!("/v1/db/shop/tables/t/documents/{id}"), json!({})).await;
    }
    s.create_table("t").await;
    let r = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap();
    let text = r.text().await.unwrap();
    for line in [
        "mosaicdb_database_documents{database=\"shop\"} 2",
        "mosaicdb_database_documents{database=\"default\"} 0",
        "mosaicdb_database_tables{database=\"default\"} 1",
        "mosaicdb_database_changefeed_last_seq{database=\"shop\"} 2",
        "mosaicdb_database_quota_bytes{database=\"shop\"} 1073741824",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    assert!(!text.contains("mosaicdb_database_quota_bytes{database=\"default\"}"));
    let writes = text.lines().find(|l| l.starts_with("mosaicdb_database_writes_total{database=\"shop\"}")).unwrap();
    assert!(writes.rsplit(' ').next().unwrap().parse::<u64>().unwrap() >= 3, "{writes}");
}

/// One database backed up while the server runs and restored, offline, as a new database of the
/// same data directory: the copy holds the original's documents, indexes and changefeed.
#[tokio::test]
async fn a_database_is_backed_up_and_restored_as_another() {
    if common::on_postgres() {
        return; // the restore below writes a data directory's embedded store
    }
    let s = TestServer::start().await;
    s.post("/v1/databases", json!({"name": "shop"})).await;
    s.post("/v1/db/shop/tables", json!({"name": "t", "changefeed": "full"})).await;
    let index = json!({"name": "by_k", "kind": "unique", "fields": ["k"]});
    assert_eq!(s.post("/v1/db/shop/tables/t/indexes", index).await.0, 201);
    for i in 0..20 {
        s.put(&format!("/v1/db/shop/tables/t/documents/d{i}"), json!({"k": i})).await;
    }
    let archive = s.client.post(format!("{}/v1/db/shop/admin/backup", s.base)).send().await.unwrap();
    assert_eq!(archive.status(), 200);
    let archive = archive.bytes().await.unwrap();
    let dir = s.stop().await;
    let file = dir.path().join("shop.backup");
    std::fs::write(&file, &archive).unwrap();
    let bin = env!("CARGO_BIN_EXE_mosaicdb");
    let data = dir.path().to_str().unwrap();
    let restore = |name: &str| {
        std::process::Command::new(bin)
            .args(["restore", file.to_str().unwrap(), data, "--database", name])
            .output()
            .unwrap()
    };
    let out = restore("copy");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = restore("shop");
    assert!(!out.status.success(), "a name taken is refused");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let s = TestServer::start_in(dir, |_| {}).await;
    let (_, copy) = s.get("/v1/databases/copy").await;
    assert_eq!(copy["documents"], 20, "{copy}");
    let (_, doc) = s.get("/v1/db/copy/tables/t/documents/d7").await;
    assert_eq!(doc["k"], 7);
    let (st, _) = s.put("/v1/db/copy/tables/t/documents/x", json!({"k": 3})).await;
    assert_eq!(st, 409, "the unique index came along");
    let (_, page) = s.get("/v1/db/copy/changes?since=0&limit=100").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 20);
    let (_, check) = s.post("/v1/db/copy/admin/check", json!({})).await;
    assert_eq!(check["ok"], true, "{check}");

    // a backup of default names no other database: restored, it is one database again
    let archive = s.client.post(format!("{}/v1/admin/backup", s.base)).send().await.unwrap();
    let archive = archive.bytes().await.unwrap();
    let file = s.dir.path().join("default.backup");
    std::fs::write(&file, &archive).unwrap();
    let alone = tempfile::tempdir().unwrap();
    let target = alone.path().join("data");
    let out = std::process::Command::new(bin)
        .args(["restore", file.to_str().unwrap(), target.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = TestServer::start_in(alone, move |c| c.storage.path = target).await;
    let (_, list) = s.get("/v1/databases").await;
    assert_eq!(list["databases"].as_array().unwrap().len(), 1, "{list}");
}

/// A data directory written before databases existed (tests/fixtures/README.md) opens as the
/// database `default`, whole: its table, index, documents, changefeed and time series, and no
/// other database.
#[tokio::test]
async fn a_directory_written_before_databases_opens_as_default() {
    if common::on_postgres() {
        return; // the fixture is an embedded data directory
    }
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pre-databases.tar.gz");
    let status = std::process::Command::new("tar").args(["-xzf", fixture, "-C"]).arg(dir.path()).status().unwrap();
    assert!(status.success());
    let data = dir.path().join("data");
    // the fixture's change events are as old as the fixture: a retention of a century keeps them
    // (the default day would let the retention task remove all but the last)
    let s = TestServer::start_in(dir, move |c| {
        c.storage.path = data;
        c.tasks.changefeed.max_age = std::time::Duration::from_secs(100 * 365 * 86_400);
    })
    .await;
    let (_, list) = s.get("/v1/databases").await;
    assert_eq!(list["databases"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["databases"][0]["documents"], 3);
    for i in 1..=3 {
        let (st, doc) = s.get(&format!("/v1/tables/users/documents/u{i}")).await;
        assert_eq!(st, 200);
        assert_eq!(doc, json!({"_id": format!("u{i}"), "name": format!("user {i}"), "age": 20 + i}));
    }
    let (_, found) = s.post("/v1/tables/users/query", json!({"filter": {"age": {"$gte": 22}}})).await;
    assert_eq!(found["documents"].as_array().unwrap().len(), 2, "{found}");
    let (_, page) = s.get("/v1/changes?since=0").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 3, "{page}");
    let (_, metrics) = s.get("/v1/timeseries").await;
    assert_eq!(metrics["metrics"][0]["name"], "cpu");
    s.check_ok().await;
    // and it takes databases from then on
    assert_eq!(s.post("/v1/databases", json!({"name": "new"})).await.0, 201);
    let (_, doc) = s.get("/v1/db/default/tables/users/documents/u1").await;
    assert_eq!(doc["age"], 21);
}

/// `mosaicdb backup --all` takes one archive of each database of a running server, and
/// `mosaicdb restore --all` makes a new data directory of them: every database back, with its
/// documents, indexes and quota.
#[tokio::test]
async fn every_database_is_backed_up_and_restored_together() {
    if common::on_postgres() {
        return; // the restore below writes an embedded data directory
    }
    let s = TestServer::start().await;
    s.create_table("t").await;
    s.put("/v1/tables/t/documents/d", json!({"in": "default"})).await;
    s.post("/v1/databases", json!({"name": "shop", "quota_bytes": 1u64 << 30})).await;
    s.post("/v1/databases", json!({"name": "a b"})).await;
    for db in ["shop", "a%20b"] {
        s.post(&format!("/v1/db/{db}/tables"), json!({"name": "t"})).await;
        let index = json!({"name": "by_n", "kind": "unique", "fields": ["n"]});
        assert_eq!(s.post(&format!("/v1/db/{db}/tables/t/indexes"), index).await.0, 201);
        for i in 0..5 {
            s.put(&format!("/v1/db/{db}/tables/t/documents/d{i}"), json!({"n": i, "in": db})).await;
        }
    }
    let bin = env!("CARGO_BIN_EXE_mosaicdb");
    let folder = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin)
        .args(["backup", "--url", &s.base, "--all"])
        .arg(folder.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.path().join("databases.json")).unwrap()).unwrap();
    // one database alone, to stdout
    let one = std::process::Command::new(bin).args(["backup", "--url", &s.base, "--database", "a b"]).output().unwrap();
    assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
    let kept = std::fs::read(folder.path().join("a%20b.backup")).unwrap();
    assert!(one.stdout.len() > 64 && one.stdout[..8] == kept[..8], "an archive of the same kind");
    assert!(
        String::from_utf8_lossy(&one.stderr).contains("mosaicdb: backup of"),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert_eq!(manifest.as_array().unwrap().len(), 3, "{manifest}");
    let target = tempfile::tempdir().unwrap();
    let data = target.path().join("data");
    let out =
        std::process::Command::new(bin).args(["restore", "--all"]).arg(folder.path()).arg(&data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let r = TestServer::start_in(target, move |c| c.storage.path = data).await;
    let (_, list) = r.get("/v1/databases").await;
    let names: Vec<_> = list["databases"].as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
    assert_eq!(names, [json!("default"), json!("a b"), json!("shop")]);
    assert_eq!(r.get("/v1/databases/shop").await.1["quota_bytes"], 1u64 << 30);
    assert_eq!(r.get("/v1/tables/t/documents/d").await.1["in"], "default");
    for db in ["shop", "a%20b"] {
        let (_, info) = r.get(&format!("/v1/db/{db}/tables/t")).await;
        assert_eq!(info["documents"], 5, "{db}: {info}");
        let (st, _) = r.put(&format!("/v1/db/{db}/tables/t/documents/x"), json!({"n": 1})).await;
        assert_eq!(st, 409, "{db}: the unique index came back");
    }
}
