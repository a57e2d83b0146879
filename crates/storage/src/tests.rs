use super::events::TestEvents;
use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn open(dir: &std::path::Path, durability: Durability) -> Store {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = durability;
    cfg.cache_bytes = 8 << 20;
    Store::open(cfg, &TestEvents).unwrap()
}

fn put(store: &Store, space: Space, key: &[u8], value: &[u8]) {
    let (k, v) = (key.to_vec(), value.to_vec());
    store
        .write_blocking(move |tx| {
            tx.put(space, k, v);
            Ok::<_, StorageError>(())
        })
        .unwrap();
}

#[test]
fn writes_are_atomic_across_keyspaces_and_errors_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync);
    store
        .write_blocking(|tx| {
            tx.put(Space::Entity, b"a".to_vec(), b"1".to_vec());
            tx.put(Space::Idx, b"a-idx".to_vec(), vec![]);
            // a write reads its own staged keys
            assert_eq!(tx.get(Space::Entity, b"a").unwrap().as_deref(), Some(&b"1"[..]));
            Ok::<_, StorageError>(())
        })
        .unwrap();
    let failed: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"b".to_vec(), b"2".to_vec());
        tx.delete(Space::Entity, b"a".to_vec());
        Err(StorageError::Closed)
    });
    assert!(failed.is_err());
    let view = store.snapshot();
    assert_eq!(view.get(Space::Entity, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(view.get(Space::Entity, b"b").unwrap().is_none());
    assert!(view.get(Space::Idx, b"a-idx").unwrap().is_some());
}

#[test]
fn a_panicking_write_is_aborted_and_the_committer_survives() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    let r: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"x".to_vec(), vec![]);
        panic!("boom")
    });
    assert!(matches!(r, Err(StorageError::Aborted)));
    put(&store, Space::Entity, b"y", b"1");
    assert!(store.get(Space::Entity, b"x").unwrap().is_none());
    assert!(store.get(Space::Entity, b"y").unwrap().is_some());
}

#[test]
fn sequence_numbers_are_gap_free_in_commit_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    let take = |fail: bool| {
        store.write_blocking(move |tx| {
            let seq = tx.next_seq();
            tx.put(Space::Changefeed, TestEvents.key(seq), vec![]);
            if fail { Err(StorageError::Closed) } else { Ok(seq) }
        })
    };
    assert_eq!(take(false).unwrap(), 1);
    assert!(take(true).is_err());
    assert_eq!(take(false).unwrap(), 2);
    store.close().unwrap();
    drop(store);
    // the counter resumes after the last event on disk
    let store = open(dir.path(), Durability::Buffered);
    let seq = store
        .write_blocking(|tx| {
            let s = tx.next_seq();
            tx.put(Space::Changefeed, TestEvents.key(s), vec![]);
            Ok::<_, StorageError>(s)
        })
        .unwrap();
    assert_eq!(seq, 3);
}

#[test]
fn read_modify_write_is_isolated_under_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    store
                        .write_blocking(|tx| {
                            let n = tx
                                .get(Space::Meta, b"counter")?
                                .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap_or([0; 8])));
                            tx.put(Space::Meta, b"counter".to_vec(), (n + 1).to_be_bytes().to_vec());
                            Ok::<_, StorageError>(())
                        })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let v = store.get(Space::Meta, b"counter").unwrap().unwrap();
    assert_eq!(u64::from_be_bytes((&*v).try_into().unwrap()), 400);
}

