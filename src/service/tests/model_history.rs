//! The consistency check of the history family against damaged keys.

use crate::keys::HistKey;
use crate::service::history::{How, encode_head, encode_version};
use crate::service::{CreateTable, Db, DbOptions, Preconditions};
use crate::storage::{Space, StorageConfig, StorageError};
use serde_json::json;
use std::sync::Arc;

async fn put(db: &Arc<Db>, id: &str, v: i64) {
    let doc = json!({"v": v}).as_object().unwrap().clone();
    db.pipeline.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
}

async fn raw(db: &Arc<Db>, delete: Option<Vec<u8>>, put: Option<(Vec<u8>, Vec<u8>)>) {
    db.core
        .store()
        .write(move |tx| {
            if let Some(key) = delete {
                tx.delete(Space::Hist, key);
            }
            if let Some((key, value)) = put {
                tx.put(Space::Hist, key, value);
            }
            Ok::<_, StorageError>(())
        })
        .await
        .unwrap();
}

fn kinds(report: &crate::service::CheckReport) -> Vec<(&str, &str)> {
    let mut k: Vec<_> = report.problems.iter().map(|p| (p.kind, p.key.as_str())).collect();
    k.sort();
    k
}

#[tokio::test]
async fn the_check_finds_a_history_that_does_not_hold_together() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        Db::open(StorageConfig::new(dir.path()), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    let table: CreateTable = serde_json::from_value(json!({"name": "t", "history": {"max_versions": 9}})).unwrap();
    db.pipeline.create_table(table).await.unwrap();
    for id in ["a", "b", "c"] {
        put(&db, id, 1).await;
        put(&db, id, 2).await;
    }
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.checked.history_versions, 3);

    // a's head gone; b's head before its last kept version; a version that does not decode
    // under c; a head of a document that does not exist
    raw(&db, Some(HistKey::head("t", "a").encode()), None).await;
    raw(&db, None, Some((HistKey::head("t", "b").encode(), encode_head(How::Updated, -1)))).await;
    raw(&db, None, Some((HistKey::version("t", "c", 5).encode(), vec![7]))).await;
    let ghost = (HistKey::head("t", "ghost").encode(), encode_head(How::Created, 9));
    raw(&db, None, Some(ghost)).await;
    // and one whose history ends in a version but not a deletion, though it is gone
    raw(&db, None, Some((HistKey::version("t", "gone", 3).encode(), encode_version(How::Created, Some(&[1, 2])))))
        .await;
    let report = crate::service::check(&db).await.unwrap();
    assert!(!report.ok);
    let found = kinds(&report);
    for want in [
        ("history_order", "hist:t:b"),
        ("missing_entry", "hist:t:a"),
        ("missing_entry", "hist:t:gone"),
        ("orphan_entry", "hist:t:ghost"),
        ("undecodable_history", "hist:t:c:5"),
    ] {
        assert!(found.contains(&want), "{want:?} not in {found:?}");
    }
}
