//! Document history: the versions writes replace, listed newest first and read as of a time, on
//! every write path; tables without history keep nothing.

use crate::common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

async fn versions(s: &TestServer, path: &str) -> Vec<Value> {
    let (st, page) = s.get(path).await;
    assert_eq!(st, 200, "{page}");
    page["versions"].as_array().unwrap().clone()
}

fn ops(versions: &[Value]) -> Vec<&str> {
    versions.iter().map(|v| v["op"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn every_version_is_kept_and_read_as_of_its_time() {
    let s = TestServer::start().await;
    let (st, def) = s.post("/v1/tables", json!({"name": "t", "history": {"max_versions": 10}})).await;
    assert_eq!(st, 201, "{def}");
    assert_eq!(def["history"], json!({"max_versions": 10}));
    let doc = "/v1/tables/t/documents/a";
    assert_eq!(s.put(doc, json!({"v": 1})).await.0, 201);
    assert_eq!(s.put(doc, json!({"v": 2})).await.0, 200);
    assert_eq!(s.patch(doc, json!({"v": 3})).await.0, 200);
    assert_eq!(s.delete(doc).await.0, 204);
    // the batch path keeps history too
    let batch = json!({"operations": [{"op": "put", "table": "t", "id": "a", "document": {"v": 4}}]});
    assert_eq!(s.post("/v1/batch", batch).await.0, 200);

    let all = versions(&s, "/v1/tables/t/documents/a/history").await;
    assert_eq!(ops(&all), ["create", "delete", "update", "update", "create"], "{all:?}");
    let values: Vec<Value> = all.iter().map(|v| v["document"]["v"].clone()).collect();
    assert_eq!(values, [json!(4), Value::Null, json!(3), json!(2), json!(1)]);
    assert_eq!(all[0]["current"], true);
    assert!(all[1..].iter().all(|v| v["current"] == false));
    let times: Vec<i64> = all.iter().map(|v| v["at_us"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] > w[1]), "newest first, strictly: {times:?}");
    let (_, current) = s.get(doc).await;
    assert_eq!(all[0]["document"], current);

    // as of each version's start: that version; between two, the earlier; before all, none
    for v in &all {
        // RFC 3339 with microseconds: the version's own start
        let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(v["at_us"].as_i64().unwrap()) * 1000)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let r = s.send(Method::GET, &format!("{doc}?as_of={at}"), None, &[]).await;
        match v["op"].as_str().unwrap() {
            "delete" => assert!(r.is_problem(404, "document_not_found"), "{v} at {at}: {}", r.body),
            _ => {
                assert_eq!(r.status, 200, "{v} at {at}: {}", r.body);
                assert_eq!(r.body, v["document"], "at {at}");
                assert_eq!(r.header("etag"), v["etag"].as_str());
            }
        }
    }
    let first = all.last().unwrap()["at_us"].as_i64().unwrap().div_euclid(1000) - 1;
    let r = s.send(Method::GET, &format!("{doc}?as_of={first}"), None, &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    let r = s.send(Method::GET, &format!("{doc}?as_of=2200-01-01T00:00:00Z"), None, &[]).await;
    assert_eq!(r.body, current);
    let r = s.send(Method::GET, &format!("{doc}?as_of=yesterday"), None, &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);

    // pages of two, through the cursor, are the whole list
    let mut paged = Vec::new();
    let mut path = "/v1/tables/t/documents/a/history?limit=2".to_owned();
    loop {
        let (_, page) = s.get(&path).await;
        paged.extend(page["versions"].as_array().unwrap().iter().cloned());
        match page["cursor"].as_str() {
            Some(c) => path = format!("/v1/tables/t/documents/a/history?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(paged, all);
    // a time window
    let mid = all[2]["at_us"].as_i64().unwrap();
    let window = versions(&s, &format!("/v1/tables/t/documents/a/history?to={}", mid.div_euclid(1000) + 1)).await;
    assert!(window.iter().all(|v| v["at_us"].as_i64().unwrap() <= mid + 1000), "{window:?}");
    assert!(window.len() >= 3);
    s.check_ok().await;
}

#[tokio::test]
async fn history_is_opt_in_and_can_be_turned_on_later() {
    let s = TestServer::start().await;
    s.create_table("plain").await;
    s.put("/v1/tables/plain/documents/a", json!({"v": 1})).await;
    for path in ["/v1/tables/plain/documents/a/history", "/v1/tables/plain/documents/a?as_of=0"] {
        let r = s.send(Method::GET, path, None, &[]).await;
        assert!(r.is_problem(400, "invalid_request"), "{path}: {}", r.body);
    }
    for bad in [json!({}), json!({"max_age": "soon"}), json!({"max_versions": 0})] {
        let r = s.send(Method::PATCH, "/v1/tables/plain", Some(&json!({"history": bad})), &[]).await;
        assert!(r.is_problem(400, "invalid_request"), "{bad}: {}", r.body);
    }
    let (st, def) = s.patch("/v1/tables/plain", json!({"history": {"max_age": "30d"}})).await;
    assert_eq!(st, 200, "{def}");
    assert_eq!(def["history"]["max_age"], "30d");
    // a version written before: kept when replaced, with its time unknown
    s.put("/v1/tables/plain/documents/a", json!({"v": 2})).await;
    let all = versions(&s, "/v1/tables/plain/documents/a/history").await;
    assert_eq!(ops(&all), ["update", "unknown"]);
    assert_eq!(all[1]["at_us"], 0);
    assert_eq!(all[1]["document"]["v"], 1);
    // an import keeps history too
    let r =
        s.raw(Method::POST, "/v1/tables/plain/import", "application/x-ndjson", "{\"_id\": \"a\", \"v\": 3}\n").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(ops(&versions(&s, "/v1/tables/plain/documents/a/history").await), ["update", "update", "unknown"]);
    // turned off: the table keeps nothing from then on
    let (st, def) = s.patch("/v1/tables/plain", json!({"history": null})).await;
    assert_eq!(st, 200);
    assert!(def.get("history").is_none(), "{def}");
    let r = s.send(Method::GET, "/v1/tables/plain/documents/a/history", None, &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    // on again before the retention task removed what was kept: refused, for the kept versions
    // would not follow the writes made while it was off
    s.put("/v1/tables/plain/documents/a", json!({"v": 4})).await;
    let r = s.send(Method::PATCH, "/v1/tables/plain", Some(&json!({"history": {"max_age": "1d"}})), &[]).await;
    assert!(r.is_problem(409, "history_purging"), "{}", r.body);
    s.check_ok().await;
}

/// Polls the history of `path` until it lists `want` operations (the retention task runs every
/// second here), or fails after a while.
async fn until_ops(s: &TestServer, path: &str, want: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let all = versions(s, path).await;
        if ops(&all) == want {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{path}: still {:?}, want {want:?}", ops(&all));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn retention_keeps_what_the_policy_says_and_an_off_history_goes() {
    let s = TestServer::start_with(|c| c.tasks.retention_interval = std::time::Duration::from_secs(1)).await;
    s.post("/v1/tables", json!({"name": "few", "history": {"max_versions": 2}})).await;
    s.post("/v1/tables", json!({"name": "young", "history": {"max_age": "2s"}})).await;
    for v in 0..5 {
        s.put("/v1/tables/few/documents/a", json!({"v": v})).await;
        s.put("/v1/tables/young/documents/a", json!({"v": v})).await;
    }
    // the newest two replaced versions stay, with the current one
    until_ops(&s, "/v1/tables/few/documents/a/history", &["update", "update", "update"]).await;
    let kept = versions(&s, "/v1/tables/few/documents/a/history").await;
    let values: Vec<Value> = kept.iter().map(|v| v["document"]["v"].clone()).collect();
    assert_eq!(values, [json!(4), json!(3), json!(2)]);
    // replaced more than two seconds ago: gone; the current version is never removed
    until_ops(&s, "/v1/tables/young/documents/a/history", &["update"]).await;
    // history off: everything kept goes, the heads too — on again, the past is unknown
    s.patch("/v1/tables/few", json!({"history": null})).await;
    let runs = || async {
        let (_, tasks) = s.get("/v1/admin/tasks").await;
        let task = tasks["tasks"].as_array().unwrap().iter().find(|t| t["name"] == "history_retention").cloned();
        task.and_then(|t| t["runs"].as_u64()).unwrap_or(0)
    };
    let before = runs().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // two runs started after the change: one of them ran wholly with history off
    while runs().await < before + 2 {
        assert!(std::time::Instant::now() < deadline, "the retention task did not run");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (st, body) = s.patch("/v1/tables/few", json!({"history": {"max_versions": 5}})).await;
    assert_eq!(st, 200, "{body}");
    s.put("/v1/tables/few/documents/a", json!({"v": 5})).await;
    assert_eq!(ops(&versions(&s, "/v1/tables/few/documents/a/history").await), ["update", "unknown"]);
    s.check_ok().await;
}

#[tokio::test]
async fn a_version_is_restored_as_a_new_write() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "t", "history": {"max_versions": 10}})).await;
    let doc = "/v1/tables/t/documents/a";
    s.put(doc, json!({"v": 1, "note": "good"})).await;
    let good = versions(&s, "/v1/tables/t/documents/a/history").await[0]["at_us"].as_i64().unwrap();
    s.put(doc, json!({"v": 2, "note": "bad"})).await;
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(good) * 1000)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    // If-Match as for a PUT
    let stale = [("if-match", "\"0000000000000000\"")];
    let r = s.send(Method::POST, &format!("{doc}/restore"), Some(&json!({"as_of": at})), &stale).await;
    assert!(r.is_problem(412, "precondition_failed"), "{}", r.body);
    let r = s.send(Method::POST, &format!("{doc}/restore"), Some(&json!({"as_of": at})), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let now = s.send(Method::GET, doc, None, &[]).await;
    assert_eq!(now.body, json!({"_id": "a", "v": 1, "note": "good"}));
    assert_eq!(r.header("etag"), now.header("etag"));
    let all = versions(&s, "/v1/tables/t/documents/a/history").await;
    assert_eq!(ops(&all), ["update", "update", "create"]);
    assert_eq!(all[0]["document"], all[2]["document"]);
    // before the document existed there is nothing to restore
    let r = s.send(Method::POST, &format!("{doc}/restore"), Some(&json!({"as_of": "0"})), &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    // a deleted document comes back
    s.delete(doc).await;
    let r = s.send(Method::POST, &format!("{doc}/restore"), Some(&json!({"as_of": at})), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.get(doc).await.1["note"], "good");
}

/// A backup carries the history: the restored server lists the same versions, reads the same
/// document as of each, and `check` counts them.
#[tokio::test]
async fn a_backup_carries_the_history() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "t", "history": {"max_age": "30d"}})).await;
    for v in 0..4 {
        s.put("/v1/tables/t/documents/a", json!({"v": v})).await;
    }
    s.delete("/v1/tables/t/documents/a").await;
    s.put("/v1/tables/t/documents/b", json!({"v": 9})).await;
    let before = versions(&s, "/v1/tables/t/documents/a/history").await;
    assert_eq!(ops(&before), ["delete", "update", "update", "update", "create"]);
    let archive = s.client.post(format!("{}/v1/admin/backup", s.base)).send().await.unwrap();
    assert_eq!(archive.status(), 200);
    let archive = archive.bytes().await.unwrap().to_vec();

    let dir = tempfile::tempdir().unwrap();
    let restored = mosaicdb::service::backup::restore(
        std::io::Cursor::new(archive),
        mosaicdb::storage::StorageConfig::new(dir.path()),
    )
    .await
    .unwrap();
    assert!(restored.check.ok);
    let r = TestServer::start_in(dir, |_| {}).await;
    assert_eq!(versions(&r, "/v1/tables/t/documents/a/history").await, before);
    assert_eq!(
        versions(&r, "/v1/tables/t/documents/b/history").await,
        versions(&s, "/v1/tables/t/documents/b/history").await
    );
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(before[2]["at_us"].as_i64().unwrap()) * 1000)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let (st, doc) = r.get(&format!("/v1/tables/t/documents/a?as_of={at}")).await;
    assert_eq!((st.as_u16(), &doc), (200, &before[2]["document"]));
    let (_, report) = r.post("/v1/admin/check", json!({})).await;
    // four replaced versions of `a` and its deletion
    assert_eq!(report["checked"]["history_versions"], 5, "{report}");
}