#[test]
fn scans_forward_reverse_and_by_range() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    for k in [&b"a1"[..], b"a2", b"a3", b"b1"] {
        put(&store, Space::Ridx, k, b"");
    }
    let view = store.snapshot();
    let keys =
        |range, rev| -> Vec<Vec<u8>> { view.scan(Space::Ridx, range, rev).map(|r| r.unwrap().0.to_vec()).collect() };
    assert_eq!(keys(KeyRange::Prefix(b"a".to_vec()), false), [b"a1", b"a2", b"a3"]);
    assert_eq!(keys(KeyRange::Prefix(b"a".to_vec()), true), [b"a3", b"a2", b"a1"]);
    use std::ops::Bound::*;
    assert_eq!(
        keys(KeyRange::Between(Excluded(b"a1".to_vec()), Included(b"b1".to_vec())), false),
        [b"a2", b"a3", b"b1"]
    );
    // a snapshot does not see later writes
    put(&store, Space::Ridx, b"a4", b"");
    assert_eq!(keys(KeyRange::Prefix(b"a".to_vec()), false).len(), 3);
    assert_eq!(store.snapshot().scan(Space::Ridx, KeyRange::Prefix(b"a".to_vec()), false).count(), 4);
}

#[test]
fn a_failed_fsync_poisons_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync);
    put(&store, Space::Entity, b"before", b"1");
    store.inject_sync_failure();
    let r = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"during".to_vec(), vec![]);
        Ok::<_, StorageError>(())
    });
    assert!(matches!(r, Err(StorageError::Poisoned)), "{r:?}");
    assert!(store.is_poisoned());
    let r = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"after".to_vec(), vec![]);
        Ok::<_, StorageError>(())
    });
    assert!(matches!(r, Err(StorageError::Poisoned)));
    // reads still work
    assert!(store.get(Space::Entity, b"before").unwrap().is_some());
    assert!(store.get(Space::Entity, b"after").unwrap().is_none());
}

/// Queues a write of `key` that holds the committer until `release` is dropped; returns once it
/// runs (so its group is taken), with its answer and `release`.
fn held_write(
    store: &Store,
    key: &'static [u8],
) -> (tokio::sync::oneshot::Receiver<Result<(), StorageError>>, std::sync::mpsc::Sender<()>) {
    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let answer = store
        .submit(move |tx| {
            let _ = entered_tx.send(());
            let _ = gate.recv();
            tx.put(Space::Entity, key.to_vec(), vec![]);
            Ok::<_, StorageError>(())
        })
        .unwrap();
    entered.recv().unwrap();
    (answer, release)
}

/// A write committed while the fsync of an earlier group fails is never acknowledged: its
/// durability is unknown (it sits in the journal after bytes the disk may have dropped).
#[test]
fn writes_behind_a_failed_fsync_are_never_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path(), Durability::Sync));
    store.inject_sync_failure();
    let (held, release) = held_write(&store, b"held");
    // queued behind the held write: it commits in the next group, while or after its fsync fails
    let queued = store
        .submit(move |tx| {
            tx.put(Space::Entity, b"queued".to_vec(), vec![]);
            Ok::<_, StorageError>(())
        })
        .unwrap();
    drop(release);
    assert!(matches!(held.blocking_recv(), Ok(Err(StorageError::Poisoned))));
    assert!(matches!(queued.blocking_recv(), Ok(Err(StorageError::Poisoned))));
}

/// A write already queued when a failed fsync poisons the store is answered without running its
/// function (which may change caches for a write that can never commit).
#[test]
fn a_write_queued_before_the_store_is_poisoned_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path(), Durability::Sync));
    store.inject_sync_failure();
    // once that write runs its group is taken: the next two form the next group, queued before
    // the first group's fsync (held back until then) fails
    let (failing, release) = held_write(&store, b"a");
    let s = store.clone();
    let waiting = store
        .submit(move |_| {
            // on the committer, until the fsync thread has failed the first group's fsync
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !s.is_poisoned() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok::<_, StorageError>(())
        })
        .unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let queued = store
        .submit(move |_| {
            r.store(true, Ordering::Release);
            Ok::<_, StorageError>(())
        })
        .unwrap();
    drop(release);
    assert!(matches!(failing.blocking_recv(), Ok(Err(StorageError::Poisoned))));
    assert!(matches!(waiting.blocking_recv(), Ok(Err(StorageError::Poisoned))));
    assert!(matches!(queued.blocking_recv(), Ok(Err(StorageError::Poisoned))));
    assert!(!ran.load(Ordering::Acquire));
}

