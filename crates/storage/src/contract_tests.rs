//! The storage contract, as tests every backend runs: each test takes a fresh store from the
//! backend's opener — fjall in a temporary directory, and PostgreSQL in a fresh database of the
//! cluster `MOSAIC_TEST_POSTGRES` names (skipped, and said, where it is not set).

use super::events::TestEvents;
use super::*;
use std::ops::Bound;

#[path = "../../../tests/common/postgres.rs"]
pub(super) mod test_postgres;

/// A fresh store on a fresh PostgreSQL database, if a test cluster is given.
fn postgres(test: &str) -> Option<(tempfile::TempDir, Store)> {
    let url = test_postgres::fresh_database(test)?;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StorageConfig::new(dir.path());
    cfg.backend = Backend::Postgres { url };
    let store = Store::open(cfg, &TestEvents).unwrap();
    Some((dir, store))
}

/// Each contract test, on each backend.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod embedded_backend {
            $(#[test] fn $name() { super::$name(&super::embedded().1); })*
        }
        mod postgres_backend {
            $(#[test] fn $name() {
                if let Some((_dir, store)) = super::postgres(stringify!($name)) {
                    super::$name(&store);
                    store.close().unwrap();
                }
            })*
        }
    };
}

contract!(
    keys_order_bytewise,
    a_view_is_isolated_from_later_commits,
    limits_refuse_before_writing,
    a_failed_write_leaves_nothing,
    scans_page_and_resume_from_both_ends,
    arbitrary_keys_order_as_a_sorted_map,
    writes_of_one_group_see_each_other,
    a_delete_and_a_put_of_one_key_in_one_write,
);

/// A fresh store of the embedded backend, with the directory it lives in.
fn embedded() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StorageConfig::new(dir.path());
    cfg.cache_bytes = 8 << 20;
    let store = Store::open(cfg, &TestEvents).unwrap();
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
    // a key of `max` bytes that do not compress is taken (PostgreSQL would compress a repetitive
    // one into its index entry)
    let mut noise = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..max)
        .map(|_| {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            noise as u8
        })
        .collect();
    put_all(store, vec![(Space::Idx, random.clone(), vec![1])]).unwrap();
    assert_eq!(store.snapshot().get(Space::Idx, &random).unwrap().as_deref(), Some(&[1u8][..]));
    let r2 = random.clone();
    store
        .write_blocking(move |tx| {
            tx.delete(Space::Idx, r2);
            Ok::<_, StorageError>(())
        })
        .unwrap();
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

/// A write function that fails leaves nothing of what it staged, in any keyspace; the next one
/// commits.
fn a_failed_write_leaves_nothing(store: &Store) {
    let r = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"x".to_vec(), vec![1]);
        tx.put_new(Space::Ts, b"y".to_vec(), vec![2]);
        tx.delete(Space::Idx, b"z".to_vec());
        Err::<(), _>(StorageError::Engine("refused by the test".into()))
    });
    assert!(r.is_err());
    let view = store.snapshot();
    assert!(view.get(Space::Entity, b"x").unwrap().is_none());
    assert!(view.get(Space::Ts, b"y").unwrap().is_none());
    put_all(store, vec![(Space::Entity, b"x".to_vec(), vec![3])]).unwrap();
    assert_eq!(store.get(Space::Entity, b"x").unwrap().as_deref(), Some(&[3u8][..]));
}

/// A scan over many keys returns each once, in order, from either end, and from both ends in
/// turn; stopping early and scanning again from where it stopped resumes exactly.
fn scans_page_and_resume_from_both_ends(store: &Store) {
    let n = 5000u32;
    let all: Vec<Vec<u8>> = (0..n).map(|i| i.to_be_bytes().to_vec()).collect();
    put_all(store, all.iter().map(|k| (Space::Graph, k.clone(), k.clone())).collect()).unwrap();
    let view = store.snapshot();
    let every = || KeyRange::Between(Bound::Unbounded, Bound::Unbounded);
    assert_eq!(keys(view.scan(Space::Graph, every(), false)), all);
    let mut reversed = all.clone();
    reversed.reverse();
    assert_eq!(keys(view.scan(Space::Graph, every(), true)), reversed);
    // values come with their keys
    assert!(view.scan(Space::Graph, every(), false).all(|r| r.map(|(k, v)| k == v).unwrap()));
    // both ends in turn meet once, in the middle
    let mut both = view.scan(Space::Graph, every(), false);
    let mut iter = both.iter.take().unwrap();
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let f = iter.next().map(|r| r.unwrap().0.to_vec());
        let b = if front.len() % 3 == 0 { iter.next_back().map(|r| r.unwrap().0.to_vec()) } else { None };
        if f.is_none() && b.is_none() && iter.next_back().is_none() {
            break;
        }
        front.extend(f);
        back.extend(b);
    }
    back.reverse();
    front.extend(back);
    assert_eq!(front, all, "both ends together return every key once");
    // resume after a stop
    let first: Vec<Vec<u8>> = keys(view.scan(Space::Graph, every(), false).take(1234));
    let rest = KeyRange::Between(Bound::Excluded(first.last().unwrap().clone()), Bound::Unbounded);
    let mut resumed = first;
    resumed.extend(keys(view.scan(Space::Graph, rest, false)));
    assert_eq!(resumed, all);
}

