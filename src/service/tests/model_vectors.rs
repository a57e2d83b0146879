//! Tests of the vector index through the service: the format 3 layout read and upgraded.

use crate::keys::{Component, MetaKey, VecKey};
use crate::service::core::data_format;
use crate::service::{CreateIndex, CreateTable, Db, DbOptions, Preconditions, VectorSearchRequest};
use crate::storage::{Durability, KeyRange, Space, StorageConfig, StorageError};
use serde_json::{Value, json};
use std::sync::Arc;

async fn nearest(db: &Arc<Db>, q: &[f64]) -> Vec<String> {
    let req = VectorSearchRequest {
        field: "v".into(),
        vector: q.to_vec(),
        k: Some(8),
        ef: Some(200),
        filter: None,
        fields: None,
        exact: false,
        oversampling: None,
    };
    db.vectors.vector_search("t".into(), req).await.unwrap().hits.into_iter().map(|h| h.id).collect()
}

/// A directory of format 3 — vector nodes and links keyed by document id — answers the same
/// searches while it opens, after the upgrade rewrote its keys by slot, and after a reload
/// from those keys; nothing of the old layout is left, and `check` is clean.
#[tokio::test]
async fn a_format_3_index_is_read_then_rewritten_by_slot() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut c = StorageConfig::new(dir.path());
        c.durability = Durability::Buffered;
        c
    };
    let point = |i: u64| -> Vec<f64> { (0..4).map(|d| ((i * 7919 + d * 104_729) % 1000) as f64 / 100.0).collect() };
    let queries: Vec<Vec<f64>> = (0..6).map(|i| point(i * 13 + 5_000)).collect();
    let want = {
        let db = Db::open(config(), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
        let table = CreateTable { name: "t".into(), ..Default::default() };
        db.pipeline.create_table(table).await.unwrap();
        let index =
            json!({"name": "emb", "kind": "vector", "fields": ["v"], "options": {"dimension": 4, "metric": "l2"}});
        db.pipeline.create_index("t".into(), serde_json::from_value::<CreateIndex>(index).unwrap()).await.unwrap();
        for i in 0..300 {
            let Value::Object(doc) = json!({"v": point(i)}) else { unreachable!() };
            db.pipeline.put_document("t".into(), format!("d{i}"), doc, Preconditions::default()).await.unwrap();
        }
        let mut want = Vec::new();
        for q in &queries {
            want.push(nearest(&db, q).await);
        }
        // the same graph in format 3's keys
        let view = || db.core.store.committed();
        let cached = db.vectors.graphs.get(&view, &db.core.catalog, "t", "emb").unwrap().unwrap();
        let mut old = Vec::new();
        {
            let g = cached.graph.read().unwrap();
            for id in g.ids() {
                let s = g.slot(id).unwrap();
                let v: Vec<u8> = g.vector(s).unwrap().iter().flat_map(|x| x.to_le_bytes()).collect();
                let mut l = vec![g.level(s) as u8];
                for layer in 0..=g.level(s) {
                    l.extend_from_slice(&(g.links_at(s, layer).len() as u16).to_be_bytes());
                    for &n in g.links_at(s, layer) {
                        let to = g.id(n).unwrap();
                        l.extend_from_slice(&(to.len() as u16).to_be_bytes());
                        l.extend_from_slice(to.as_bytes());
                    }
                }
                let key = |kind: &str| {
                    VecKey::new(
                        "t",
                        "emb",
                        vec![Component::Str(kind.to_owned().into()), Component::Str(id.to_string().into())],
                    )
                    .encode()
                };
                old.push((key("v"), v));
                old.push((key("l"), l));
            }
        }
        db.core
            .store
            .write(move |tx| {
                let keys: Vec<_> = tx.scan(Space::Vec, KeyRange::Prefix(VecKey::index_prefix("t", "emb"))).collect();
                for item in keys {
                    tx.delete(Space::Vec, item?.0.to_vec());
                }
                for (k, v) in old {
                    tx.put(Space::Vec, k, v);
                }
                tx.put(Space::Meta, MetaKey::Format.encode(), 3u32.to_be_bytes().to_vec());
                Ok::<(), StorageError>(())
            })
            .await
            .unwrap();
        db.shutdown().await.unwrap();
        want
    };
    let db = Db::open(config(), DbOptions::default()).unwrap();
    for (q, w) in queries.iter().zip(&want) {
        assert_eq!(&nearest(&db, q).await, w, "while the upgrade is queued");
    }
    for _ in 0..200 {
        if data_format::read(&db.core.store).unwrap() == data_format::DATA_FORMAT {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(data_format::read(&db.core.store).unwrap(), data_format::DATA_FORMAT);
    let view = db.core.store.snapshot();
    let mut kinds = std::collections::BTreeSet::new();
    for item in view.scan(Space::Vec, KeyRange::Prefix(VecKey::index_prefix("t", "emb")), false) {
        let key = item.unwrap().0;
        kinds.insert(VecKey::decode(&key).unwrap().rest[0].to_string());
    }
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["links", "node", "slots"]);
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    for (q, w) in queries.iter().zip(&want) {
        assert_eq!(&nearest(&db, q).await, w, "after the upgrade");
    }
    db.vectors.graphs.forget("t", "emb");
    for (q, w) in queries.iter().zip(&want) {
        assert_eq!(&nearest(&db, q).await, w, "reloaded from the new keys");
    }
}
