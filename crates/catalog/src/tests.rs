use super::*;
use mosaic_storage::{Durability, EventCodec, StorageConfig};
use serde_json::json;

/// Encodes in the write as the service does: intern, then stage the names.
fn encode_in(c: &Arc<Catalog>, tx: &mut WriteTx<'_>, doc: &serde_json::Value) -> Result<Vec<u8>, CatalogError> {
    let blob = c.encode_detached(doc, &EncodeOptions::default())?;
    c.stage_fields(tx);
    Ok(blob)
}

/// The catalog appends no change events: its tests' stores number them in a format of their own.
struct Events;

impl EventCodec for Events {
    fn key(&self, seq: u64) -> Vec<u8> {
        seq.to_be_bytes().to_vec()
    }

    fn value(&self, _seq: u64, _txn: u64, _count: u64, body: &[u8]) -> Vec<u8> {
        body.to_vec()
    }

    fn seq(&self, key: &[u8]) -> Result<u64, String> {
        key.try_into().map(u64::from_be_bytes).map_err(|_| "not 8 bytes".into())
    }
}

fn open(dir: &std::path::Path) -> (Store, Arc<Catalog>) {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = Durability::Buffered;
    let store = Store::open(cfg, &Events).unwrap();
    let catalog = Catalog::load(&store).unwrap();
    (store, catalog)
}

fn table(name: &str) -> TableDef {
    TableDef {
        name: name.into(),
        kind: TableKind::Document,
        columns: Some(vec![ColumnDef { name: "emb".into(), ty: ColumnType::Vector(3), nullable: true, default: None }]),
        on_vertex_delete: None,
        weight_field: None,
        changefeed: None,
        history: None,
        created_at: 1,
    }
}

#[test]
fn definitions_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let blob;
    {
        let (store, catalog) = open(dir.path());
        let c = catalog.clone();
        blob = store
            .write_blocking(move |tx| {
                c.put_table(tx, table("users"));
                c.put_table(tx, table("gone"));
                c.put_index(
                    tx,
                    IndexDef {
                        table: "users".into(),
                        name: "by_age".into(),
                        kind: IndexKind::Range,
                        fields: vec!["age".into()],
                        options: Default::default(),
                        state: IndexState::Building { done: 1, total: 10 },
                        created_at: 5,
                        multikey: false,
                    },
                );
                c.put_metric(tx, MetricConfig { name: "cpu".into(), retention_ms: Some(1000) });
                assert_eq!(c.next_in_sequence(tx, "ids")?, 1);
                encode_in(&c, tx, &json!({"name": "Ada", "age": 36}))
            })
            .unwrap();
        let c = catalog.clone();
        store
            .write_blocking(move |tx| {
                c.drop_table(tx, "gone");
                Ok::<_, CatalogError>(())
            })
            .unwrap();
        assert!(catalog.table("users").is_some());
        assert!(catalog.table("gone").is_none());
        assert!(catalog.is_dropping("gone"));
        store.close().unwrap();
    }
    let (store, catalog) = open(dir.path());
    assert_eq!(catalog.table("users").as_deref(), Some(&table("users")));
    assert!(catalog.table("gone").is_none());
    assert_eq!(catalog.dropping(), ["gone"]);
    assert_eq!(catalog.index("users", "by_age").unwrap().state, IndexState::Building { done: 1, total: 10 });
    assert_eq!(catalog.metric("cpu").unwrap().retention_ms, Some(1000));
    assert_eq!(catalog.decode(&blob).unwrap(), json!({"name": "Ada", "age": 36}));
    let c = catalog.clone();
    let next = store.write_blocking(move |tx| c.next_in_sequence(tx, "ids")).unwrap();
    assert_eq!(next, 2);
}

#[test]
fn a_failed_write_never_leaves_a_field_name_unpersisted() {
    let dir = tempfile::tempdir().unwrap();
    let blob;
    {
        let (store, catalog) = open(dir.path());
        let c = catalog.clone();
        // interns "fresh", then fails: the meta:field entry is not written
        let r: Result<Vec<u8>, CatalogError> = store.write_blocking(move |tx| {
            encode_in(&c, tx, &json!({"fresh": 1}))?;
            Err(CatalogError::Corrupt { key: "x".into(), reason: "test".into() })
        });
        assert!(r.is_err());
        // the next write that encodes stages it again
        let c = catalog.clone();
        blob = store.write_blocking(move |tx| encode_in(&c, tx, &json!({"fresh": 2}))).unwrap();
        store.close().unwrap();
    }
    let (_store, catalog) = open(dir.path());
    assert_eq!(catalog.decode(&blob).unwrap(), json!({"fresh": 2}));
}