/// Random keys of random bytes (zero and 0xff bytes, prefixes of each other) scan in the order
/// of a sorted map, by prefix and by bounds, in a view and in a write.
fn arbitrary_keys_order_as_a_sorted_map(store: &Store) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut model = std::collections::BTreeMap::new();
    for _ in 0..600 {
        let len = (next() % 5) as usize;
        let key: Vec<u8> = (0..len).map(|_| [0u8, 1, 0x7f, 0x80, 0xfe, 0xff][(next() % 6) as usize]).collect();
        model.insert(key, vec![(next() % 251) as u8]);
    }
    model.remove(&Vec::new());
    put_all(store, model.iter().map(|(k, v)| (Space::Sidx, k.clone(), v.clone())).collect()).unwrap();
    let view = store.snapshot();
    for _ in 0..40 {
        let prefix: Vec<u8> = (0..next() % 3).map(|_| [0u8, 0x7f, 0xff][(next() % 3) as usize]).collect();
        let want: Vec<Vec<u8>> = model.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
        assert_eq!(keys(view.scan(Space::Sidx, KeyRange::Prefix(prefix.clone()), false)), want, "prefix {prefix:?}");
        let lo: Vec<u8> = (0..next() % 3).map(|_| (next() % 256) as u8).collect();
        let hi: Vec<u8> = (0..1 + next() % 3).map(|_| (next() % 256) as u8).collect();
        if lo <= hi {
            let want: Vec<Vec<u8>> = model.range(lo.clone()..=hi.clone()).map(|(k, _)| k.clone()).rev().collect();
            let range = KeyRange::Between(Bound::Included(lo.clone()), Bound::Included(hi.clone()));
            assert_eq!(keys(view.scan(Space::Sidx, range, true)), want, "{lo:?}..={hi:?} reversed");
        }
    }
    let in_write: Vec<Vec<u8>> =
        store.write_blocking(|tx| Ok::<_, StorageError>(keys(tx.scan(Space::Sidx, KeyRange::Prefix(vec![]))))).unwrap();
    assert_eq!(in_write, model.keys().cloned().collect::<Vec<_>>());
}

/// Writes queued together (one group) each read what the earlier ones wrote.
fn writes_of_one_group_see_each_other(store: &Store) {
    let rxs: Vec<_> = (0..50u8)
        .map(|i| {
            store
                .submit(move |tx| {
                    let before = tx.get(Space::View, b"counter")?.map_or(0, |v| v[0]);
                    tx.put(Space::View, b"counter".to_vec(), vec![before + 1]);
                    tx.put(Space::View, vec![b'k', i], vec![before]);
                    Ok::<_, StorageError>(before)
                })
                .unwrap()
        })
        .collect();
    let mut seen: Vec<u8> = rxs.into_iter().map(|rx| rx.blocking_recv().unwrap().unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<u8>>(), "each write read the one before it");
    assert_eq!(store.snapshot().get(Space::View, b"counter").unwrap().as_deref(), Some(&[50u8][..]));
}

/// Within one write the last put or delete of a key wins.
fn a_delete_and_a_put_of_one_key_in_one_write(store: &Store) {
    put_all(store, vec![(Space::Ttlidx, b"a".to_vec(), vec![1]), (Space::Ttlidx, b"b".to_vec(), vec![1])]).unwrap();
    store
        .write_blocking(|tx| {
            tx.delete(Space::Ttlidx, b"a".to_vec());
            tx.put(Space::Ttlidx, b"a".to_vec(), vec![2]);
            tx.put(Space::Ttlidx, b"b".to_vec(), vec![2]);
            tx.delete(Space::Ttlidx, b"b".to_vec());
            Ok::<_, StorageError>(())
        })
        .unwrap();
    let view = store.snapshot();
    assert_eq!(view.get(Space::Ttlidx, b"a").unwrap().as_deref(), Some(&[2u8][..]));
    assert!(view.get(Space::Ttlidx, b"b").unwrap().is_none());
}

/// PostgreSQL: one store at a time on a database, as fjall locks its directory (the committer's
/// caches are exact only for the one writer); the lock goes with the store.
#[test]
fn postgres_one_store_at_a_time_on_a_database() {
    let Some(url) = test_postgres::fresh_database("postgres_one_store_at_a_time_on_a_database") else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut cfg = StorageConfig::new(dir.path());
        cfg.backend = Backend::Postgres { url: url.clone() };
        cfg
    };
    let first = Store::open(config(), &TestEvents).unwrap();
    match Store::open(config(), &TestEvents) {
        Err(StorageError::Engine(why)) => assert!(why.contains("another mosaicdb"), "{why}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a second store opened a database in use"),
    }
    put_all(&first, vec![(Space::Entity, b"k".to_vec(), vec![1])]).unwrap();
    first.close().unwrap();
    drop(first);
    let second = Store::open(config(), &TestEvents).unwrap();
    assert_eq!(second.get(Space::Entity, b"k").unwrap().as_deref(), Some(&[1u8][..]));
    second.close().unwrap();
}
