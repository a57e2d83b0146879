//! TTL at the service level: the one expiry entry per document through every change, the sweep
//! (and what it leaves when a delete is refused), a TTL index's build and drop, and `check`.

use crate::keys::{TtlKey, table_prefix};
use crate::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions, ServiceError};
use crate::storage::{Durability, KeyRange, Space, StorageConfig};
use serde_json::{Value, json};
use std::sync::Arc;

fn open(dir: &std::path::Path) -> Arc<Db> {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = Durability::Buffered;
    Db::open(cfg, DbOptions { background_jobs: false, backfill_chunk: 2, ..DbOptions::default() }).unwrap()
}

async fn table(db: &Arc<Db>, spec: Value) {
    db.pipeline.create_table(serde_json::from_value::<CreateTable>(spec).unwrap()).await.unwrap();
}

async fn index(db: &Arc<Db>, table: &str, spec: Value) {
    db.pipeline.create_index(table.into(), serde_json::from_value::<CreateIndex>(spec).unwrap()).await.unwrap();
}

async fn put(db: &Arc<Db>, table: &str, id: &str, doc: Value) -> crate::service::Result<bool> {
    let doc = doc.as_object().cloned().unwrap_or_default();
    db.pipeline.put_document(table.into(), id.into(), doc, Preconditions::default()).await.map(|o| o.created)
}

/// The expiry entries of `table`, as (expire_at, id).
fn entries(db: &Db, table: &str) -> Vec<(i64, String)> {
    db.core
        .store()
        .snapshot()
        .scan(Space::Ttlidx, KeyRange::Prefix(table_prefix(table)), false)
        .map(|r| {
            let (k, _) = r.unwrap();
            let k = TtlKey::decode(&k).unwrap();
            (k.expire_at, k.id.into_owned())
        })
        .collect()
}

fn keys_under(db: &Db, space: Space, table: &str) -> usize {
    db.core.store().snapshot().scan(space, KeyRange::Prefix(table_prefix(table)), false).count()
}

async fn check_ok(db: &Arc<Db>) {
    let report = crate::service::check(db).await.unwrap();
    assert!(report.ok, "{report:?}");
}

async fn settled(db: &Arc<Db>, table: &str, name: &str) {
    for _ in 0..500 {
        let ready = db.core.catalog().index(table, name).is_none_or(|d| d.is_ready())
            && db.core.catalog().index_dropping(table, name).is_none();
        if ready {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("index {name} did not settle");
}

#[tokio::test]
async fn one_entry_follows_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    table(&db, json!({"name": "s"})).await;
    put(&db, "s", "a", json!({"_expires_at": 5000})).await.unwrap();
    assert_eq!(entries(&db, "s"), [(5000, "a".to_owned())]);
    // RFC 3339 and epoch ms are the same time
    put(&db, "s", "a", json!({"_expires_at": "1970-01-01T00:00:07Z", "x": 1})).await.unwrap();
    assert_eq!(entries(&db, "s"), [(7000, "a".to_owned())]);
    db.pipeline
        .patch_document("s".into(), "a".into(), json!({"_expires_at": 9000}), Preconditions::default())
        .await
        .unwrap_err(); // expired at 7000: gone for a patch
    let far = crate::service::core::clock::now_ms() + 3_600_000;
    put(&db, "s", "a", json!({"_expires_at": far})).await.unwrap();
    assert_eq!(entries(&db, "s"), [(far, "a".to_owned())]);
    db.pipeline
        .patch_document("s".into(), "a".into(), json!({"_expires_at": far + 1}), Preconditions::default())
        .await
        .unwrap();
    assert_eq!(entries(&db, "s"), [(far + 1, "a".to_owned())]);
    // removing the field removes the entry
    db.pipeline
        .patch_document("s".into(), "a".into(), json!({"_expires_at": null}), Preconditions::default())
        .await
        .unwrap();
    assert!(entries(&db, "s").is_empty());
    put(&db, "s", "b", json!({"_expires_at": far})).await.unwrap();
    db.pipeline.delete_document("s".into(), "b".into(), Preconditions::default()).await.unwrap();
    assert!(entries(&db, "s").is_empty());
    check_ok(&db).await;
    // what is not a time is refused and nothing is stored
    for bad in [json!("soon"), json!(1.5), json!(true), json!({"at": 1})] {
        let e = put(&db, "s", "c", json!({ "_expires_at": bad })).await.unwrap_err();
        assert!(matches!(e, ServiceError::InvalidExpiry(_)), "{e}");
    }
    assert!(db.pipeline.get_document("s".into(), "c".into()).await.is_err());
    // typed tables take the system field too
    table(&db, json!({"name": "typed", "columns": [{"name": "n", "type": "int"}]})).await;
    put(&db, "typed", "x", json!({"n": 1, "_expires_at": far})).await.unwrap();
    assert_eq!(entries(&db, "typed"), [(far, "x".to_owned())]);
}

#[tokio::test]
async fn an_expired_document_is_gone_for_writes_before_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    table(&db, json!({"name": "s"})).await;
    put(&db, "s", "a", json!({"_expires_at": 1000, "v": 1})).await.unwrap();
    assert!(matches!(
        db.pipeline.get_document("s".into(), "a".into()).await,
        Err(ServiceError::DocumentNotFound { .. })
    ));
    let e = db.pipeline.delete_document("s".into(), "a".into(), Preconditions::default()).await.unwrap_err();
    assert!(matches!(e, ServiceError::DocumentNotFound { .. }), "{e}");
    let any = Preconditions { if_match: Some(crate::service::EtagMatch::Any), if_none_match: None };
    let e = db.pipeline.put_document("s".into(), "a".into(), Default::default(), any).await.unwrap_err();
    assert!(matches!(e, ServiceError::PreconditionFailed(_)), "{e}");
    // a PUT creates it again: one document counted, one entry (none: no expiry now)
    assert!(put(&db, "s", "a", json!({"v": 2})).await.unwrap());
    assert!(entries(&db, "s").is_empty());
    assert_eq!(db.pipeline.list_documents("s".into(), 10, None).await.unwrap().documents.len(), 1);
    check_ok(&db).await;
}

