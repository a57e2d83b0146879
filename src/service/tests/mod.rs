//! Service tests that need to hold the committer at a chosen point, which HTTP cannot.

use super::*;

// the database's tests of one model each, through the whole database (the checker, restarts,
// upgrades); each model's own unit tests stay in its folder
mod check_fulltext;
mod check_view;
mod model_history;
mod model_query;
mod model_search;
mod model_timeseries;
mod model_timeseries_retention;
mod model_ttl;
mod model_vectors;
use crate::catalog::{ColumnDef, IndexDef, IndexKind, IndexState};
use crate::storage::{Durability, StorageError};
use serde_json::{Map, Value, json};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

fn open(dir: &std::path::Path) -> Arc<Db> {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = Durability::Buffered;
    Db::open(cfg, DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap()
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Polls a future once: far enough for a write to be prepared and queued.
fn start<F: Future + ?Sized>(f: &mut Pin<Box<F>>) {
    assert!(f.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
}

/// Holds the committer with a write that waits until the returned sender says go: writes queued
/// meanwhile are prepared now and commit, in queue order, once it is released.
/// A pending operation, boxed.
type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

fn hold_committer(db: &Db) -> (std::sync::mpsc::Sender<()>, Pending<'_, crate::storage::Result<()>>) {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let mut hold: Pending<'_, _> =
        Box::pin(db.core.store.write(move |_| gate.recv().map_err(|_| StorageError::Aborted)));
    start(&mut hold);
    (release, hold)
}

/// A typed table `t` with an int column `a`; then, behind a held committer, the addition of
/// column `b` (default 7) is queued: writes prepared before the release see the old columns.
async fn table_gaining_a_column(
    db: &Arc<Db>,
) -> (std::sync::mpsc::Sender<()>, Pending<'_, crate::storage::Result<()>>, Pending<'_, Result<crate::catalog::TableDef>>)
{
    let columns =
        Some(vec![ColumnDef { name: "a".into(), ty: "int".parse().unwrap(), nullable: false, default: None }]);
    db.pipeline
        .create_table(CreateTable { name: "t".into(), kind: Default::default(), columns, ..Default::default() })
        .await
        .unwrap();
    let (release, hold) = hold_committer(db);
    let b = ColumnDef { name: "b".into(), ty: "int".parse().unwrap(), nullable: false, default: Some(json!(7)) };
    let mut add: Pending<'_, _> = Box::pin(db.pipeline.add_columns("t".into(), vec![b]));
    start(&mut add);
    (release, hold, add)
}

/// Asserts that each document of `t` got column `b`'s default.
async fn have_the_default(db: &Arc<Db>, ids: &[&str]) {
    for id in ids {
        let doc = db.pipeline.get_document("t".into(), (*id).into()).await.unwrap();
        let doc: Value = serde_json::from_slice(&doc.json).unwrap();
        assert_eq!(doc["b"], 7, "{id}: {doc}");
    }
}

/// Issue 7: a document prepared before a column was added committed without the column's
/// default. Here the committer is held while a PATCH of the table and then writes of a document
/// are queued, so the writes are prepared for the old definition and commit after the new one.
#[tokio::test]
async fn writes_prepared_before_a_column_is_added_get_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (release, hold, add) = table_gaining_a_column(&db).await;
    let mut put =
        Box::pin(db.pipeline.put_document("t".into(), "p".into(), object(json!({"a": 1})), Preconditions::default()));
    start(&mut put);
    let mut insert = Box::pin(db.pipeline.insert_documents("t".into(), vec![json!({"_id": "i", "a": 2})]));
    start(&mut insert);
    let op = |id: &str| BatchOp { op: OpKind::Put, table: "t".into(), id: id.into(), document: Some(json!({"a": 3})) };
    let mut batch = Box::pin(db.pipeline.batch(vec![op("b")]));
    start(&mut batch);

    release.send(()).unwrap();
    hold.await.unwrap();
    add.await.unwrap();
    put.await.unwrap();
    insert.await.unwrap();
    batch.await.unwrap();
    have_the_default(&db, &["p", "i", "b"]).await;
}

/// An import's chunk prepared for the old columns is prepared again when a column is added
/// before it commits, so its lines get the new column's default too.
#[tokio::test]
async fn an_import_chunk_prepared_before_a_column_is_added_gets_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (release, hold, add) = table_gaining_a_column(&db).await;
    // the import reads the table's definition (without b) at its first poll
    let body = b"{\"_id\": \"x\", \"a\": 1}\n{\"_id\": \"y\", \"a\": 2}\n".to_vec();
    let stream = futures_util::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(body))]);
    let limits = ImportLimits { max_line: 1 << 20, window: std::time::Duration::from_secs(60), min_bytes: 1 };
    let mut import = Box::pin(db.pipeline.import("t".into(), stream, limits));
    start(&mut import);

    release.send(()).unwrap();
    hold.await.unwrap();
    add.await.unwrap();
    let report = import.await.unwrap();
    assert_eq!((report.inserted, report.failed), (2, 0), "{report:?}");
    have_the_default(&db, &["x", "y"]).await;
}