/// One write, one time: every document a batch changes gets the batch's time (an as-of read sees
/// all of it or none of it), and a document changed twice in one batch keeps no version from
/// between the two changes.
#[tokio::test]
async fn a_write_is_one_moment_of_the_history() {
    let s = TestServer::start().await;
    s.post("/v1/tables", json!({"name": "t", "history": {"max_versions": 10}})).await;
    for id in ["a", "b", "d", "e"] {
        s.put(&format!("/v1/tables/t/documents/{id}"), json!({"v": 1})).await;
    }
    let put = |id: &str, v: i64| json!({"op": "put", "table": "t", "id": id, "document": {"v": v}});
    let delete = |id: &str| json!({"op": "delete", "table": "t", "id": id});
    let ops_of = [
        put("a", 2),
        put("b", 2),
        put("c", 1),
        json!({"op": "patch", "table": "t", "id": "c", "document": {"v": 2}}),
        put("d", 2),
        delete("d"),
        delete("e"),
        put("e", 2),
        put("f", 1),
        delete("f"),
    ];
    let (st, body) = s.post("/v1/batch", json!({"operations": ops_of})).await;
    assert_eq!(st, 200, "{body}");
    let history = |id: &'static str| {
        let s = &s;
        async move { versions(s, &format!("/v1/tables/t/documents/{id}/history")).await }
    };
    let (a, b, c, d, e, f) = (
        history("a").await,
        history("b").await,
        history("c").await,
        history("d").await,
        history("e").await,
        history("f").await,
    );
    let at = a[0]["at_us"].clone();
    for (name, h) in [("a", &a), ("b", &b), ("c", &c), ("d", &d), ("e", &e)] {
        assert_eq!(h[0]["at_us"], at, "{name}: {h:?}");
    }
    assert_eq!(ops(&a), ["update", "create"]);
    // created and patched in the write: created, as it is after the write
    assert_eq!(ops(&c), ["create"]);
    assert_eq!(c[0]["document"]["v"], 2);
    // replaced, then deleted: its version from before the write, then the deletion
    assert_eq!(ops(&d), ["delete", "create"]);
    assert_eq!(d[1]["document"]["v"], 1);
    // deleted, then written again: replaced
    assert_eq!(ops(&e), ["update", "create"]);
    assert_eq!((e[0]["document"]["v"].clone(), e[1]["document"]["v"].clone()), (json!(2), json!(1)));
    // created and deleted in the write: nothing to keep
    assert!(f.is_empty(), "{f:?}");
    // as of the write's time: all of it; just before: none of it
    let rfc = |us: i64| {
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(us) * 1000)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let at = at.as_i64().unwrap();
    let (_, now) = s.post("/v1/tables/t/query", json!({"as_of": rfc(at)})).await;
    let (_, before) = s.post("/v1/tables/t/query", json!({"as_of": rfc(at - 1)})).await;
    let vs = |page: &Value| {
        page["documents"].as_array().unwrap().iter().map(|d| (d["_id"].clone(), d["v"].clone())).collect::<Vec<_>>()
    };
    assert_eq!(
        vs(&now),
        [(json!("a"), json!(2)), (json!("b"), json!(2)), (json!("c"), json!(2)), (json!("e"), json!(2))]
    );
    assert_eq!(
        vs(&before),
        [(json!("a"), json!(1)), (json!("b"), json!(1)), (json!("d"), json!(1)), (json!("e"), json!(1))]
    );
    s.check_ok().await;
}

