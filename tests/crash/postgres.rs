//! Acknowledged writes survive crashes of PostgreSQL under the `mosaicdb` binary on the
//! PostgreSQL backend (`--backend postgres --durability sync`: a group of writes is one
//! transaction, answered only once its COMMIT returned). Concurrent clients PUT, DELETE and batch
//! into an indexed table; at a random moment either both die together — SIGKILL of `mosaicdb`
//! and `.ci/postgres crash` (an immediate stop: every backend SIGQUIT, no checkpoint) — or
//! PostgreSQL dies alone under the running server, which must then answer every write with an
//! error, never a 2xx (it cannot have committed), and never leave one unanswered; once
//! PostgreSQL is back, writes are refused until `mosaicdb` is restarted if a group was cut (which
//! SIGTERM must not hang), or committed again if none was. After PostgreSQL's restart (its WAL replayed) and the server's, every document must
//! read back as its last acknowledged write left it, or as the write in flight at the crash left
//! it (a batch wholly or not at all), no refused write shows, the indexes and the count agree with
//! the documents and `/v1/admin/check` is ok.
//!
//! It runs only where `MOSAIC_TEST_POSTGRES` is set (the sign that PostgreSQL is installed here),
//! and then on a cluster of its own, started with `.ci/postgres start`, since it kills and
//! restarts it; elsewhere it says it is skipped and passes.

use crate::common::postgres::ENV;
use crate::process::{ServerProc, kill, start_with, stop};
use crate::workload::{
    self, KEYS_PER_WRITER, Outcome, Rng, State, TABLE, WRITERS, acknowledged, create_table, document, empty_state,
    in_flight, join_writers, key, keys_of, read_back, seed, verify,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The script that starts, crashes, restarts and stops throwaway clusters.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres");
const ROUNDS: u64 = 4;
/// Refused writes sent while PostgreSQL is down, and again once it is back.
const PROBES: usize = 3;
/// Writes acknowledged in a round before the crash may come.
const MIN_ACKNOWLEDGED: u64 = 20;

/// A PostgreSQL cluster of this test's own, in a temporary directory; stopped (and the directory
/// removed) when dropped, also when the test fails.
struct Cluster {
    dir: tempfile::TempDir,
    /// its `postgres` database, as `.ci/postgres start` printed it
    url: String,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::Builder::new().prefix("mosaic-pg").tempdir().unwrap();
        let out = script("start", dir.path());
        let url = out
            .trim()
            .strip_prefix(&format!("export {ENV}='"))
            .and_then(|rest| rest.strip_suffix('\''))
            .unwrap_or_else(|| panic!("unexpected output of .ci/postgres start: {out}"))
            .to_owned();
        Cluster { dir, url }
    }

    /// Kills the server as a power cut of its processes would (`.ci/postgres crash`).
    fn crash(&self) {
        script("crash", self.dir.path());
    }

    /// Starts it again on the same port (`.ci/postgres restart`): the WAL is replayed.
    fn restart(&self) {
        script("restart", self.dir.path());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = Command::new(SCRIPT).arg("stop").arg(self.dir.path()).output();
        if !out.as_ref().is_ok_and(|o| o.status.success()) {
            eprintln!("`.ci/postgres stop {}` failed: {out:?}", self.dir.path().display());
        }
    }
}

/// Runs `.ci/postgres CMD DIR`; returns its stdout, and panics with its stderr if it fails.
fn script(cmd: &str, dir: &std::path::Path) -> String {
    let started = Instant::now();
    let out = Command::new(SCRIPT).arg(cmd).arg(dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "`.ci/postgres {cmd} {}` failed ({}):\n{stderr}", dir.display(), out.status);
    eprintln!("postgres {cmd}: {:?}", started.elapsed());
    String::from_utf8(out.stdout).unwrap()
}