/// Found in review: the backfill of a new index and the purge of a dropped table or index were
/// started only after the request's write returned, so a request dropped in between (a 408, a
/// client gone) left the index `building` forever or the name stuck in `dropping` until a restart.
#[tokio::test]
async fn a_dropped_request_still_starts_the_job_its_write_needs() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for t in ["t", "u"] {
        db.pipeline
            .create_table(CreateTable { name: t.into(), kind: Default::default(), columns: None, ..Default::default() })
            .await
            .unwrap();
        db.pipeline
            .put_document(t.into(), "d".into(), object(json!({"a": 1})), Preconditions::default())
            .await
            .unwrap();
    }
    let index = |name: &str| -> crate::service::CreateIndex {
        serde_json::from_value(json!({"name": name, "kind": "hash", "fields": ["a"]})).unwrap()
    };
    db.pipeline.create_index("t".into(), index("gone")).await.unwrap();
    let settled = |db: &Arc<Db>, t: &str, name: &str| {
        db.core.catalog.index(t, name).is_some_and(|d| d.is_ready()) || db.core.catalog.index(t, name).is_none()
    };
    for _ in 0..200 {
        if settled(&db, "t", "gone") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let (release, hold) = hold_committer(&db);
    // each request queues its write, then is dropped as the timeout layer or a leaving client would
    drop(
        Box::pin(db.pipeline.create_index("t".into(), index("i")))
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop())),
    );
    drop(
        Box::pin(db.pipeline.drop_index("t".into(), "gone".into()))
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop())),
    );
    drop(Box::pin(db.pipeline.drop_table("u".into())).as_mut().poll(&mut Context::from_waker(Waker::noop())));
    release.send(()).unwrap();
    hold.await.unwrap();

    let mut done = false;
    for _ in 0..500 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let ready = db.core.catalog.index("t", "i").is_some_and(|d| d.is_ready());
        let index_dropped =
            db.core.catalog.index_dropping("t", "gone").is_none() && db.core.catalog.index("t", "gone").is_none();
        let table_dropped = !db.core.catalog.is_dropping("u") && db.core.catalog.table("u").is_none();
        if ready && index_dropped && table_dropped {
            done = true;
            break;
        }
    }
    assert!(done, "index i: {:?}", db.core.catalog.index("t", "i"));
    assert!(crate::service::check(&db).await.unwrap().ok);
}

/// A PATCH is applied outside the committer to the version it read; a write of the document in
/// between makes it apply again to the new version, never overwrite it.
#[tokio::test]
async fn a_patch_prepared_from_a_version_rewritten_meanwhile_applies_to_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.pipeline
        .create_table(CreateTable { name: "t".into(), kind: Default::default(), columns: None, ..Default::default() })
        .await
        .unwrap();
    let none = Preconditions::default;
    db.pipeline.put_document("t".into(), "d".into(), object(json!({"x": 1})), none()).await.unwrap();

    let (release, hold) = hold_committer(&db);
    let mut put = Box::pin(db.pipeline.put_document("t".into(), "d".into(), object(json!({"x": 2, "y": 2})), none()));
    start(&mut put);
    let mut patch = Box::pin(db.pipeline.patch_document("t".into(), "d".into(), json!({"z": 3}), none()));
    start(&mut patch);
    let patch_op = BatchOp { op: OpKind::Patch, table: "t".into(), id: "d".into(), document: Some(json!({"w": 4})) };
    let mut batch = Box::pin(db.pipeline.batch(vec![patch_op]));
    start(&mut batch);
    release.send(()).unwrap();
    hold.await.unwrap();
    put.await.unwrap();
    patch.await.unwrap();
    batch.await.unwrap();
    let doc: Value =
        serde_json::from_slice(&db.pipeline.get_document("t".into(), "d".into()).await.unwrap().json).unwrap();
    assert_eq!(doc, json!({"_id": "d", "x": 2, "y": 2, "z": 3, "w": 4}));
}