/// A table whose history goes off loses it in writes of a page each (the task never holds a
/// table's whole history): here more than three pages, all gone, the heads with them.
#[tokio::test]
async fn an_off_history_larger_than_a_page_goes_page_by_page() {
    let s = TestServer::start_with(|c| c.tasks.retention_interval = std::time::Duration::from_secs(1)).await;
    s.post("/v1/tables", json!({"name": "big", "history": {"max_versions": 100}})).await;
    // 400 documents of 9 replaced versions and a head: 4000 keys of history
    for v in 0..10 {
        let lines: String = (0..400).map(|d| format!("{{\"_id\": \"d{d}\", \"v\": {v}}}\n")).collect();
        let r = s.raw(Method::POST, "/v1/tables/big/import", "application/x-ndjson", lines).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert_eq!(versions(&s, "/v1/tables/big/documents/d399/history").await.len(), 10);
    let (st, _) = s.patch("/v1/tables/big", json!({"history": null})).await;
    assert_eq!(st, 200);
    // on again only once every key of the old history is gone (409 `history_purging` until then)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = s.send(Method::PATCH, "/v1/tables/big", Some(&json!({"history": {"max_versions": 5}})), &[]).await;
        if r.status == 200 {
            break;
        }
        assert!(r.is_problem(409, "history_purging"), "{}", r.body);
        assert!(std::time::Instant::now() < deadline, "the history was not removed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for d in [0, 199, 399] {
        s.put(&format!("/v1/tables/big/documents/d{d}"), json!({"v": 10})).await;
        let kept = versions(&s, &format!("/v1/tables/big/documents/d{d}/history")).await;
        assert_eq!(ops(&kept), ["update", "unknown"], "d{d}: nothing of the old history is left");
    }
    s.check_ok().await;
}
