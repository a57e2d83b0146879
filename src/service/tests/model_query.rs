//! Whole-database tests of the query model: covered queries against the keys, and a streamed
//! answer's bounded sort (they open a `Db`, so they live beside it, not in the model's folder).

use crate::service::query::QueryRequest;
use crate::service::query::stream::MAX_STREAM_SORT_BYTES;
use crate::service::{Db, DbOptions, ServiceError};
use crate::storage::Space;
use crate::storage::StorageConfig;
use serde_json::Value;
use serde_json::json;

/// A typed table `t` (`age` int, `name` string) with a range index on `age` and four
/// documents a, b, c, d aged 10 to 40, in a database without background jobs.
async fn typed_table_by_age() -> (tempfile::TempDir, std::sync::Arc<crate::service::Db>) {
    use crate::service::{CreateIndex, CreateTable, Preconditions};
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { background_jobs: false, ..DbOptions::default() };
    let db = Db::open(StorageConfig::new(dir.path()), options).unwrap();
    let table: CreateTable = serde_json::from_value(json!({"name": "t", "columns": [
        {"name": "age", "type": "int"}, {"name": "name", "type": "string"}]}))
    .unwrap();
    db.pipeline.create_table(table).await.unwrap();
    let index: CreateIndex =
        serde_json::from_value(json!({"name": "by_age", "kind": "range", "fields": ["age"]})).unwrap();
    db.pipeline.create_index("t".into(), index).await.unwrap();
    for (id, age) in [("a", 10), ("b", 20), ("c", 30), ("d", 40)] {
        let doc = json!({"age": age, "name": id}).as_object().unwrap().clone();
        db.pipeline.put_document("t".into(), id.into(), doc, Preconditions::default()).await.unwrap();
    }
    (dir, db)
}

/// A covered query reads no document: with a matching document's entity key removed from
/// the store behind the index's back, the covered query still returns it from its key, while
/// the same query asking for a field outside the index (so reading documents) does not.
#[tokio::test]
async fn covered_results_come_from_the_keys_alone() {
    use crate::keys::EntityKey;
    use crate::service::{QueryRequest, QueryResult};
    let (_dir, db) = typed_table_by_age().await;
    let query = |fields: &[&str], explain: bool| {
        let req = json!({"filter": {"age": {"$gte": 20}}, "fields": fields, "explain": explain});
        let req: QueryRequest = serde_json::from_value(req).unwrap();
        let db = db.clone();
        async move { db.query.query("t".into(), req).await.unwrap() }
    };
    let page = |r: QueryResult| match r {
        QueryResult::Page(p) => p.documents.iter().map(|d| serde_json::from_slice(d).unwrap()).collect::<Vec<Value>>(),
        QueryResult::Explain(e) => panic!("{e:?}"),
    };
    let plan = |r: QueryResult| match r {
        QueryResult::Explain(e) => e.plan,
        QueryResult::Page(_) => panic!("not a plan"),
    };
    let covered = plan(query(&["_id", "age"], true).await);
    assert!(covered.covered && covered.documents_read == 0, "{covered:?}");
    let read = plan(query(&["_id", "name"], true).await);
    assert!(!read.covered && read.documents_read == 3, "{read:?}");
    let want = vec![json!({"_id": "b", "age": 20}), json!({"_id": "c", "age": 30}), json!({"_id": "d", "age": 40})];
    assert_eq!(page(query(&["_id", "age"], false).await), want);
    let key = EntityKey::new("t", "c").encode();
    db.core
        .store()
        .write(move |tx| {
            tx.delete(Space::Entity, key);
            Ok::<_, crate::storage::StorageError>(())
        })
        .await
        .unwrap();
    assert_eq!(page(query(&["_id", "age"], false).await), want, "the covered query read no document");
    let names: Vec<Value> = page(query(&["name"], false).await).into_iter().map(|d| d["_id"].clone()).collect();
    assert_eq!(names, [json!("b"), json!("d")], "the uncovered query reads the documents");
}