/// Issue 7: when the committer thread dies, the service says it is not writable (`/ready`
/// answers 503 from this) and writes fail as unavailable (503) instead of hanging or a 500.
#[tokio::test]
async fn a_dead_committer_makes_writes_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.pipeline
        .create_table(CreateTable { name: "t".into(), kind: Default::default(), columns: None, ..Default::default() })
        .await
        .unwrap();
    assert!(db.core.is_writable());
    let store = db.core.store.clone();
    tokio::task::spawn_blocking(move || store.kill_committer()).await.unwrap();
    assert!(!db.core.is_writable());
    let e = db.pipeline.put_document("t".into(), "d".into(), Map::new(), Preconditions::default()).await.unwrap_err();
    assert!(matches!(e, ServiceError::Unavailable(StorageError::CommitterDown)), "{e:?}");
    // reads go on
    assert_eq!(db.pipeline.list_tables().await.unwrap().len(), 1);
}

/// `created_at` is the identity of a table or index incarnation: with a clock that does not
/// move (a drop and re-create within one millisecond, or a clock set back), a re-created table
/// and index still get a new one, so the old table's cursor is refused on the new table, and the
/// values go on increasing after a restart.
#[tokio::test]
async fn a_re_created_table_or_index_has_a_new_created_at_on_a_still_clock() {
    use crate::catalog::FROZEN_CLOCK_MS;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let table = || CreateTable { name: "t".into(), kind: Default::default(), columns: None, ..Default::default() };
    let index =
        || -> CreateIndex { serde_json::from_value(json!({"name": "i", "kind": "hash", "fields": ["a"]})).unwrap() };
    FROZEN_CLOCK_MS.store(crate::catalog::now_ms(), Ordering::Relaxed);
    let mut seen = std::collections::BTreeSet::new();
    let mut old_cursor: Option<String> = None;
    for _ in 0..5 {
        let def = db.pipeline.create_table(table()).await.unwrap();
        assert!(seen.insert(def.created_at), "table created_at {} given twice", def.created_at);
        for id in ["a", "b"] {
            db.pipeline
                .put_document("t".into(), id.into(), object(json!({"a": 1})), Preconditions::default())
                .await
                .unwrap();
        }
        if let Some(c) = old_cursor.take() {
            let r = db.pipeline.list_documents("t".into(), 1, Some(c)).await;
            assert!(
                matches!(r, Err(ServiceError::InvalidCursor(_))),
                "the old table's cursor: {:?}",
                r.map(|p| p.cursor)
            );
        }
        old_cursor = db.pipeline.list_documents("t".into(), 1, None).await.unwrap().cursor;
        assert!(old_cursor.is_some());
        for _ in 0..2 {
            let def = db.pipeline.create_index("t".into(), index()).await.unwrap();
            assert!(seen.insert(def.created_at), "index created_at {} given twice", def.created_at);
            db.pipeline.drop_index("t".into(), "i".into()).await.unwrap();
        }
        db.pipeline.drop_table("t".into()).await.unwrap();
    }
    // the last value given out is kept: after a restart the next one is still above it
    let last = *seen.last().unwrap();
    db.core.close().unwrap();
    // A task that answered a call (a drop's purge, a detached create) may still hold its handle
    // of the database for a moment after its caller resumed; the data directory stays locked
    // until the last handle is gone.
    for _ in 0..5000 {
        if Arc::strong_count(&db) == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(Arc::strong_count(&db), 1, "a task kept the database");
    drop(db);
    let db = open(dir.path());
    let def = db.pipeline.create_table(table()).await.unwrap();
    FROZEN_CLOCK_MS.store(0, Ordering::Relaxed);
    assert!(def.created_at > last, "{} after {last}", def.created_at);
}

fn open_with_chunk(dir: &std::path::Path, backfill_chunk: usize) -> Arc<Db> {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = Durability::Buffered;
    Db::open(cfg, DbOptions { background_jobs: false, backfill_chunk, ..DbOptions::default() }).unwrap()
}

/// Waits (yielding to the backfill) until the index is no longer building; the timeout only turns
/// a hang into a failure.
async fn built(db: &Arc<Db>, table: &str, index: &str) -> IndexDef {
    let wait = async {
        loop {
            let def = db.pipeline.get_index(table.into(), index.into()).await.unwrap();
            if !matches!(def.state, IndexState::Building { .. }) {
                return def;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), wait).await.expect("the backfill never finished")
}

fn ids(page: QueryResult) -> Vec<String> {
    let QueryResult::Page(page) = page else { panic!("a page") };
    page.documents.iter().map(|d| serde_json::from_slice::<Value>(d).unwrap()["_id"].as_str().unwrap().into()).collect()
}

fn by_n(n: i64, explain: bool) -> QueryRequest {
    serde_json::from_value(json!({"filter": {"n": n}, "explain": explain})).unwrap()
}

/// A database with backfill chunks of 4 and table `t` holding `d0`-`d5`, document `i` being `doc(i)`.
async fn six_documents(dir: &std::path::Path, doc: impl Fn(usize) -> Value) -> Arc<Db> {
    let db = open_with_chunk(dir, 4);
    db.pipeline
        .create_table(CreateTable { name: "t".into(), kind: Default::default(), columns: None, ..Default::default() })
        .await
        .unwrap();
    for i in 0..6 {
        db.pipeline.put_document("t".into(), format!("d{i}"), object(doc(i)), Preconditions::default()).await.unwrap();
    }
    db
}

/// Makes each backfill chunk, once read and computed, report its document count on the returned
/// receiver and wait until the returned sender is dropped.
fn hold_backfill(db: &Db) -> (tokio::sync::mpsc::UnboundedReceiver<usize>, std::sync::mpsc::Sender<()>) {
    let (prepared_tx, prepared) = tokio::sync::mpsc::unbounded_channel();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    *db.pipeline.backfill_hook.lock().unwrap() = Some(Arc::new(move |docs| {
        let _ = prepared_tx.send(docs);
        let _ = wait.lock().unwrap().recv_timeout(std::time::Duration::from_secs(60));
    }));
    (prepared, go)
}

/// A backfill chunk is read and its entries computed before its write is queued. A document
/// changed or deleted after that read was already re-indexed by the write that changed it, so the
/// chunk skips it: staging the entries of the version read would leave stale ones (here they
/// would keep values taken in a unique index), and the entry error of a version since fixed would
/// fail the whole index.
#[tokio::test]
async fn a_backfill_chunk_skips_documents_written_after_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = six_documents(dir.path(), |i| json!({"n": i})).await;
    let none = Preconditions::default;
    // over the cap of 1000 entries: the index cannot hold this version
    let over: Vec<i64> = (1000..2001).collect();
    db.pipeline.put_document("t".into(), "d3".into(), object(json!({"n": over})), none()).await.unwrap();

    // The first chunk's hook says it has read d0-d3, then waits until `go` is dropped.
    let (mut prepared, go) = hold_backfill(&db);
    let req = CreateIndex { name: "by_n".into(), kind: IndexKind::Unique, fields: vec!["n".into()], options: None };
    let def = db.pipeline.create_index("t".into(), req).await.unwrap();
    assert!(matches!(def.state, IndexState::Building { done: 0, total: 6 }), "{def:?}");
    assert_eq!(prepared.recv().await, Some(4));

    // The committer is free: these commit before the chunk is even queued.
    db.pipeline.put_document("t".into(), "d1".into(), object(json!({"n": 10})), none()).await.unwrap();
    db.pipeline.delete_document("t".into(), "d2".into(), none()).await.unwrap();
    db.pipeline.put_document("t".into(), "d3".into(), object(json!({"n": 3})), none()).await.unwrap();
    drop(go);

    let def = built(&db, "t", "by_n").await;
    assert_eq!(def.state, IndexState::Ready);
    assert_eq!(prepared.recv().await, Some(2), "the second chunk: d4, d5");
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{report:?}");
    for (n, want) in [(0, vec!["d0"]), (1, vec![]), (2, vec![]), (3, vec!["d3"]), (10, vec!["d1"]), (1000, vec![])] {
        assert_eq!(ids(db.query.query("t".into(), by_n(n, false)).await.unwrap()), want, "n = {n}");
    }
    let QueryResult::Explain(explain) = db.query.query("t".into(), by_n(10, true)).await.unwrap() else { panic!() };
    assert_eq!(explain.plan.strategy, "index_scan");
    // the old values are free again
    db.pipeline.put_document("t".into(), "e1".into(), object(json!({"n": 1})), none()).await.unwrap();
    db.pipeline.put_document("t".into(), "e2".into(), object(json!({"n": 2})), none()).await.unwrap();
    db.pipeline.put_document("t".into(), "e3".into(), object(json!({"n": 1000})), none()).await.unwrap();
    assert!(crate::service::check(&db).await.unwrap().ok);
}

/// The committer only stages a backfill chunk: reading it and computing its entries happen
/// before its write is queued, on another thread. Here a write holds the committer, and the
/// backfill still prepares its first chunk meanwhile (before, the chunk was read and computed
/// inside its write, queued behind the held one: this waited forever).
#[tokio::test]
async fn a_backfill_chunk_is_prepared_while_the_committer_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with_chunk(dir.path(), 3);
    db.pipeline
        .create_table(CreateTable { name: "t".into(), kind: Default::default(), columns: None, ..Default::default() })
        .await
        .unwrap();
    for i in 0..5 {
        db.pipeline
            .put_document("t".into(), format!("d{i}"), object(json!({"n": i})), Preconditions::default())
            .await
            .unwrap();
    }
    // The first chunk, once prepared, waits until the held write below is on the committer, so
    // the chunk's write is queued after it (the backfill task may run before this test queues
    // the held write, and under load its chunk could otherwise be prepared and queued first).
    let (held_tx, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Mutex::new(held);
    let (prepared_tx, mut prepared) = tokio::sync::mpsc::unbounded_channel();
    *db.pipeline.backfill_hook.lock().unwrap() = Some(Arc::new(move |docs| {
        // once the held write has ended, its sender is gone and this returns at once
        let _ = held.lock().unwrap().recv_timeout(std::time::Duration::from_secs(60));
        let _ = prepared_tx.send((docs, std::thread::current().name().map(str::to_owned)));
    }));
    let req = CreateIndex { name: "by_n".into(), kind: IndexKind::Hash, fields: vec!["n".into()], options: None };
    db.pipeline.create_index("t".into(), req).await.unwrap();

    let (entered_tx, entered) = tokio::sync::oneshot::channel();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let mut hold = Box::pin(db.core.store.write(move |_| {
        let _ = entered_tx.send(());
        let _ = held_tx.send(());
        gate.recv().map_err(|_| StorageError::Aborted)
    }));
    start(&mut hold);
    entered.await.unwrap();
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), prepared.recv()).await;
    let (docs, thread) = first.expect("no chunk was prepared while the committer was held").unwrap();
    assert_eq!(docs, 3);
    assert_ne!(thread.as_deref(), Some("mosaic-committer"));
    let def = db.pipeline.get_index("t".into(), "by_n".into()).await.unwrap();
    assert!(matches!(def.state, IndexState::Building { done: 0, total: 5 }), "nothing committed yet: {def:?}");

    release.send(()).unwrap();
    hold.await.unwrap();
    assert_eq!(built(&db, "t", "by_n").await.state, IndexState::Ready);
    let (docs, thread) = prepared.recv().await.unwrap();
    assert_eq!(docs, 2);
    assert_ne!(thread.as_deref(), Some("mosaic-committer"));
    assert!(crate::service::check(&db).await.unwrap().ok);
    assert_eq!(ids(db.query.query("t".into(), by_n(4, false)).await.unwrap()), vec!["d4"]);
}