/// fjall seals a journal (fsyncing it whole) and goes on in the next file once a flush finds it
/// past 64 MB: the fsync thread must follow it to the file the writes go to.
#[test]
fn sealed_journals_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StorageConfig::new(dir.path());
    cfg.cache_bytes = 8 << 20;
    cfg.memtable_bytes = 1 << 20;
    let store = Store::open(cfg, &TestEvents).unwrap();
    let first = super::sync::newest(dir.path()).unwrap();
    // values that do not compress (the journal compresses large ones)
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let value: Vec<u8> = (0..64 << 10)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut written = 0u32;
    // 1 MiB a write, each filling a memtable (and so queueing a flush), until a journal is sealed
    while super::sync::newest(dir.path()).unwrap() == first && written < 400 {
        let v = value.clone();
        store
            .write_blocking(move |tx| {
                for i in 0..16u32 {
                    tx.put(Space::Entity, (written * 16 + i).to_be_bytes().to_vec(), v.clone());
                }
                Ok::<_, StorageError>(())
            })
            .unwrap();
        written += 1;
    }
    let sealed = super::sync::newest(dir.path()).unwrap();
    assert!(sealed > first, "no journal was sealed after {written} MiB");
    // the next write's fsync covers the journal it went to, not the sealed one
    put(&store, Space::Entity, b"last", b"1");
    assert!(store.synced_journal() >= sealed, "{} < {sealed}", store.synced_journal());
    store.close().unwrap();
    drop(store);
    let store = open(dir.path(), Durability::Sync);
    assert_eq!(store.get(Space::Entity, b"last").unwrap().as_deref(), Some(&b"1"[..]));
    let kept = store.snapshot().scan(Space::Entity, KeyRange::Prefix(vec![]), false).count();
    assert_eq!(kept, written as usize * 16 + 1);
}

#[test]
fn events_whose_fsync_failed_are_never_published() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync);
    let event = |tx: &mut crate::WriteTx<'_>| {
        tx.put(Space::Entity, b"k".to_vec(), vec![]);
        tx.append_event(br#""op":"put""#.to_vec());
        Ok::<_, StorageError>(())
    };
    store.write_blocking(event).unwrap();
    assert_eq!(*store.durable_seq().borrow(), 1);
    store.inject_sync_failure();
    assert!(matches!(store.write_blocking(event), Err(StorageError::Poisoned)));
    // a later group that writes nothing has nothing to fsync: it must still not publish the
    // event whose fsync failed (a crash may lose it, and its seq be given to another write)
    assert!(matches!(store.write_blocking(|_| Ok::<_, StorageError>(())), Err(StorageError::Poisoned)));
    assert_eq!(*store.durable_seq().borrow(), 1);
}

#[test]
fn reopening_restores_every_write() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path(), Durability::Sync);
        for i in 0u32..200 {
            put(&store, Space::Entity, &i.to_be_bytes(), b"v");
        }
        store.close().unwrap();
    }
    let store = open(dir.path(), Durability::Sync);
    assert_eq!(store.snapshot().scan(Space::Entity, KeyRange::Prefix(vec![]), false).count(), 200);
}