/// A covered query skips exactly the documents the uncovered one finds expired: an expiry
/// entry that no rule of the table stands behind (as a TTL index being dropped leaves until
/// its entries are repaired) hides nothing. `_expires_at` is in use (another table), so the
/// table has expiry rules and the covered plan reads the expiry entries.
#[tokio::test]
async fn a_stale_expiry_entry_hides_nothing_from_a_covered_query() {
    use crate::keys::TtlKey;
    use crate::service::{Preconditions, QueryRequest, QueryResult};
    let (_dir, db) = typed_table_by_age().await;
    db.pipeline.create_table(serde_json::from_value(json!({"name": "other"})).unwrap()).await.unwrap();
    let later = json!({"_expires_at": "2999-01-01T00:00:00Z"}).as_object().unwrap().clone();
    db.pipeline.put_document("other".into(), "x".into(), later, Preconditions::default()).await.unwrap();
    // a stale entry: "c" expired long ago, says the entry; no rule of "t" says so
    let key = TtlKey::new("t", 1_000, "c").encode();
    db.core
        .store()
        .write(move |tx| {
            tx.put(Space::Ttlidx, key, Vec::new());
            Ok::<_, crate::storage::StorageError>(())
        })
        .await
        .unwrap();
    let ids = |fields: &[&str], explain: bool| {
        let req = json!({"filter": {"age": {"$gte": 20}}, "fields": fields, "explain": explain});
        let req: QueryRequest = serde_json::from_value(req).unwrap();
        let db = db.clone();
        async move {
            match db.query.query("t".into(), req).await.unwrap() {
                QueryResult::Page(p) => p
                    .documents
                    .iter()
                    .map(|d| serde_json::from_slice::<Value>(d).unwrap()["_id"].clone())
                    .collect::<Vec<_>>(),
                QueryResult::Explain(e) => vec![json!(e.plan.covered)],
            }
        }
    };
    assert_eq!(ids(&["_id", "age"], true).await, [json!(true)], "the query is covered");
    let covered = ids(&["_id", "age"], false).await;
    let uncovered = ids(&["_id", "name"], false).await;
    assert_eq!(uncovered, [json!("b"), json!("c"), json!("d")]);
    assert_eq!(covered, uncovered);
}

/// A sort no index gives keeps its results' sort values in memory: fewer than
/// [`MAX_STREAM_SORT`] results whose sort values take more than [`MAX_STREAM_SORT_BYTES`] are
/// refused (422 `stream_sort_too_large`) before the answer starts, not held.
#[tokio::test]
async fn a_stream_sort_is_bounded_by_bytes_too() {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { background_jobs: false, ..DbOptions::default() };
    let db = Db::open(StorageConfig::new(dir.path()), options).unwrap();
    db.pipeline.create_table(serde_json::from_value(json!({"name": "t"})).unwrap()).await.unwrap();
    let n = 9_000;
    let long = "x".repeat(MAX_STREAM_SORT_BYTES / n + 1);
    for chunk in 0..9 {
        let docs = (0..n / 9).map(|i| json!({"_id": format!("d{chunk}-{i}"), "s": format!("{long}{i}")})).collect();
        db.pipeline.insert_documents("t".into(), docs).await.unwrap();
    }
    let req = |sort: &str| serde_json::from_value::<QueryRequest>(json!({"sort": [sort], "fields": ["_id"]})).unwrap();
    let err = db.query.query_stream("t".into(), req("s")).await.err().unwrap();
    assert!(matches!(err, ServiceError::StreamSortTooLargeBytes { .. }), "{err:?}");
    assert_eq!(err.code(), "stream_sort_too_large");
    // sorting by `_id` is the scan's order: nothing is held
    let stream = db.query.query_stream("t".into(), req("_id")).await.unwrap();
    let mut out = Vec::new();
    assert_eq!(stream.write_to(&mut out).unwrap(), n as u64);
}
