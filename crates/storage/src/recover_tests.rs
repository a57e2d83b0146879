//! The recovery from an engine failure that passes (`recover.rs`), on fjall's real poison path:
//! the process runs out of descriptors, so a memtable flush cannot create its table file, the
//! fjall worker that ran it crashes and poisons the database; once descriptors are back, the
//! store opens it again with every acknowledged write.
//!
//! The descriptor limit is the process's, so the test runs in a child process of the test binary
//! that runs only it (`--exact`): the other tests of the binary run in threads of the parent.
#![cfg(target_os = "linux")]

use super::events::TestEvents;
use super::*;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Set in the child (to the durability it runs with).
const CHILD_ENV: &str = "MOSAIC_RECOVER_CHILD";

#[test]
fn a_flush_out_of_descriptors_is_recovered_from_with_every_acknowledged_write() {
    if let Ok(durability) = std::env::var(CHILD_ENV) {
        return run(durability.parse().unwrap());
    }
    let name = "recover_tests::a_flush_out_of_descriptors_is_recovered_from_with_every_acknowledged_write";
    for durability in ["sync", "buffered"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(CHILD_ENV, durability)
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // it ran, alone, and passed
        assert!(
            out.status.success() && stdout.contains("test result: ok. 1 passed"),
            "{durability}: {stdout}\n{stderr}"
        );
    }
}

/// Descriptors held so that the process can open no more.
struct Exhausted {
    held: Vec<std::fs::File>,
    limit: Rlimit,
}

/// Lowers the soft descriptor limit to the lowest free descriptor number and fills any number
/// freed below it: every open fails with EMFILE until [`release`].
fn exhaust() -> Exhausted {
    let limit = getrlimit(Resource::Nofile);
    let used: std::collections::BTreeSet<u64> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let lowest_free = (0..).find(|n| !used.contains(n)).unwrap();
    setrlimit(Resource::Nofile, Rlimit { current: Some(lowest_free), maximum: limit.maximum }).unwrap();
    let mut held = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        held.push(f);
    }
    Exhausted { held, limit }
}

fn release(e: Exhausted) {
    drop(e.held);
    setrlimit(Resource::Nofile, e.limit).unwrap();
}

fn value(i: u32) -> Vec<u8> {
    // incompressible enough that a few hundred writes fill a small memtable
    (0..1024u32).map(|j| (i.wrapping_mul(2_654_435_761).wrapping_add(j * 40_503) >> 13) as u8).collect()
}

fn key(i: u32) -> Vec<u8> {
    format!("doc-{i:08}").into_bytes()
}

fn write(store: &Store, i: u32) -> Result<(), StorageError> {
    store.write_blocking(move |tx| {
        tx.put(Space::Entity, key(i), value(i));
        Ok::<_, StorageError>(())
    })
}

fn run(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StorageConfig::new(dir.path());
    config.durability = durability;
    config.cache_bytes = 4 << 20;
    config.row_cache_bytes = 0;
    config.memtable_bytes = 256 << 10;
    let store = Store::open(config.clone(), &TestEvents).unwrap();
    // every write's fate: true = acknowledged
    let mut fate = BTreeMap::new();
    let mut i = 0;
    for _ in 0..600 {
        write(&store, i).unwrap();
        fate.insert(i, true);
        i += 1;
    }

    // Out of descriptors: writes go on into the memtable until its flush fails, and fjall stops.
    let exhausted = exhaust();
    let deadline = Instant::now() + Duration::from_secs(60);
    let refusal = loop {
        assert!(Instant::now() < deadline, "no flush failed after {i} writes");
        match write(&store, i) {
            Ok(()) => {
                fate.insert(i, true);
            }
            Err(e @ StorageError::Recovering { .. }) => {
                fate.insert(i, false);
                break e;
            }
            Err(e) => panic!("write {i}: {e}"),
        }
        i += 1;
    };
    i += 1;
    let StorageError::Recovering { reason, retry_after } = &refusal else { unreachable!() };
    assert!(reason.contains("crashed") && reason.contains("code: 24"), "{reason}");
    assert!((1..=30).contains(retry_after), "{retry_after}");
    match store.health() {
        Health::Recovering { reason, .. } => assert!(reason.contains("code: 24"), "{reason}"),
        other => panic!("health {other:?}"),
    }
    // more writes are refused, before anything of them is written
    for _ in 0..3 {
        assert!(matches!(write(&store, i), Err(StorageError::Recovering { .. })));
        fate.insert(i, false);
        i += 1;
    }
    // reads go on (the last write acknowledged is in a memtable: no file to open)
    let last = *fate.iter().rev().find(|(_, acked)| **acked).unwrap().0;
    assert_eq!(store.snapshot().get(Space::Entity, &key(last)).unwrap().as_deref(), Some(&value(last)[..]));
    // the cause lasts: an attempt or two fails (the first comes after 1 s)
    std::thread::sleep(Duration::from_millis(2500));
    match store.health() {
        Health::Recovering { attempts, reason } => assert!(attempts >= 1, "{attempts} attempts: {reason}"),
        other => panic!("health {other:?}"),
    }

    // Descriptors are back: the store reopens on its own (the next attempt within 2 s).
    release(exhausted);
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.health() != Health::Ok {
        assert!(Instant::now() < deadline, "not recovered: {:?}", store.health());
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..600 {
        write(&store, i).unwrap();
        fate.insert(i, true);
        i += 1;
    }
    let check = |store: &Store| {
        let view = store.snapshot();
        for (&n, &acked) in &fate {
            let found = view.get(Space::Entity, &key(n)).unwrap();
            if acked {
                assert_eq!(found.as_deref(), Some(&value(n)[..]), "acknowledged write {n}");
            } else {
                assert!(found.is_none(), "refused write {n} is there");
            }
        }
    };
    check(&store);
    // and after a restart, from the disk
    store.close().unwrap();
    drop(store);
    let store = Store::open(config, &TestEvents).unwrap();
    check(&store);
    store.close().unwrap();
}