#[test]
fn a_failed_attempt_undoes_only_its_own_staging() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    put(&store, Space::Entity, b"kept", b"0");
    store
        .write_blocking(|tx| {
            tx.put(Space::Entity, b"a".to_vec(), b"1".to_vec());
            let ok: Result<(), StorageError> = tx.attempt(|tx| {
                tx.put(Space::Entity, b"b".to_vec(), b"2".to_vec());
                Ok(())
            });
            assert!(ok.is_ok());
            let failed: Result<(), StorageError> = tx.attempt(|tx| {
                // overwrite a key staged before, remove one, add one, take a sequence number
                tx.put(Space::Entity, b"a".to_vec(), b"changed".to_vec());
                tx.delete(Space::Entity, b"kept".to_vec());
                tx.put(Space::Entity, b"c".to_vec(), b"3".to_vec());
                tx.next_seq();
                tx.on_commit(|| panic!("the hook of a failed attempt must not run"));
                Err(StorageError::Closed)
            });
            assert!(failed.is_err());
            assert_eq!(tx.get(Space::Entity, b"a").unwrap().as_deref(), Some(&b"1"[..]));
            Ok::<_, StorageError>(())
        })
        .unwrap();
    let view = store.snapshot();
    assert_eq!(view.get(Space::Entity, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(view.get(Space::Entity, b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(view.get(Space::Entity, b"kept").unwrap().as_deref(), Some(&b"0"[..]));
    assert!(view.get(Space::Entity, b"c").unwrap().is_none());
}

#[test]
fn a_dead_committer_is_reported_and_writes_fail_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    assert!(store.is_running());
    store.kill_committer();
    assert!(!store.is_running());
    let r: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"k".to_vec(), vec![]);
        Ok(())
    });
    assert!(matches!(r, Err(StorageError::CommitterDown)), "{r:?}");
    assert!(store.get(Space::Entity, b"k").unwrap().is_none());
}

#[test]
fn a_write_queued_when_the_committer_dies_fails_as_committer_down() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    // The hook panics after the write committed: its caller learns the committer went down
    // (not that its own write function failed).
    let r: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.on_commit(|| panic!("injected committer failure"));
        Ok(())
    });
    assert!(matches!(r, Err(StorageError::CommitterDown)), "{r:?}");
    assert!(!store.is_running());
}

/// `scan_current` lays the write's staged puts and deletes over the committed keys under the
/// prefix, in key order, and stops at the limit; keys outside the prefix or in another keyspace
/// never show.
#[test]
fn scan_current_sees_the_writes_own_staged_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    for k in [&b"p1"[..], b"p3", b"p5", b"q1"] {
        put(&store, Space::Graph, k, b"c");
    }
    put(&store, Space::Entity, b"p2", b"other space");
    store
        .write_blocking(|tx| {
            let keys = |tx: &WriteTx<'_>, limit| -> Vec<(Vec<u8>, Vec<u8>)> {
                tx.scan_current(Space::Graph, b"p", limit).unwrap()
            };
            let c = |k: &[u8], v: &[u8]| (k.to_vec(), v.to_vec());
            assert_eq!(keys(tx, 10), [c(b"p1", b"c"), c(b"p3", b"c"), c(b"p5", b"c")]);
            tx.delete(Space::Graph, b"p3".to_vec());
            tx.put(Space::Graph, b"p4".to_vec(), b"s".to_vec());
            tx.put(Space::Graph, b"p1".to_vec(), b"s".to_vec());
            tx.put(Space::Graph, b"p0".to_vec(), b"s".to_vec());
            tx.put(Space::Graph, b"q0".to_vec(), b"s".to_vec());
            tx.delete(Space::Graph, b"p9".to_vec());
            assert_eq!(keys(tx, 10), [c(b"p0", b"s"), c(b"p1", b"s"), c(b"p4", b"s"), c(b"p5", b"c")]);
            assert_eq!(keys(tx, 2), [c(b"p0", b"s"), c(b"p1", b"s")]);
            tx.delete(Space::Graph, b"p0".to_vec());
            tx.delete(Space::Graph, b"p1".to_vec());
            tx.delete(Space::Graph, b"p4".to_vec());
            assert_eq!(keys(tx, 1), [c(b"p5", b"c")]);
            tx.delete(Space::Graph, b"p5".to_vec());
            assert!(keys(tx, 10).is_empty());
            Ok::<_, StorageError>(())
        })
        .unwrap();
}