/// A write that leaves a document's text as it is, while the fulltext build holds a chunk that
/// read the document before the write: the chunk skips it (its blob changed), so the write must
/// index it — an "unchanged text, nothing to do" shortcut would leave it out of the index.
#[tokio::test]
async fn a_fulltext_build_misses_no_document_rewritten_with_the_same_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = six_documents(dir.path(), |i| json!({"text": "same words", "n": i})).await;
    let none = Preconditions::default;
    let (mut prepared, go) = hold_backfill(&db);
    let req: CreateIndex =
        serde_json::from_value(json!({"name": "ft", "kind": "fulltext", "fields": ["text"]})).unwrap();
    db.pipeline.create_index("t".into(), req).await.unwrap();
    assert_eq!(prepared.recv().await, Some(4));
    // d0-d3 were read by the held chunk; their text stays, another field changes
    for i in 0..4 {
        db.pipeline.patch_document("t".into(), format!("d{i}"), json!({"n": 100 + i}), none()).await.unwrap();
    }
    drop(go);
    assert_eq!(built(&db, "t", "ft").await.state, IndexState::Ready);
    let req: SearchRequest = serde_json::from_value(json!({"query": "words"})).unwrap();
    let found: Value = serde_json::from_slice(&db.search.search("t".into(), req).await.unwrap()).unwrap();
    assert_eq!(found["total"]["value"], 6, "{found}");
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{report:?}");
}