/// A reader holding the dictionary (a query or `check` in the middle of a scan) does not stop a
/// write from adding a field name: the old write lock waited for every reader to finish.
#[test]
fn new_field_names_do_not_wait_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let (store, catalog) = open(dir.path());
    let c = catalog.clone();
    store.write_blocking(move |tx| encode_in(&c, tx, &json!({"old": 1})).map(drop)).unwrap();
    catalog.with_dict(|held| {
        let (done, rx) = std::sync::mpsc::channel();
        let c = catalog.clone();
        std::thread::spawn(move || {
            let _ = done.send(c.encode_detached(&json!({"brand_new": 1}), &EncodeOptions::default()).is_ok());
        });
        // Not a speed bound: a generous limit that only a writer blocked by this reader misses.
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(20)), Ok(true), "the encoder waited for a reader");
        // The reader's snapshot is unchanged; the name is in the next one.
        assert_eq!(held.id_of("brand_new"), None);
        assert_eq!(held.id_of("old"), Some(0));
    });
    assert_eq!(catalog.dict().id_of("brand_new"), Some(1));
}

/// A name interned by a write that then failed is committed by the next write that commits,
/// so a committed blob never refers to a name without its `meta:field:{id}` key.
#[test]
fn names_of_a_failed_write_commit_with_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (store, catalog) = open(dir.path());
        let c = catalog.clone();
        let failed: Result<(), CatalogError> = store.write_blocking(move |tx| {
            encode_in(&c, tx, &json!({"lost": 1}))?;
            Err(CatalogError::Corrupt { key: "x".into(), reason: "the write fails".into() })
        });
        assert!(failed.is_err());
        // Encoded before the failed write's names were committed: it uses id 0 ("lost").
        let blob = catalog.encode_detached(&json!({"lost": 2, "kept": 3}), &EncodeOptions::default()).unwrap();
        let c = catalog.clone();
        store
            .write_blocking(move |tx| {
                c.stage_fields(tx);
                tx.put(Space::Entity, b"doc".to_vec(), blob);
                Ok::<_, CatalogError>(())
            })
            .unwrap();
        store.close().unwrap();
    }
    let (store, catalog) = open(dir.path());
    let blob = store.get(Space::Entity, b"doc").unwrap().unwrap();
    assert_eq!(catalog.decode(&blob).unwrap(), json!({"lost": 2, "kept": 3}));
}

/// An index drop mark survives a restart with the dropped definition's `created_at` (so its
/// purge resumes and tells its mark from a later drop's); a table drop ends it.
#[test]
fn index_drop_marks_survive_reopening_and_end_with_their_table() {
    let dir = tempfile::tempdir().unwrap();
    let def = |table: &str, name: &str, created_at| IndexDef {
        table: table.into(),
        name: name.into(),
        kind: IndexKind::Hash,
        fields: vec!["x".into()],
        options: Default::default(),
        state: IndexState::Ready,
        created_at,
        multikey: false,
    };
    {
        let (store, catalog) = open(dir.path());
        let c = catalog.clone();
        let (a, b) = (def("users", "a", 7), def("other", "b", 9));
        store
            .write_blocking(move |tx| {
                c.put_table(tx, table("users"));
                c.put_table(tx, table("other"));
                c.put_index(tx, a.clone());
                c.put_index(tx, b.clone());
                Ok::<_, CatalogError>(())
            })
            .unwrap();
        let (c, a, b) = (catalog.clone(), def("users", "a", 7), def("other", "b", 9));
        store
            .write_blocking(move |tx| {
                c.drop_index(tx, &a);
                c.drop_index(tx, &b);
                Ok::<_, CatalogError>(())
            })
            .unwrap();
        assert!(catalog.index("users", "a").is_none());
        assert_eq!(catalog.index_dropping("users", "a"), Some(7));
        store.close().unwrap();
    }
    let (store, catalog) = open(dir.path());
    assert_eq!(catalog.dropping_indexes(), [("other".into(), "b".into(), 9), ("users".into(), "a".into(), 7)]);
    let c = catalog.clone();
    store
        .write_blocking(move |tx| {
            c.drop_table(tx, "users");
            c.finish_index_drop(tx, "other", "b");
            Ok::<_, CatalogError>(())
        })
        .unwrap();
    assert_eq!(catalog.dropping_indexes(), []);
    store.close().unwrap();
    drop((store, catalog));
    let (_, catalog) = open(dir.path());
    assert_eq!(catalog.dropping_indexes(), []);
    assert_eq!(catalog.dropping(), ["users"]);
}