#[tokio::test]
async fn the_sweep_removes_expired_documents_with_all_their_entries() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    table(&db, json!({"name": "v"})).await;
    table(&db, json!({"name": "e", "kind": "edge", "on_vertex_delete": "cascade"})).await;
    table(&db, json!({"name": "r", "kind": "edge"})).await;
    index(&db, "v", json!({"name": "g", "kind": "hash", "fields": ["g"]})).await;
    index(&db, "v", json!({"name": "n", "kind": "range", "fields": ["n"]})).await;
    index(&db, "v", json!({"name": "ft", "kind": "fulltext", "fields": ["text"]})).await;
    let now = crate::service::core::clock::now_ms();
    let vertex = |exp: Option<i64>| {
        let mut doc = json!({"g": "x", "n": 3, "text": "quick brown fox"});
        if let Some(t) = exp {
            doc["_expires_at"] = json!(t);
        }
        doc
    };
    for id in ["old", "older", "new"] {
        put(&db, "v", id, vertex(Some(now + 3_600_000))).await.unwrap();
    }
    put(&db, "v", "kept", vertex(None)).await.unwrap();
    put(&db, "e", "e1", json!({"_from": "v/old", "_to": "v/new"})).await.unwrap();
    // an expired vertex with an edge in a reject table is not deleted: skipped, and counted
    put(&db, "r", "r1", json!({"_from": "v/older", "_to": "v/new"})).await.unwrap();
    // no edge may name an expired vertex, but a vertex may expire with its edges in place
    put(&db, "v", "old", vertex(Some(now - 1000))).await.unwrap();
    put(&db, "v", "older", vertex(Some(now - 2000))).await.unwrap();
    let e = put(&db, "e", "e3", json!({"_from": "v/old", "_to": "v/new"})).await.unwrap_err();
    assert!(matches!(e, ServiceError::InvalidDocument(_)), "{e}");
    // an edge that expires itself
    put(&db, "e", "e2", json!({"_from": "v/new", "_to": "v/kept", "_expires_at": now - 1})).await.unwrap();
    check_ok(&db).await;
    let outcome = db.pipeline.sweep_expired(now, 1000).await.unwrap();
    assert_eq!((outcome.removed, outcome.skipped, outcome.more), (2, 1, false), "{outcome:?}");
    for gone in ["old"] {
        assert!(db.pipeline.get_document("v".into(), gone.into()).await.is_err());
    }
    assert!(db.pipeline.get_document("e".into(), "e1".into()).await.is_err(), "cascaded");
    assert_eq!(entries(&db, "v").len(), 2, "older (refused) and new");
    assert_eq!(entries(&db, "e").len(), 0);
    assert_eq!(keys_under(&db, Space::Entity, "v"), 3);
    // one hash and one range entry per document left; postings hold three documents
    assert_eq!(keys_under(&db, Space::Idx, "v"), 3);
    assert_eq!(keys_under(&db, Space::Ridx, "v"), 3);
    check_ok(&db).await;
    // once the reject edge is gone, the next sweep takes it; a budget bounds the work
    db.pipeline.delete_document("r".into(), "r1".into(), Preconditions::default()).await.unwrap();
    let outcome = db.pipeline.sweep_expired(now, 0).await.unwrap();
    assert_eq!((outcome.removed, outcome.more), (0, true));
    let outcome = db.pipeline.sweep_expired(now, 10).await.unwrap();
    assert_eq!((outcome.removed, outcome.skipped), (1, 0));
    assert_eq!(db.pipeline.sweep_expired(now, 10).await.unwrap(), Default::default());
    check_ok(&db).await;
}