/// The metrics snapshot shows an index build's progress while it runs, then its end.
#[tokio::test]
async fn the_metrics_snapshot_follows_an_index_build() {
    let dir = tempfile::tempdir().unwrap();
    let db = six_documents(dir.path(), |i| json!({"n": i})).await;
    let (mut prepared, go) = hold_backfill(&db);
    let req = CreateIndex { name: "by_n".into(), kind: IndexKind::Hash, fields: vec!["n".into()], options: None };
    db.pipeline.create_index("t".into(), req).await.unwrap();
    assert_eq!(prepared.recv().await, Some(4));
    let snapshot = crate::service::metrics_snapshot(&db);
    let building = IndexFigures {
        table: "t".into(),
        name: "by_n".into(),
        kind: "hash".into(),
        state: IndexBuild::Building { done: 0, total: 6 },
        memory: None,
    };
    assert_eq!(snapshot.indexes, vec![building]);
    assert!(snapshot.jobs_running >= 1, "{snapshot:?}");
    assert_eq!(snapshot.tables, 1);
    // six document writes, one table, one index definition so far
    assert!(snapshot.storage.writes >= 8, "{snapshot:?}");
    drop(go);
    assert_eq!(built(&db, "t", "by_n").await.state, IndexState::Ready);
    assert_eq!(crate::service::metrics_snapshot(&db).indexes[0].state, IndexBuild::Ready);
}