/// How a writer stopped: its last write had no answer (the server is gone: `connection failed`;
/// or it hangs: `timed out`), or an error (PostgreSQL is gone).
#[derive(Debug)]
enum Ending {
    Unanswered(&'static str),
    Refused(StatusCode, Value),
}

/// What the writers of a round share with the test.
#[derive(Default)]
struct Round {
    /// set just before the crash: an error answer before it is a failure
    crashed: AtomicBool,
    /// the writes acknowledged so far, over all writers
    acknowledged: AtomicU64,
    /// how each writer stopped
    endings: Mutex<Vec<(usize, Ending)>>,
}

/// Starts the writers, each on its own keys of `state`, with seeds drawn from `rng`.
fn spawn_writers(
    client: &reqwest::Client,
    base: &str,
    round: u64,
    state: &State,
    rng: &mut Rng,
    shared: &Arc<Round>,
) -> Vec<JoinHandle<Outcome>> {
    (0..WRITERS)
        .map(|w| {
            let (mine, seed) = (keys_of(state, w), Rng(rng.next() | 1));
            tokio::spawn(writer(client.clone(), base.to_owned(), w, round, mine, seed, shared.clone()))
        })
        .collect()
}

/// One writer: random PUTs, DELETEs and batches (two PUTs and a DELETE) on its own keys, one at
/// a time, until a write is not answered or is answered with an error (5xx, allowed only once
/// the crash began): that write's outcome is unknown, and it stays in flight. It counts its
/// acknowledged writes and says how it stopped in `shared`.
async fn writer(
    client: reqwest::Client,
    base: String,
    w: usize,
    round: u64,
    mut acked: State,
    mut rng: Rng,
    shared: Arc<Round>,
) -> Outcome {
    let mut out = Outcome::default();
    let doc_url = |id: &str| format!("{base}/v1/tables/{TABLE}/documents/{}", id.replace('/', "%2F"));
    let exists = |acked: &State, id: &str| acked.get(id).is_some_and(Option::is_some);
    let mut i = 0u64;
    let ending = loop {
        i += 1;
        // unique over writers and rounds, so unique-index values never collide (a batch's
        // second document adds 10^7)
        let stamp = round * 100_000_000 + i * 100 + w as u64;
        let op = rng.below(100);
        let mut free: Vec<usize> = (0..KEYS_PER_WRITER).collect();
        let ids: Vec<String> = (0..3).map(|_| key(w, free.remove(rng.below(free.len() as u64) as usize))).collect();
        // the state each touched key will have if this write lands, and the answer it must get
        let mut after = State::new();
        let batch = op >= 80;
        let (request, expected) = match op {
            0..=64 => {
                after.insert(ids[0].clone(), Some(document(w, stamp)));
                let status = if exists(&acked, &ids[0]) { StatusCode::OK } else { StatusCode::CREATED };
                (client.put(doc_url(&ids[0])).json(&document(w, stamp)), status)
            }
            65..=79 => {
                let status = if exists(&acked, &ids[0]) {
                    after.insert(ids[0].clone(), None);
                    StatusCode::NO_CONTENT
                } else {
                    StatusCode::NOT_FOUND
                };
                (client.delete(doc_url(&ids[0])), status)
            }
            _ => {
                let second = stamp + 10_000_000;
                let mut ops = vec![
                    json!({"op": "put", "table": TABLE, "id": ids[0], "document": document(w, stamp)}),
                    json!({"op": "put", "table": TABLE, "id": ids[1], "document": document(w, second)}),
                ];
                after.insert(ids[0].clone(), Some(document(w, stamp)));
                after.insert(ids[1].clone(), Some(document(w, second)));
                // a batch that deletes a missing document fails whole
                if exists(&acked, &ids[2]) {
                    ops.push(json!({"op": "delete", "table": TABLE, "id": ids[2]}));
                    after.insert(ids[2].clone(), None);
                }
                (client.post(format!("{base}/v1/batch")).json(&json!({"operations": ops})), StatusCode::OK)
            }
        };
        out.in_flight = Some((after.clone(), batch));
        // acknowledged = the whole response arrived with a status other than 5xx
        let resp = match request.send().await {
            Ok(resp) => resp,
            Err(e) => break Ending::Unanswered(unanswered(&e)),
        };
        let status = resp.status();
        let body = match resp.bytes().await {
            Ok(body) => body,
            Err(e) => break Ending::Unanswered(unanswered(&e)),
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if status.is_server_error() {
            assert!(
                shared.crashed.load(Ordering::SeqCst),
                "writer {w}, op {op} on {ids:?}: {status} {body} before any crash"
            );
            break Ending::Refused(status, body);
        }
        out.in_flight = None;
        out.acknowledged += 1;
        shared.acknowledged.fetch_add(1, Ordering::SeqCst);
        assert_eq!(status, expected, "writer {w}, op {op} on {ids:?}: {body}");
        if status.is_success() {
            acked.extend(after);
        }
    };
    out.acked = acked;
    shared.endings.lock().unwrap().push((w, ending));
    out
}

fn unanswered(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() { "timed out" } else { "connection failed" }
}

/// A PUT of a document of its own (`id`) while the store cannot commit it: it must be answered,
/// with an error (5xx); returns the problem's code.
async fn refused_write(client: &reqwest::Client, base: &str, id: &str, label: &str) -> String {
    let url = format!("{base}/v1/tables/{TABLE}/documents/{id}");
    let r = client.put(url).json(&json!({"probe": id})).send().await;
    let r = r.unwrap_or_else(|e| panic!("{label}: the PUT of {id} was not answered: {e}"));
    let status = r.status();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert!(status.is_server_error(), "{label}: the PUT of {id} was answered {status} {body}");
    problem(status, &body)
}

/// A PUT of a document of its own (`id`) once PostgreSQL is back: answered, either 2xx (`None`:
/// it must last) or with an error (its problem's code).
async fn write_after_restart(client: &reqwest::Client, base: &str, id: &str, label: &str) -> Option<String> {
    let url = format!("{base}/v1/tables/{TABLE}/documents/{id}");
    let r = client.put(url).json(&json!({"probe": id})).send().await;
    let r = r.unwrap_or_else(|e| panic!("{label}: the PUT of {id} was not answered: {e}"));
    let status = r.status();
    if status.is_success() {
        return None;
    }
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert!(status.is_server_error(), "{label}: the PUT of {id} was answered {status} {body}");
    Some(problem(status, &body))
}

/// An error answer in short: its status and problem code (`503 store_failed`).
fn problem(status: StatusCode, body: &Value) -> String {
    format!("{} {}", status.as_u16(), body["code"].as_str().unwrap_or("?"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_crashes_of_postgresql() {
    if std::env::var(ENV).map_or(true, |v| v.is_empty()) {
        eprintln!(
            "postgres crash test: skipped ({ENV} is not set, the sign that PostgreSQL is installed here; \
             the test starts a cluster of its own with .ci/postgres)"
        );
        return;
    }
    let seed = seed();
    let began = Instant::now();
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::builder().timeout(workload::WAIT).build().unwrap();
    let flags = ["--backend", "postgres", "--postgres-url", cluster.url.as_str()];
    let mut rng = Rng(seed | 1);
    let server = start_with(&data, "sync", &flags, &client).await;
    create_table(&client, &server.base, json!({"name": TABLE})).await;
    let mut state: State = empty_state();
    let mut server: Option<ServerProc> = Some(server);
    for round in 0..ROUNDS {
        // both kinds of crash in the first two rounds, then either
        let alone = match round {
            0 => false,
            1 => true,
            _ => rng.chance(50),
        };
        let how = if alone { "PostgreSQL alone" } else { "mosaicdb and PostgreSQL" };
        let label = format!("round {round}, {how} (seed {seed})");
        let live = server.take().unwrap();
        let shared = Arc::new(Round::default());
        let tasks = spawn_writers(&client, &live.base, round, &state, &mut rng, &shared);
        // let the writers get some writes acknowledged and run a random while more, then crash
        // under them
        let deadline = Instant::now() + workload::WAIT;
        // (a writer that stopped already failed: join_writers says why)
        while shared.acknowledged.load(Ordering::SeqCst) < MIN_ACKNOWLEDGED && !tasks.iter().any(|t| t.is_finished()) {
            assert!(Instant::now() < deadline, "{label}: {MIN_ACKNOWLEDGED} writes were not acknowledged in time");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.below(1000))).await;
        shared.crashed.store(true, Ordering::SeqCst);
        let (mut probes, mut kept) = (Vec::new(), Vec::new());
        let outcomes = if alone {
            cluster.crash();
            let outcomes = join_writers(tasks).await;
            // the server lives: each writer's last write was answered, with an error
            for (w, ending) in shared.endings.lock().unwrap().iter() {
                assert!(matches!(ending, Ending::Refused(..)), "{label}: writer {w}: {ending:?}");
            }
            // and so is every write while PostgreSQL is down, and once it is back: until a
            // restart (docs/errors.md, `backend_unavailable`)
            let mut codes = Vec::new();
            for i in 0..PROBES {
                let id = format!("p{round}-down-{i}");
                codes.push(refused_write(&client, &live.base, &id, &label).await);
                probes.push(id);
            }
            // Once PostgreSQL is back: refused by a store that a failed group poisoned (until the
            // restart), or — when no group was under way as PostgreSQL died, so nothing is in
            // doubt — committed by a committer that connected again; such a write must last.
            cluster.restart();
            for i in 0..PROBES {
                let id = format!("p{round}-back-{i}");
                match write_after_restart(&client, &live.base, &id, &label).await {
                    Some(code) => {
                        codes.push(code);
                        probes.push(id);
                    }
                    None => kept.push(id),
                }
            }
            let clean = stop(live);
            eprintln!("{label}: writes refused with {codes:?}; after SIGTERM mosaicdb exited 0: {clean}");
            outcomes
        } else {
            std::thread::scope(|s| {
                s.spawn(|| cluster.crash());
                kill(live);
            });
            cluster.restart();
            join_writers(tasks).await
        };
        let acknowledged = acknowledged(&outcomes);

        let live = start_with(&data, "sync", &flags, &client).await;
        // writes acknowledged once PostgreSQL was back last, then removed: the workload's
        // check counts the table's documents
        let shown = read_back(&client, &live.base, kept.iter()).await;
        assert!(shown.values().all(Option::is_some), "{label}: acknowledged writes are missing: {shown:?}");
        for id in &kept {
            let url = format!("{}/v1/tables/{TABLE}/documents/{id}", live.base);
            let status = client.delete(url).send().await.unwrap().status();
            assert!(status.is_success(), "{label}: the DELETE of {id} was answered {status}");
        }
        state = verify(&client, &live.base, &state, &outcomes, &label).await;
        // no refused write shows
        let shown = read_back(&client, &live.base, probes.iter()).await;
        assert!(shown.values().all(Option::is_none), "{label}: refused writes show: {shown:?}");
        let endings: Vec<String> = shared
            .endings
            .lock()
            .unwrap()
            .iter()
            .map(|(_, e)| match e {
                Ending::Unanswered(why) => why.to_string(),
                Ending::Refused(status, body) => problem(*status, body),
            })
            .collect();
        let in_flight = in_flight(&outcomes);
        eprintln!(
            "{label}: {acknowledged} writes acknowledged, {in_flight} in flight at the crash, the writers stopped on {endings:?}"
        );
        server = Some(live);
    }
    drop(server);
    drop(cluster);
    eprintln!("postgres crash test: {ROUNDS} rounds in {:?}", began.elapsed());
}
