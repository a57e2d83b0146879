//! The check of materialized views against stale and missing keys, through the whole database.

use crate::keys::{Component, Number, ViewKey};
use crate::service::{CreateTable, CreateView, Db, DbOptions, Preconditions};
use crate::storage::{Space, StorageConfig, StorageError};
use serde_json::json;

/// View keys written straight into the store, bypassing the write path: each wrong one is
/// reported with its key, and the right ones are not.
#[tokio::test]
async fn check_reports_view_keys_that_differ_from_the_documents() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        Db::open(StorageConfig::new(dir.path()), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    let table: CreateTable = serde_json::from_value(json!({"name": "t"})).unwrap();
    db.pipeline.create_table(table).await.unwrap();
    for v in [
        json!({"name": "f", "kind": "filter", "filter": {"age": {"$gte": 18}}}),
        json!({"name": "g", "kind": "group", "by": ["city"], "aggregates": {"n": "count", "s": "sum(amount)", "lo": "min(age)"}}),
    ] {
        let req: CreateView = serde_json::from_value(v).unwrap();
        db.pipeline.create_view("t".into(), req).await.unwrap();
    }
    for (id, doc) in [
        ("a", json!({"age": 20, "city": "Oslo", "amount": 1.5})),
        ("b", json!({"age": 10, "city": "Oslo", "amount": 2})),
        ("c", json!({"age": 30, "city": "Rome"})),
    ] {
        let doc = doc.as_object().unwrap().clone();
        db.pipeline.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
    }
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.checked.views, 2);
    // members a, c; count f; groups Oslo, Rome; count g; ages 10, 20 (Oslo), 30 (Rome)
    assert_eq!(report.checked.view_keys, 2 + 1 + 2 + 1 + 3, "{report:?}");
    let oslo = || vec![Component::Str("Oslo".into())];
    let group = db.core.store().get(Space::View, &ViewKey::group("t", "g", oslo()).encode()).unwrap().unwrap();
    let mut wrong_group = group.to_vec();
    wrong_group[7] += 1; // the count's last byte
    db.core
        .store()
        .write(move |tx| {
            tx.delete(Space::View, ViewKey::member("t", "f", "a").encode());
            tx.put(Space::View, ViewKey::member("t", "f", "zz").encode(), Vec::new());
            tx.put(Space::View, ViewKey::group("t", "g", oslo()).encode(), wrong_group);
            let ten = Component::Num(Number::Int(10));
            tx.delete(Space::View, ViewKey::value("t", "g", "age", oslo(), ten).encode());
            Ok::<_, StorageError>(())
        })
        .await
        .unwrap();
    let report = crate::service::check(&db).await.unwrap();
    let mut kinds: Vec<_> = report.problems.iter().map(|p| (p.kind, p.key.clone())).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("missing_entry", "view:t:f:m:a".to_owned()),
            ("missing_entry", "view:t:g:x:age:Oslo:10".to_owned()),
            ("orphan_entry", "view:t:f:m:zz".to_owned()),
            ("stale_entry", "view:t:g:g:Oslo".to_owned()),
        ],
        "{report:?}"
    );
    assert!(!report.ok);
}