/// A task's figures add up its runs: errors, items removed and time taken.
#[tokio::test]
async fn task_figures_add_up_runs_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.core.register_task("sweep", "test task", std::time::Duration::from_secs(5));
    for (removed, error) in [(3, None), (0, Some("disk".to_owned())), (4, None)] {
        db.core.task_started("sweep");
        assert!(crate::service::metrics_snapshot(&db).tasks[0].running);
        db.core.task_finished("sweep", removed, error);
    }
    let tasks = crate::service::metrics_snapshot(&db).tasks;
    let [t] = tasks.as_slice() else { panic!("{tasks:?}") };
    assert_eq!((t.name.as_str(), t.runs, t.errors, t.removed_total, t.running), ("sweep", 3, 1, 7, false));
    assert_eq!(t.interval, std::time::Duration::from_secs(5));
    assert!(t.last_duration.is_some_and(|d| d <= t.duration_total), "{t:?}");
    // the admin view is unchanged by the totals
    assert_eq!(db.core.tasks().tasks[0].removed_total, 7);
    assert_eq!(db.core.tasks().tasks[0].last_error, None);
}

/// The check walks the change events: a gap, an event that does not fit its key and one that
/// does not decode are reported; the events writes make are not.
#[tokio::test]
async fn check_reports_damaged_change_events() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.pipeline.create_table(CreateTable { name: "t".into(), ..Default::default() }).await.unwrap();
    for id in ["a", "b"] {
        db.pipeline
            .put_document("t".into(), id.into(), object(json!({"x": 1})), Preconditions::default())
            .await
            .unwrap();
    }
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok && report.checked.change_events == 2, "{report:?}");
    use crate::keys::ChangeKey;
    db.core
        .store
        .write(|tx| {
            let body = changefeed::append::body("t", "c", changefeed::Op::Put, None);
            tx.put(
                crate::storage::Space::Changefeed,
                ChangeKey::new(5).encode(),
                crate::keys::changefeed::event_value(4, 4, 1, &body),
            );
            tx.put(crate::storage::Space::Changefeed, ChangeKey::new(6).encode(), b"{".to_vec());
            Ok::<(), StorageError>(())
        })
        .await
        .unwrap();
    let report = crate::service::check(&db).await.unwrap();
    let kinds: Vec<&str> = report.problems.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, ["changefeed_gap", "bad_event", "undecodable_event"], "{report:?}");
}