/// `contains` answers as `get` does (staged first, then committed), also for a key it looked up
/// before the write staged it, and in later writes after other writes changed it (the committer
/// remembers what it looked up and updates it at each commit).
#[test]
fn contains_follows_the_writes_own_staged_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    put(&store, Space::Entity, b"a", b"1");
    store
        .write_blocking(|tx| {
            assert!(tx.contains(Space::Entity, b"a").unwrap());
            assert!(!tx.contains(Space::Entity, b"b").unwrap());
            assert!(!tx.contains(Space::Idx, b"a").unwrap());
            tx.delete(Space::Entity, b"a".to_vec());
            tx.put(Space::Entity, b"b".to_vec(), b"2".to_vec());
            assert!(!tx.contains(Space::Entity, b"a").unwrap());
            assert!(tx.contains(Space::Entity, b"b").unwrap());
            Ok::<_, StorageError>(())
        })
        .unwrap();
    store
        .write_blocking(|tx| {
            assert!(!tx.contains(Space::Entity, b"a").unwrap());
            assert!(tx.contains(Space::Entity, b"b").unwrap());
            Ok::<_, StorageError>(())
        })
        .unwrap();
    // changed by writes that never asked; a failed write changes nothing
    put(&store, Space::Entity, b"a", b"3");
    store
        .write_blocking(|tx| {
            tx.delete(Space::Entity, b"b".to_vec());
            Ok::<_, StorageError>(())
        })
        .unwrap();
    let failed: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.delete(Space::Entity, b"a".to_vec());
        Err(StorageError::Closed)
    });
    assert!(failed.is_err());
    store
        .write_blocking(|tx| {
            assert!(tx.contains(Space::Entity, b"a").unwrap());
            assert!(!tx.contains(Space::Entity, b"b").unwrap());
            Ok::<_, StorageError>(())
        })
        .unwrap();
}

/// `get_cached` answers as `get` does: staged first, then committed, also in later writes after
/// other writes (put, put_new, delete) changed a key it remembered; a failed or panicking write
/// changes nothing it remembers.
#[test]
fn get_cached_follows_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    let read = |store: &Store, key: &'static [u8]| {
        store
            .write_blocking(move |tx| {
                let cached = tx.get_cached(Space::View, key)?;
                assert_eq!(cached, tx.get(Space::View, key)?);
                Ok::<_, StorageError>(cached)
            })
            .unwrap()
    };
    put(&store, Space::View, b"a", b"1");
    store
        .write_blocking(|tx| {
            assert_eq!(tx.get_cached(Space::View, b"a").unwrap().as_deref(), Some(&b"1"[..]));
            assert_eq!(tx.get_cached(Space::View, b"b").unwrap(), None);
            assert_eq!(tx.get_cached(Space::Idx, b"a").unwrap(), None);
            tx.put(Space::View, b"a".to_vec(), b"2".to_vec());
            tx.put(Space::View, b"b".to_vec(), b"3".to_vec());
            assert_eq!(tx.get_cached(Space::View, b"a").unwrap().as_deref(), Some(&b"2"[..]));
            assert_eq!(tx.get_cached(Space::View, b"b").unwrap().as_deref(), Some(&b"3"[..]));
            Ok::<_, StorageError>(())
        })
        .unwrap();
    assert_eq!(read(&store, b"a").as_deref(), Some(&b"2"[..]));
    assert_eq!(read(&store, b"b").as_deref(), Some(&b"3"[..]));
    // changed by writes that never read them
    store
        .write_blocking(|tx| {
            tx.delete(Space::View, b"a".to_vec());
            tx.put_new(Space::View, b"b".to_vec(), b"4".to_vec());
            Ok::<_, StorageError>(())
        })
        .unwrap();
    assert_eq!(read(&store, b"a"), None);
    assert_eq!(read(&store, b"b").as_deref(), Some(&b"4"[..]));
    let failed: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.put(Space::View, b"a".to_vec(), b"5".to_vec());
        Err(StorageError::Closed)
    });
    assert!(failed.is_err());
    let panicked: Result<(), StorageError> = store.write_blocking(|tx| {
        tx.delete(Space::View, b"b".to_vec());
        panic!("a bug in a write function")
    });
    assert!(matches!(panicked, Err(StorageError::Aborted)));
    assert_eq!(read(&store, b"a"), None);
    assert_eq!(read(&store, b"b").as_deref(), Some(&b"4"[..]));
}