#[tokio::test]
async fn the_sweep_leaves_a_refreshed_document_and_repairs_stray_entries() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    table(&db, json!({"name": "s"})).await;
    let far = crate::service::core::clock::now_ms() + 3_600_000;
    put(&db, "s", "a", json!({"_expires_at": far})).await.unwrap();
    // an entry the document does not have (as a crash of an older version could leave)
    let stray = TtlKey::new("s", 10, "a").encode();
    db.core
        .store()
        .write(move |tx| {
            tx.put(Space::Ttlidx, stray, vec![]);
            Ok::<_, crate::storage::StorageError>(())
        })
        .await
        .unwrap();
    let report = crate::service::check(&db).await.unwrap();
    assert_eq!(report.problems.iter().map(|p| p.kind).collect::<Vec<_>>(), ["stale_entry"], "{report:?}");
    let outcome = db.pipeline.sweep_expired(crate::service::core::clock::now_ms(), 10).await.unwrap();
    assert_eq!((outcome.removed, outcome.repaired), (0, 1));
    assert!(db.pipeline.get_document("s".into(), "a".into()).await.is_ok());
    check_ok(&db).await;
}

#[tokio::test]
async fn a_ttl_index_builds_and_drops_its_expiries() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    table(&db, json!({"name": "s"})).await;
    let now = crate::service::core::clock::now_ms();
    // expires by the index: created two hours ago, expire_after 1h
    put(&db, "s", "old", json!({"created": now - 7_200_000})).await.unwrap();
    // its own expiry is earlier than the index's
    put(&db, "s", "own", json!({"created": "2000-01-01T00:00:00Z", "_expires_at": 5})).await.unwrap();
    put(&db, "s", "fresh", json!({"created": now})).await.unwrap();
    put(&db, "s", "none", json!({"created": "not a time"})).await.unwrap();
    put(&db, "s", "later", json!({"_expires_at": now + 9_000_000})).await.unwrap();
    let bad: CreateIndex = serde_json::from_value(
        json!({"name": "x", "kind": "ttl", "fields": ["created"], "options": {"expire_after": "1y"}}),
    )
    .unwrap();
    assert!(matches!(db.pipeline.create_index("s".into(), bad).await, Err(ServiceError::InvalidRequest(_))));
    index(&db, "s", json!({"name": "ttl", "kind": "ttl", "fields": ["created"], "options": {"expire_after": "1h"}}))
        .await;
    settled(&db, "s", "ttl").await;
    assert_eq!(db.pipeline.get_index("s".into(), "ttl".into()).await.unwrap().options["expire_after"], "1h");
    let mut want = vec![
        (5, "own".to_owned()),
        (now - 7_200_000 + 3_600_000, "old".to_owned()),
        (now + 3_600_000, "fresh".to_owned()),
        (now + 9_000_000, "later".to_owned()),
    ];
    want.sort();
    assert_eq!(entries(&db, "s"), want);
    check_ok(&db).await;
    assert!(db.pipeline.get_document("s".into(), "old".into()).await.is_err(), "expired by the index");
    // a write while the index exists moves by it
    put(&db, "s", "fresh", json!({"created": now + 1})).await.unwrap();
    assert!(entries(&db, "s").contains(&(now + 3_600_001, "fresh".to_owned())));
    // dropping it: expiries that came from it go, the others stay
    db.pipeline.drop_index("s".into(), "ttl".into()).await.unwrap();
    settled(&db, "s", "ttl").await;
    assert_eq!(entries(&db, "s"), [(5, "own".to_owned()), (now + 9_000_000, "later".to_owned())]);
    assert!(db.pipeline.get_document("s".into(), "old".into()).await.is_ok(), "no longer expired");
    check_ok(&db).await;
}