/// A write that changes a document but not its indexed values, committed after a backfill chunk
/// read the document and before the chunk's write, still leaves the document indexed: the chunk
/// skips it (its blob changed), so the write itself stages its entries (or node) while the index
/// builds.
#[tokio::test]
async fn an_unchanged_value_written_during_a_backfill_is_still_indexed() {
    for (kind, options) in [
        (IndexKind::Hash, None),
        (IndexKind::Range, None),
        (IndexKind::Vector, Some(json!({"dimension": 2, "metric": "l2"}).as_object().unwrap().clone())),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = six_documents(dir.path(), |i| json!({"n": i, "v": [i as f64, 1.0]})).await;
        let (mut prepared, go) = hold_backfill(&db);
        let field = if kind == IndexKind::Vector { "v" } else { "n" };
        let req = CreateIndex { name: "ix".into(), kind, fields: vec![field.into()], options };
        db.pipeline.create_index("t".into(), req).await.unwrap();
        assert_eq!(prepared.recv().await, Some(4));
        // d1 changes, its indexed values do not
        let doc = object(json!({"n": 1, "v": [1.0, 1.0], "other": true}));
        db.pipeline.put_document("t".into(), "d1".into(), doc, Preconditions::default()).await.unwrap();
        drop(go);
        assert_eq!(built(&db, "t", "ix").await.state, IndexState::Ready);
        let report = crate::service::check(&db).await.unwrap();
        assert!(report.ok, "{kind:?}: {report:?}");
    }
}

/// A write that fails after its vector changes were applied (here its fsync fails) drops the
/// cached graph it changed: the next use reloads it from the keys, whatever they hold.
#[tokio::test]
async fn a_vector_write_that_fails_to_commit_drops_the_cached_graph() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StorageConfig::new(dir.path());
    cfg.durability = Durability::Sync;
    let db = Db::open(cfg, DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    db.pipeline
        .create_table(CreateTable { name: "t".into(), kind: Default::default(), columns: None, ..Default::default() })
        .await
        .unwrap();
    let options = json!({"dimension": 2, "metric": "l2"}).as_object().unwrap().clone();
    let req =
        CreateIndex { name: "v".into(), kind: IndexKind::Vector, fields: vec!["v".into()], options: Some(options) };
    db.pipeline.create_index("t".into(), req).await.unwrap();
    let doc = |x: f64| object(json!({"v": [x, 1.0]}));
    db.pipeline.put_document("t".into(), "a".into(), doc(1.0), Preconditions::default()).await.unwrap();
    let view = || db.core.store.snapshot();
    let before = db.vectors.graphs.get(&view, &db.core.catalog, "t", "v").unwrap().unwrap();
    db.core.store.inject_sync_failure();
    assert!(db.pipeline.put_document("t".into(), "b".into(), doc(2.0), Preconditions::default()).await.is_err());
    let after = db.vectors.graphs.get(&view, &db.core.catalog, "t", "v").unwrap().unwrap();
    assert!(!Arc::ptr_eq(&before, &after), "the changed graph is still cached");
    let def = db.core.catalog.index("t", "v").unwrap();
    let stored = vectors::load(&db.core.store.snapshot(), &def).unwrap();
    assert_eq!(after.graph.read().unwrap().len(), stored.len());
}