#[test]
fn stats_count_groups_writes_and_fsyncs_and_describe_every_family() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync);
    let before = store.stats();
    assert_eq!((before.write_groups, before.writes, before.fsyncs), (0, 0, 0));
    for i in 0..3u8 {
        put(&store, Space::Entity, &[i], b"v");
    }
    // a write that stages nothing and one that fails commit no keys and need no fsync
    store.write_blocking(|_| Ok::<_, StorageError>(())).unwrap();
    let _ = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"no".to_vec(), vec![]);
        Err::<(), _>(StorageError::Closed)
    });
    let stats = store.stats();
    // each write waited for the one before: five groups, three of them wrote and were fsynced
    assert_eq!((stats.write_groups, stats.writes, stats.fsyncs), (5, 3, 3));
    let names: Vec<_> = stats.families.iter().map(|f| f.family).collect();
    assert_eq!(names, Space::ALL.map(Space::name));
    let entity = &stats.families[Space::Entity as usize];
    assert_eq!(entity.approximate_keys, 3);
    assert_eq!(stats.journal_files, 1);
    assert!(stats.journal_bytes.is_some_and(|b| b > 0), "{stats:?}");
    assert_eq!(stats.cache_capacity_bytes, 8 << 20);

    // buffered: groups and writes, no fsync
    drop(store);
    let store = open(dir.path(), Durability::Buffered);
    put(&store, Space::Meta, b"k", b"v");
    let stats = store.stats();
    assert_eq!((stats.write_groups, stats.writes, stats.fsyncs), (1, 1, 0));
}

/// A clean close flushes every memtable: the next open replays nothing into memory (it would
/// replay up to `max_journal_bytes` of journal otherwise), and the data is all there.
#[test]
fn close_flushes_the_memtables() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    store
        .write_blocking(|tx| {
            for i in 0..2000u32 {
                tx.put(Space::Entity, i.to_be_bytes().to_vec(), vec![7; 100]);
            }
            Ok::<(), StorageError>(())
        })
        .unwrap();
    assert!(store.stats().write_buffer_bytes > 200_000);
    store.close().unwrap();
    drop(store);
    let store = open(dir.path(), Durability::Buffered);
    assert_eq!(store.stats().write_buffer_bytes, 0, "the open replayed the journal into memtables");
    let view = store.snapshot();
    assert_eq!(view.scan(Space::Entity, KeyRange::Prefix(Vec::new()), false).count(), 2000);
}

/// A flush that fails at shutdown does not hold the close for [`CLOSE_FLUSH_WAIT`]. The data
/// directory is removed under the open store (as the test servers' temp dirs are when a test
/// ends before its server's shutdown has finished): the flush of the first keyspace fails, the
/// fjall worker that ran it ends and poisons the database, and no worker is left to empty the
/// sealed memtables `close` waits for. The close notices the poison and returns at once, its
/// writes durable anyway (fsynced before the flush).
#[test]
fn close_does_not_wait_for_a_flush_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    put(&store, Space::Entity, b"a", b"1");
    put(&store, Space::Meta, b"m", b"1");
    std::fs::remove_dir_all(dir.path()).unwrap();
    let started = std::time::Instant::now();
    let closed = store.close();
    let took = started.elapsed();
    eprintln!("close with a failing flush took {took:?}");
    assert!(closed.is_ok(), "{closed:?}");
    // well under a second; the bound leaves room for a loaded machine
    assert!(took < std::time::Duration::from_secs(10), "close took {took:?}");
}

