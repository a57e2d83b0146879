//! Acknowledged writes survive SIGKILL: a child process writes in sync mode and reports each
//! acknowledged key on stdout; the parent kills it mid-stream, reopens the data directory and
//! checks that every reported key is there (fjall#311: the store opening is not enough).

use mosaicdb::keys::EntityKey;
use mosaicdb::storage::{Durability, Space, StorageConfig, StorageError, Store};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "MOSAIC_CRASH_CHILD_DIR";
/// The child exits by itself after this long, and the parent stops waiting for it.
const CHILD_LIFETIME_SECS: u64 = 30;

fn open(dir: &str, durability: Durability) -> Store {
    let mut cfg = StorageConfig::new(dir);
    cfg.durability = durability;
    cfg.cache_bytes = 8 << 20;
    Store::open(cfg, &mosaicdb::service::changefeed::Events).unwrap()
}

/// The child: 4 concurrent writers, each acknowledging its keys on stdout as soon as the write
/// returns, until killed.
fn child(dir: &str) {
    // Never outlive a parent that failed to kill us.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(CHILD_LIFETIME_SECS));
        std::process::exit(3);
    });
    let store = open(dir, Durability::Sync);
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (store, out) = (store.clone(), out.clone());
            std::thread::spawn(move || {
                for i in 0u64.. {
                    let id = format!("w{w}-{i}");
                    let key = EntityKey::new("t", &id).encode();
                    store
                        .write_blocking(move |tx| {
                            tx.put(Space::Entity, key, vec![0xab; 100]);
                            Ok::<_, StorageError>(())
                        })
                        .unwrap();
                    let mut out = out.lock().unwrap();
                    writeln!(out, "{id}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        let _ = w.join();
    }
}

/// This test's name in its binary (`store::acknowledged_sync_writes_survive_sigkill`), which the
/// child is run with: the module path without the crate.
fn this_test() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::acknowledged_sync_writes_survive_sigkill")
}

#[test]
fn acknowledged_sync_writes_survive_sigkill() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_str = dir.path().to_str().unwrap().to_owned();
    for round in 0..3 {
        let mut proc = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &this_test(), "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir_str)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Read on a thread so that a stalled child cannot stall the test.
        let (lines_tx, lines_rx) = std::sync::mpsc::channel();
        let stdout = proc.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(CHILD_LIFETIME_SECS);
        let mut acked = Vec::new();
        while acked.len() < 300 + round * 100 {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines_rx.recv_timeout(left) else { break };
            // the test harness prints its own lines too
            if line.starts_with('w') && line.contains('-') && !line.contains(' ') {
                acked.push(line);
            }
        }
        proc.kill().unwrap(); // SIGKILL
        proc.wait().unwrap();
        assert!(acked.len() >= 300, "the child acknowledged only {} writes", acked.len());

        let store = open(&dir_str, Durability::Sync);
        let missing: Vec<_> = acked
            .iter()
            .filter(|id| store.get(Space::Entity, &EntityKey::new("t", id).encode()).unwrap().is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: {} acknowledged writes lost, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        store.close().unwrap();
    }
}
