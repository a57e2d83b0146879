//! The store numbers the events writes append and stores them as its [`EventCodec`] says.

use super::events::{EventCodec, TestEvents};
use super::{Durability, KeyRange, Space, StorageConfig, StorageError, Store};

fn open(dir: &std::path::Path) -> Store {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = Durability::Buffered;
    cfg.cache_bytes = 8 << 20;
    Store::open(cfg, &TestEvents).unwrap()
}

fn events(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    let scan = store.snapshot().scan(Space::Changefeed, KeyRange::Prefix(vec![]), false);
    scan.map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<Result<_, _>>().unwrap()
}

#[test]
fn events_are_numbered_and_stored_as_the_codec_says() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let taken = store
        .write_blocking(|tx| {
            let taken = tx.next_seq();
            tx.append_event(b"a".to_vec());
            tx.append_event(b"b".to_vec());
            Ok::<_, StorageError>(taken)
        })
        .unwrap();
    // the events follow the number the write took
    assert_eq!(taken, 1);
    let want = |seq: u64, txn, count, body: &[u8]| (TestEvents.key(seq), TestEvents.value(seq, txn, count, body));
    assert_eq!(events(&store), [want(2, 2, 2, b"a"), want(3, 2, 2, b"b")]);
    assert_eq!(events(&store)[1].1, b"3 2 2 b");
    store.close().unwrap();
    drop(store);
    // reopened, the numbering goes on after the last event's key
    let store = open(dir.path());
    store
        .write_blocking(|tx| {
            tx.append_event(b"c".to_vec());
            Ok::<_, StorageError>(())
        })
        .unwrap();
    assert_eq!(events(&store)[2], want(4, 4, 1, b"c"));
}

#[test]
fn a_key_the_codec_cannot_read_refuses_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .write_blocking(|tx| {
            tx.put(Space::Changefeed, b"short".to_vec(), vec![]);
            Ok::<_, StorageError>(())
        })
        .unwrap();
    store.close().unwrap();
    drop(store);
    let mut cfg = StorageConfig::new(dir.path());
    cfg.cache_bytes = 8 << 20;
    match Store::open(cfg, &TestEvents) {
        Err(StorageError::Engine(e)) => assert!(e.contains("bad changefeed key: 5 bytes"), "{e}"),
        other => panic!("opened: {:?}", other.map(|_| ())),
    }
}