/// Reads by key through the document cache, while one writer rewrites the same documents: a
/// read that starts after a write was acknowledged never sees an older version (the committer
/// evicts before it answers, and a read overtaken by a commit keeps nothing), and no reader sees
/// a version older than one it saw before (no stale value is put back while a commit is under
/// way). The cache is small, so entries also push each other out.
#[test]
fn the_document_cache_never_serves_a_version_older_than_acknowledged() {
    use std::sync::atomic::AtomicU64;
    for durability in [Durability::Buffered, Durability::Sync] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StorageConfig::new(dir.path());
        cfg.durability = durability;
        cfg.cache_bytes = 8 << 20;
        // about two entries per shard, for 512 keys over 64 shards
        cfg.row_cache_bytes = 64 * 200;
        let store = Arc::new(Store::open(cfg, &TestEvents).unwrap());
        const KEYS: u64 = 512;
        let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (store, acked, done) = (store.clone(), acked.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut seen_before = vec![0u64; KEYS as usize];
                    let mut reads = 0u64;
                    let mut k = r;
                    while !done.load(Ordering::Acquire) {
                        // mostly the few keys being written now, sometimes any
                        k = if reads.is_multiple_of(4) { (k * 31 + 7) % KEYS } else { (k + 1) % 8 };
                        let floor = acked[k as usize].load(Ordering::Acquire);
                        let seen = store
                            .get(Space::Entity, &k.to_be_bytes())
                            .unwrap()
                            .map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()));
                        assert!(seen >= floor, "key {k}: read version {seen} after {floor} was acknowledged");
                        assert!(
                            seen >= seen_before[k as usize],
                            "key {k}: read {seen} after {}",
                            seen_before[k as usize]
                        );
                        seen_before[k as usize] = seen;
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for version in 1..=3000u64 {
            let k = if version.is_multiple_of(2) { version % 8 } else { version % KEYS };
            put(&store, Space::Entity, &k.to_be_bytes(), &version.to_be_bytes());
            acked[k as usize].store(version, Ordering::Release);
        }
        done.store(true, Ordering::Release);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(reads > 0);
        // a removal is evicted like a new value
        store.get(Space::Entity, &1u64.to_be_bytes()).unwrap().unwrap();
        store
            .write_blocking(|tx| {
                tx.delete(Space::Entity, 1u64.to_be_bytes().to_vec());
                Ok::<_, StorageError>(())
            })
            .unwrap();
        assert!(store.get(Space::Entity, &1u64.to_be_bytes()).unwrap().is_none());
    }
}

/// Waits until the committer has committed `key` = `value` (durable or not).
fn until_committed(store: &Store, key: &[u8], value: &[u8]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.get_committed(Space::Entity, key).unwrap().as_deref() != Some(value) {
        assert!(std::time::Instant::now() < deadline, "the write was never committed");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn in_sync_mode_no_read_sees_a_write_before_its_fsync() {
    let dir = tempfile::tempdir().unwrap();
    for cache in [0, 1 << 20] {
        let mut cfg = StorageConfig::new(dir.path().join(format!("cache{cache}")));
        cfg.row_cache_bytes = cache;
        let store = Store::open(cfg, &TestEvents).unwrap();
        put(&store, Space::Entity, b"doc", b"old");
        // read once, so the document cache (when on) holds the old version
        assert_eq!(store.get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"old"[..]));
        let held = store.hold_fsyncs();
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                store.write_blocking(|tx| {
                    tx.put(Space::Entity, b"doc".to_vec(), b"new".to_vec());
                    tx.put(Space::Entity, b"other".to_vec(), b"1".to_vec());
                    tx.put(Space::Idx, b"doc-idx".to_vec(), vec![]);
                    Ok::<_, StorageError>(())
                })
            })
        };
        until_committed(&store, b"doc", b"new");
        // committed, not durable: every read shows the state before the write
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!writer.is_finished(), "acknowledged before its fsync");
        assert_eq!(store.get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"old"[..]));
        assert_eq!(store.get(Space::Entity, b"other").unwrap(), None);
        let view = store.snapshot();
        assert_eq!(view.get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"old"[..]));
        assert_eq!(view.scan(Space::Idx, KeyRange::Prefix(b"doc".to_vec()), false).count(), 0);
        assert_eq!(store.committed().get(Space::Entity, b"other").unwrap().as_deref(), Some(&b"1"[..]));
        drop(view);
        drop(held);
        writer.join().unwrap().unwrap();
        // acknowledged: every read shows it, the cache included
        assert_eq!(store.get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"new"[..]));
        assert_eq!(store.get(Space::Entity, b"other").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(store.snapshot().scan(Space::Idx, KeyRange::Prefix(b"doc".to_vec()), false).count(), 1);
        store.close().unwrap();
    }
}

