//! The storage contract, as tests every backend runs: each test takes a fresh store from the
//! backend's opener. Today the embedded backend (fjall) is the one that runs them.

use super::*;
use std::ops::Bound;

/// A fresh store of the embedded backend, with the directory it lives in.
fn embedded() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StorageConfig::new(dir.path());
    cfg.cache_bytes = 8 << 20;
    let store = Store::open(cfg).unwrap();
    (dir, store)
}

fn put_all(store: &Store, pairs: Vec<(Space, Vec<u8>, Vec<u8>)>) -> Result<()> {
    store.write_blocking(move |tx| {
        for (space, k, v) in pairs {
            tx.put(space, k, v);
        }
        Ok(())
    })
}

fn keys(scan: impl Iterator<Item = Result<(Slice, Slice)>>) -> Vec<Vec<u8>> {
    scan.map(|r| r.unwrap().0.to_vec()).collect()
}

/// Keys order as unsigned bytes (a shorter key before its extensions), forward and reverse, by
/// prefix and by bounds of each kind; the last key in a range.
fn keys_order_bytewise(store: &Store) {
    let all: Vec<Vec<u8>> =
        vec![vec![], vec![0], vec![0, 0], vec![0, 1], vec![1], vec![0x7f], vec![0x80], vec![0xff], vec![0xff, 0xff]];
    put_all(store, all.iter().skip(1).map(|k| (Space::Idx, k.clone(), k.clone())).collect()).unwrap();
    let view = store.snapshot();
    let stored: Vec<Vec<u8>> = all[1..].to_vec();
    let range = |lo, hi| KeyRange::Between(lo, hi);
    assert_eq!(keys(view.scan(Space::Idx, range(Bound::Unbounded, Bound::Unbounded), false)), stored);
    let mut reversed = stored.clone();
    reversed.reverse();
    assert_eq!(keys(view.scan(Space::Idx, range(Bound::Unbounded, Bound::Unbounded), true)), reversed);
    assert_eq!(keys(view.scan(Space::Idx, KeyRange::Prefix(vec![0]), false)), [vec![0], vec![0, 0], vec![0, 1]]);
    assert_eq!(
        keys(view.scan(Space::Idx, range(Bound::Excluded(vec![0]), Bound::Included(vec![0x80])), false)),
        [vec![0, 0], vec![0, 1], vec![1], vec![0x7f], vec![0x80]]
    );
    assert_eq!(
        keys(view.scan(Space::Idx, range(Bound::Included(vec![0x7f]), Bound::Excluded(vec![0xff])), true)),
        [vec![0x80], vec![0x7f]]
    );
    assert!(keys(view.scan(Space::Entity, KeyRange::Prefix(vec![]), false)).is_empty(), "keyspaces are apart");
    let last = store.write_blocking(|tx| tx.last_in(Space::Idx, &[0], &[0x7f, 5])).unwrap();
    assert_eq!(last.map(|(k, _)| k.to_vec()), Some(vec![0x7f]));
}

