//! The check of the fulltext family against damaged and stale keys, through the whole database.

use crate::keys::{FtStatKey, FtidxKey};
use crate::service::search::block::{self, Decoded, PostingIn};
use crate::service::search::postings;
use crate::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions};
use crate::storage::{KeyRange, Space, StorageConfig};
use serde_json::json;
use std::sync::Arc;

async fn db(dir: &std::path::Path) -> Arc<Db> {
    let db = Db::open(StorageConfig::new(dir), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    db.pipeline.create_table(serde_json::from_value::<CreateTable>(json!({"name": "t"})).unwrap()).await.unwrap();
    let req: CreateIndex = serde_json::from_value(json!({"name": "ft", "kind": "fulltext",
        "fields": ["title", "tags"], "options": {"language": "none"}}))
    .unwrap();
    db.pipeline.create_index("t".into(), req).await.unwrap();
    for (id, doc) in [
        ("a", json!({"title": "graph data", "tags": ["graph", "x y"]})),
        ("b", json!({"title": "data data", "n": 1})),
        ("c", json!({"n": 2})),
    ] {
        let doc = doc.as_object().unwrap().clone();
        db.pipeline.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
    }
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.checked.postings, 5, "a: graph data x y, b: data");
    db
}

fn kinds(report: &crate::service::CheckReport) -> Vec<&'static str> {
    let mut k: Vec<_> = report.problems.iter().map(|p| p.kind).collect();
    k.sort();
    k
}

async fn raw(db: &Arc<Db>, f: impl FnOnce(&mut crate::storage::WriteTx<'_>) + Send + 'static) {
    db.core
        .store()
        .write(move |tx| {
            f(tx);
            Ok::<_, crate::storage::StorageError>(())
        })
        .await
        .unwrap();
}

/// The number of document `id`.
fn num_of(db: &Arc<Db>, id: &str) -> u64 {
    let view = db.core.store().snapshot();
    let record = view.get(Space::Ftstat, &FtStatKey::doc_len("t", "ft", id).encode()).unwrap().unwrap();
    postings::LenRecord::decode(&record).unwrap().num
}

/// The block of `token` holding document `id`, with its key's number.
fn block_of(db: &Arc<Db>, token: &str, id: &str) -> (Vec<u8>, Vec<u8>, u64) {
    let num = num_of(db, id);
    let view = db.core.store().snapshot();
    let found = view
        .scan(Space::Ftidx, KeyRange::Prefix(FtidxKey::token_prefix("t", "ft", token)), false)
        .map(Result::unwrap)
        .find(|(k, v)| {
            let mut d = Decoded::default();
            d.load(FtidxKey::decode(k).unwrap().first, v).unwrap();
            d.docs.contains(&num)
        });
    let (k, v) = found.unwrap();
    let first = FtidxKey::decode(&k).unwrap().first;
    (k.to_vec(), v.to_vec(), first)
}

#[tokio::test]
async fn check_reports_postings_and_statistics_the_documents_do_not_support() {
    // a block gone: the posting is missing, and the counts no longer add up
    let dir = tempfile::tempdir().unwrap();
    let d = db(dir.path()).await;
    let (key, _, _) = block_of(&d, "x", "a");
    raw(&d, move |tx| tx.delete(Space::Ftidx, key)).await;
    let report = crate::service::check(&d).await.unwrap();
    assert_eq!(kinds(&report), ["count_mismatch", "missing_entry", "stat_mismatch"], "{report:?}");

    // a posting whose positions were changed
    let dir = tempfile::tempdir().unwrap();
    let d = db(dir.path()).await;
    let (key, value, first) = block_of(&d, "data", "b");
    let b = num_of(&d, "b");
    let mut dec = Decoded::default();
    dec.load(first, &value).unwrap();
    dec.locate_positions().unwrap();
    let mut moved = Vec::new();
    block::encode_positions(&mut moved, &[0, 5]);
    let mut ins: Vec<PostingIn<'_>> = (0..dec.len()).map(|i| dec.posting_in(i)).collect();
    for p in &mut ins {
        if p.num == b {
            p.positions = &moved;
        }
    }
    let block = block::encode(first, &ins);
    raw(&d, move |tx| tx.put(Space::Ftidx, key, block)).await;
    assert_eq!(kinds(&crate::service::check(&d).await.unwrap()), ["stale_entry"]);

    // a block whose head claims a larger frequency than its postings hold
    let dir = tempfile::tempdir().unwrap();
    let d = db(dir.path()).await;
    let (key, value, _) = block_of(&d, "data", "b");
    let (_, _, rest) = block::head(&value).unwrap();
    let n = block::len(&value).unwrap();
    let mut wrong = vec![1, 99, 1, u8::try_from(n).unwrap()];
    wrong.extend_from_slice(rest);
    raw(&d, move |tx| tx.put(Space::Ftidx, key, wrong)).await;
    assert_eq!(kinds(&crate::service::check(&d).await.unwrap()), ["stale_entry"]);

    // a number entry naming another document
    let dir = tempfile::tempdir().unwrap();
    let d = db(dir.path()).await;
    let a = num_of(&d, "a");
    raw(&d, move |tx| tx.put(Space::Ftstat, FtStatKey::doc("t", "ft", a).encode(), b"b".to_vec())).await;
    assert_eq!(kinds(&crate::service::check(&d).await.unwrap()), ["stale_entry", "stale_entry"]);

    // statistics off by one, and a length record of a document that does not exist
    let dir = tempfile::tempdir().unwrap();
    let d = db(dir.path()).await;
    raw(&d, |tx| {
        let stat = postings::Stat { n: 3, total: 6, next: 3 };
        tx.put(Space::Ftstat, FtStatKey::stat("t", "ft").encode(), stat.encode());
        tx.put(Space::Ftstat, FtStatKey::term("t", "ft", "ghost").encode(), Vec::new());
        let record = postings::LenRecord { len: 1, num: 1 };
        tx.put(Space::Ftstat, FtStatKey::doc_len("t", "ft", "zz").encode(), record.encode());
    })
    .await;
    let report = crate::service::check(&d).await.unwrap();
    assert_eq!(kinds(&report), ["orphan_entry", "stat_mismatch", "stat_mismatch"], "{report:?}");
}