#[test]
fn in_buffered_mode_reads_see_each_commit_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    put(&store, Space::Entity, b"doc", b"v1");
    assert_eq!(store.get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"v1"[..]));
    put(&store, Space::Entity, b"doc", b"v2");
    assert_eq!(store.get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(store.snapshot().get(Space::Entity, b"doc").unwrap().as_deref(), Some(&b"v2"[..]));
}

#[test]
fn a_nearly_full_disk_refuses_writes_before_they_run_and_reads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let store = open(&path, Durability::Sync);
    put(&store, Space::Entity, b"kept", b"1");
    store.close().unwrap();
    drop(store);
    let mut cfg = StorageConfig::new(&path);
    cfg.min_free_bytes = u64::MAX;
    let store = Store::open(cfg, &TestEvents).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = store.write_blocking({
        let ran = ran.clone();
        move |tx| {
            ran.store(true, Ordering::Release);
            tx.put(Space::Entity, b"new".to_vec(), vec![]);
            Ok::<_, StorageError>(())
        }
    });
    assert!(matches!(r, Err(StorageError::DiskFull { reserve: u64::MAX, .. })), "{r:?}");
    assert!(!ran.load(Ordering::Acquire), "a refused write ran");
    assert!(matches!(store.health(), Health::DiskFull { .. }), "{:?}", store.health());
    assert!(!store.is_poisoned());
    assert_eq!(store.get(Space::Entity, b"kept").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(store.get_committed(Space::Entity, b"new").unwrap(), None);
}

#[test]
fn a_failed_fsync_is_reported_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync);
    assert_eq!(store.health(), Health::Ok);
    store.inject_sync_failure();
    let r = store.write_blocking(|tx| {
        tx.put(Space::Entity, b"k".to_vec(), vec![]);
        Ok::<_, StorageError>(())
    });
    assert!(matches!(r, Err(StorageError::Poisoned)), "{r:?}");
    match store.health() {
        Health::Failed { reason } => assert!(reason.contains("injected fsync failure"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

/// A compaction drops what deletes and overwrites left behind: the table files shrink to about
/// what is live, and every live key reads back.
#[test]
fn a_compaction_drops_replaced_versions_and_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered);
    let value = vec![7u8; 1000];
    for round in 0..4u8 {
        let v = value.clone();
        store
            .write_blocking(move |tx| {
                for i in 0..2000u32 {
                    let mut v = v.clone();
                    v[0] = round;
                    tx.put(Space::Ts, i.to_be_bytes().to_vec(), v);
                }
                Ok::<_, StorageError>(())
            })
            .unwrap();
        store.flush_for_test(Space::Ts);
    }
    store
        .write_blocking(|tx| {
            for i in 1000..2000u32 {
                tx.delete(Space::Ts, i.to_be_bytes().to_vec());
            }
            Ok::<_, StorageError>(())
        })
        .unwrap();
    store.flush_for_test(Space::Ts);
    let before = store.disk_space(Space::Ts);
    store.compact(Space::Ts).unwrap();
    let after = store.disk_space(Space::Ts);
    assert!(after * 3 < before, "{before} -> {after}");
    let view = store.snapshot();
    let live: Vec<_> = view.scan(Space::Ts, KeyRange::Prefix(Vec::new()), false).map(Result::unwrap).collect();
    assert_eq!(live.len(), 1000);
    assert!(live.iter().all(|(_, v)| v[0] == 3));
}
