//! Tests of the fulltext family against a database: how writes lay postings out, and the
//! upgrade of an older directory. (A file of their own: the modules under test are imported by
//! `service`, which these tests use.)

use crate::keys::{FtStatKey, FtidxKey, KeyWriter, MetaKey};
use crate::service::core::data_format;
use crate::service::search::{SearchRequest, block};
use crate::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions};
use crate::storage::{KeyRange, Space, StorageConfig, StorageError};
use serde_json::{Value, json};
use std::sync::Arc;

async fn table_with_index(db: &Arc<Db>, fields: Value) {
    db.pipeline.create_table(serde_json::from_value::<CreateTable>(json!({"name": "t"})).unwrap()).await.unwrap();
    let req: CreateIndex = serde_json::from_value(
        json!({"name": "ft", "kind": "fulltext", "fields": fields, "options": {"language": "none"}}),
    )
    .unwrap();
    db.pipeline.create_index("t".into(), req).await.unwrap();
}

/// Postings written one document a write fill the token's last block rather than starting one
/// each; a removal rewrites the block it cuts, and the writes after it start afresh.
#[tokio::test]
async fn single_document_writes_fill_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        Db::open(StorageConfig::new(dir.path()), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    table_with_index(&db, json!(["body"])).await;
    let put = |i: usize| {
        let doc = json!({"body": format!("common word{}", i % 3)}).as_object().unwrap().clone();
        db.pipeline.put_document("t".into(), format!("d{i:04}"), doc, Preconditions::default())
    };
    let sizes = |token: &str| -> Vec<u64> {
        let view = db.core.store().snapshot();
        view.scan(Space::Ftidx, KeyRange::Prefix(FtidxKey::token_prefix("t", "ft", token)), false)
            .map(|i| block::len(&i.unwrap().1).unwrap())
            .collect()
    };
    for i in 0..300 {
        put(i).await.unwrap();
    }
    assert_eq!(sizes("common"), [128, 128, 44]);
    assert_eq!(sizes("word1"), [100]);
    db.pipeline.delete_document("t".into(), "d0299".into(), Preconditions::default()).await.unwrap();
    for i in 300..310 {
        put(i).await.unwrap();
    }
    // the cut forgot the last block: the next write started one, later writes fill it
    assert_eq!(sizes("common"), [128, 128, 43, 10]);
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{report:?}");
}

async fn search(db: &Arc<Db>, query: &str) -> Value {
    let req: SearchRequest = serde_json::from_value(json!({"query": query, "limit": 20})).unwrap();
    serde_json::from_slice(&db.search.search("t".into(), req).await.unwrap()).unwrap()
}

const QUERIES: [&str; 4] = ["graph", "data OR tree", "\"graph data\"", "gra*"];

/// A directory of format 4 (its fulltext keys replaced by ones of the old shapes) opens, is
/// rebuilt in the stamping write, and answers as before; `check` finds it exact.
#[tokio::test]
async fn a_format_4_directory_gets_its_fulltext_indexes_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let want = {
        let db = Db::open(StorageConfig::new(dir.path()), DbOptions::default()).unwrap();
        table_with_index(&db, json!(["title", "tags"])).await;
        let words = ["graph", "data", "tree", "grape", "node"];
        for i in 0..300usize {
            let title: Vec<&str> = (0..1 + i % 7).map(|k| words[(i * 7 + k * k) % words.len()]).collect();
            let doc = json!({"title": title.join(" "), "tags": [words[i % 5], "x"]});
            let doc = doc.as_object().unwrap().clone();
            db.pipeline.put_document("t".into(), format!("d{i:03}"), doc, Preconditions::default()).await.unwrap();
        }
        for _ in 0..500 {
            if db.core.catalog().index("t", "ft").unwrap().is_ready() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let mut want = Vec::new();
        for q in QUERIES {
            want.push(search(&db, q).await);
        }
        // format 4's shapes: blocks keyed by write and first id, two-number statistics
        db.core
            .store()
            .write(move |tx| {
                let keys: Vec<_> = tx.scan(Space::Ftidx, KeyRange::Prefix(FtidxKey::index_prefix("t", "ft"))).collect();
                for item in keys {
                    tx.delete(Space::Ftidx, item?.0.to_vec());
                }
                for prefix in FtStatKey::index_prefixes("t", "ft") {
                    let keys: Vec<_> = tx.scan(Space::Ftstat, KeyRange::Prefix(prefix)).collect();
                    for item in keys {
                        tx.delete(Space::Ftstat, item?.0.to_vec());
                    }
                }
                let old = KeyWriter::default().str("t").str("ft").str("graph").num(3u64).str("d001").finish();
                tx.put(Space::Ftidx, old, vec![0, 1, 1, 3, 1, 9]);
                tx.put(Space::Ftstat, FtStatKey::stat("t", "ft").encode(), [0u8; 16].to_vec());
                tx.put(Space::Meta, MetaKey::Seq("ftblock".into()).encode(), 3u64.to_be_bytes().to_vec());
                tx.put(Space::Meta, MetaKey::Format.encode(), 4u32.to_be_bytes().to_vec());
                Ok::<(), StorageError>(())
            })
            .await
            .unwrap();
        db.shutdown().await.unwrap();
        want
    };
    let db = Db::open(StorageConfig::new(dir.path()), DbOptions::default()).unwrap();
    for _ in 0..500 {
        if data_format::read(db.core.store()).unwrap() == data_format::DATA_FORMAT {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(data_format::read(db.core.store()).unwrap(), data_format::DATA_FORMAT);
    for (q, w) in QUERIES.iter().zip(&want) {
        assert_eq!(&search(&db, q).await, w, "{q}");
    }
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert!(db.core.store().get(Space::Meta, &MetaKey::Seq("ftblock".into()).encode()).unwrap().is_none());
}