/// A view is one state of every keyspace: later commits are not in it.
fn a_view_is_isolated_from_later_commits(store: &Store) {
    put_all(store, vec![(Space::Entity, b"a".to_vec(), b"1".to_vec()), (Space::Idx, b"a".to_vec(), vec![])]).unwrap();
    let before = store.snapshot();
    put_all(store, vec![(Space::Entity, b"a".to_vec(), b"2".to_vec()), (Space::Idx, b"b".to_vec(), vec![])]).unwrap();
    assert_eq!(before.get(Space::Entity, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(keys(before.scan(Space::Idx, KeyRange::Prefix(vec![]), false)), [b"a".to_vec()]);
    let after = store.snapshot();
    assert_eq!(after.get(Space::Entity, b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(keys(after.scan(Space::Idx, KeyRange::Prefix(vec![]), false)), [b"a".to_vec(), b"b".to_vec()]);
}

/// A key longer than the backend takes fails its write before anything of it is written (the
/// store unharmed, the next write committed); an attempt holding one fails alone; a value past
/// the limit likewise. Reads of such keys find nothing, and ranges bounded by them hold the same
/// stored keys as the bounds say.
fn limits_refuse_before_writing(store: &Store) {
    let max = store.limits().max_key;
    let long = vec![7u8; max + 1];
    let (l2, l3) = (long.clone(), long.clone());
    let r = store.write_blocking(move |tx| {
        tx.put(Space::Entity, b"first".to_vec(), vec![1]);
        tx.put(Space::Idx, l2, vec![]);
        Ok::<_, StorageError>(())
    });
    match r {
        Err(StorageError::TooLarge(t)) => {
            assert_eq!((t.what, t.space, t.len, t.max), (Limit::Key, Space::Idx, max + 1, max));
        }
        other => panic!("a key past the limit: {other:?}"),
    }
    assert!(store.get(Space::Entity, b"first").unwrap().is_none(), "nothing of the refused write");
    let outcome = store
        .write_blocking(move |tx| {
            tx.put(Space::Entity, b"kept".to_vec(), vec![1]);
            let failed = tx.attempt(|tx| {
                tx.put(Space::Entity, b"undone".to_vec(), vec![2]);
                tx.put_new(Space::Idx, l3, vec![]);
                Ok::<_, StorageError>(())
            });
            Ok::<_, StorageError>(matches!(failed, Err(StorageError::TooLarge(_))))
        })
        .unwrap();
    assert!(outcome, "the attempt holding the long key fails");
    let view = store.snapshot();
    assert!(view.get(Space::Entity, b"kept").unwrap().is_some());
    assert!(view.get(Space::Entity, b"undone").unwrap().is_none());
    if let Ok(len) = usize::try_from(store.limits().max_value as u64 + 1)
        && len <= 64 << 20
    {
        let r = put_all(store, vec![(Space::Entity, b"v".to_vec(), vec![0; len])]);
        assert!(matches!(r, Err(StorageError::TooLarge(t)) if t.what == Limit::Value), "{r:?}");
    }
    // reads of long keys
    let mut at_max = vec![7u8; max];
    put_all(store, vec![(Space::Idx, at_max.clone(), vec![]), (Space::Idx, vec![8], vec![])]).unwrap();
    let view = store.snapshot();
    assert!(view.get(Space::Idx, &long).unwrap().is_none());
    assert!(keys(view.scan(Space::Idx, KeyRange::Prefix(long.clone()), false)).is_empty());
    let from_long = KeyRange::Between(Bound::Included(long.clone()), Bound::Unbounded);
    assert_eq!(keys(view.scan(Space::Idx, from_long, false)), [vec![8]], "the stored key of `max` sevens is below it");
    let to_long = KeyRange::Between(Bound::Unbounded, Bound::Excluded(long.clone()));
    assert!(keys(view.scan(Space::Idx, to_long, false)).contains(&at_max));
    at_max.push(0);
    let (c, l4) = (at_max, long.clone());
    let found = store
        .write_blocking(move |tx| {
            Ok::<_, StorageError>((
                tx.get(Space::Idx, &c)?.is_none(),
                !tx.contains(Space::Idx, &l4)?,
                !tx.probe(Space::Idx, &l4)?,
                tx.get_cached(Space::Idx, &l4)?.is_none(),
                tx.last_in(Space::Idx, &l4, &l4)?.is_none(),
            ))
        })
        .unwrap();
    assert_eq!(found, (true, true, true, true, true));
    put_all(store, vec![(Space::Entity, b"after".to_vec(), vec![1])]).unwrap();
    assert!(store.get(Space::Entity, b"after").unwrap().is_some());
    // a delete of a key no store holds is no refusal: the rest of its write commits
    let l5 = long.clone();
    store
        .write_blocking(move |tx| {
            tx.delete(Space::Idx, l5);
            tx.put(Space::Entity, b"with-delete".to_vec(), vec![1]);
            tx.check_limits()
        })
        .unwrap();
    assert!(store.get(Space::Entity, b"with-delete").unwrap().is_some());
}

#[test]
fn embedded_keys_order_bytewise() {
    keys_order_bytewise(&embedded().1);
}

#[test]
fn embedded_a_view_is_isolated_from_later_commits() {
    a_view_is_isolated_from_later_commits(&embedded().1);
}

#[test]
fn embedded_limits_refuse_before_writing() {
    limits_refuse_before_writing(&embedded().1);
}
