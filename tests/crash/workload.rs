//! The crash workload shared by `server.rs` (SIGKILL) and `power_loss.rs` (SIGKILL and a
//! power cut): an indexed table, concurrent writers that PUT, PATCH, DELETE, batch and import on
//! keys of their own and keep what was acknowledged apart from what was in flight, and the
//! verification after a restart. It uses `common::model` (the merge patch) and `process` (the
//! binary).
#![allow(dead_code)] // each test uses what it needs

pub use crate::common::model::Rng;
use crate::common::model::merge_patch;
use crate::process::BIN;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

pub const TABLE: &str = "crash";
pub const WRITERS: usize = 6;
pub const KEYS_PER_WRITER: usize = 6;
/// No wait in these tests lasts longer.
pub const WAIT: Duration = Duration::from_secs(20);

/// The seed of a run: `MOSAIC_CRASH_SEED`, else the clock; printed, so a failure reproduces.
pub fn seed() -> u64 {
    let seed = std::env::var("MOSAIC_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("MOSAIC_CRASH_SEED={seed}");
    seed
}

/// `mosaicdb check <dir>` with the server stopped: its exit status and JSON report.
pub fn offline_check(dir: &Path) -> (bool, Value) {
    let out_path = dir.with_extension("check.json");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(BIN)
        .args(["check", dir.to_str().unwrap()])
        .stdout(Stdio::from(out))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mosaicdb check did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = std::fs::read(&out_path).unwrap();
    let _ = std::fs::remove_file(&out_path);
    (status.success(), serde_json::from_slice(&text).unwrap_or(Value::Null))
}

/// A full document, stamped with the write that made it.
pub fn document(w: usize, stamp: u64) -> Value {
    json!({
        "w": w, "stamp": stamp, "g": stamp % 5, "u": format!("u{w}-{stamp}"), "n": stamp,
        "text": format!("writer {w} wrote stamp s{stamp} with words w{} and common ones", stamp % 11),
        "tags": [stamp % 3, 10 + stamp % 4], "sub": {"x": stamp, "keep": true},
        "loc": {"lat": (stamp % 170) as f64 - 85.0 + 0.25, "lon": (stamp % 350) as f64 - 175.0 + 0.5},
    })
}

/// A merge patch: changes indexed fields, deletes one (`tags`) and one nested member.
pub fn patch(stamp: u64) -> Value {
    json!({"stamp": stamp, "n": -(stamp as i64), "g": format!("p{}", stamp % 3), "tags": null,
           "sub": {"x": null, "y": stamp}, "text": format!("patched w{} words", stamp % 7)})
}

pub fn key(w: usize, k: usize) -> String {
    format!("w{w}/k{k}")
}

/// Documents by id; `None` = absent.
pub type State = BTreeMap<String, Option<Value>>;

/// Every key of every writer, absent: the state of a new table.
pub fn empty_state() -> State {
    (0..WRITERS).flat_map(|w| (0..KEYS_PER_WRITER).map(move |k| (key(w, k), None))).collect()
}

/// What one writer knows when the server dies.
#[derive(Default)]
pub struct Outcome {
    /// each key as the acknowledged writes left it
    pub acked: State,
    /// the write without a response at the kill: its keys as it would leave them, and whether
    /// it is all-or-nothing (a batch)
    pub in_flight: Option<(State, bool)>,
    pub acknowledged: u64,
}

/// The writes acknowledged over all writers.
pub fn acknowledged(outcomes: &[Outcome]) -> u64 {
    outcomes.iter().map(|o| o.acknowledged).sum()
}

/// The writers with a write in flight at the kill.
pub fn in_flight(outcomes: &[Outcome]) -> usize {
    outcomes.iter().filter(|o| o.in_flight.is_some()).count()
}

/// Creates the table (`create` is the body of `POST /v1/tables`, naming [`TABLE`]) and its
/// indexes, one of each kind the writers' documents exercise.
pub async fn create_table(client: &reqwest::Client, base: &str, create: Value) {
    let post = |path: &str, body: Value| client.post(format!("{base}{path}")).json(&body).send();
    assert_eq!(post("/v1/tables", create).await.unwrap().status(), 201);
    for (name, kind, field) in [
        ("by_g", "hash", "g"),
        ("by_u", "unique", "u"),
        ("by_n", "range", "n"),
        ("by_tags", "range", "tags"),
        ("by_sub", "hash", "sub.x"),
        ("by_loc", "spatial", "loc"),
        ("by_text", "fulltext", "text"),
    ] {
        let r = post(&format!("/v1/tables/{TABLE}/indexes"), json!({"name": name, "kind": kind, "fields": [field]}));
        assert_eq!(r.await.unwrap().status(), 201, "{name}");
    }
}

/// Starts an index build over the existing documents (as the writers start), named after the
/// round; returns its name.
pub async fn start_late_index(client: &reqwest::Client, base: &str, round: u64) -> String {
    let building = format!("late{round}");
    let req = json!({"name": building, "kind": "range", "fields": ["stamp"]});
    let r = client.post(format!("{base}/v1/tables/{TABLE}/indexes")).json(&req).send().await.unwrap();
    // 202 over existing documents, 201 should the writers have deleted every one
    assert!([201, 202].contains(&r.status().as_u16()), "{}", r.text().await.unwrap());
    building
}

/// Waits until the index is ready (a build the kill interrupted resumes and completes).
pub async fn wait_index_ready(client: &reqwest::Client, base: &str, name: &str, label: &str) {
    let url = format!("{base}/v1/tables/{TABLE}/indexes/{name}");
    let deadline = Instant::now() + WAIT;
    loop {
        let def: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
        match def["state"].as_str() {
            Some("ready") => break,
            Some("building") if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            _ => panic!("{label}: {def}"),
        }
    }
}

/// Writer `w`'s keys of `state` (ids `w{w}/…`).
pub fn keys_of(state: &State, w: usize) -> State {
    state.iter().filter(|(id, _)| id.starts_with(&format!("w{w}/"))).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Starts the writers, each on its own keys of `state`, with seeds drawn from `rng`.
pub fn spawn_writers(
    client: &reqwest::Client,
    base: &str,
    round: u64,
    state: &State,
    rng: &mut Rng,
) -> Vec<JoinHandle<Outcome>> {
    (0..WRITERS)
        .map(|w| {
            let (mine, seed) = (keys_of(state, w), Rng(rng.next() | 1));
            tokio::spawn(writer(client.clone(), base.to_owned(), w, round, mine, seed))
        })
        .collect()
}

/// The writers' outcomes, once the server under them is gone.
pub async fn join_writers(tasks: Vec<JoinHandle<Outcome>>) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(tokio::time::timeout(WAIT, t).await.expect("a writer hung after the kill").unwrap());
    }
    outcomes
}

/// One writer: random writes to its own keys, one at a time, until the server stops answering.
pub async fn writer(
    client: reqwest::Client,
    base: String,
    w: usize,
    round: u64,
    mut acked: State,
    mut rng: Rng,
) -> Outcome {
    let mut out = Outcome::default();
    let doc_url = |id: &str| format!("{base}/v1/tables/{TABLE}/documents/{}", id.replace('/', "%2F"));
    let exists = |acked: &State, id: &str| acked.get(id).is_some_and(Option::is_some);
    for i in 1u64..100_000 {
        // unique over writers and rounds, so unique-index values never collide (imports add 10^7s)
        let stamp = round * 100_000_000 + i * 100 + w as u64;
        let op = rng.below(100);
        let n = match op {
            0..=64 => 1,
            _ => 3,
        };
        let batch = (65..=82).contains(&op);
        let mut free: Vec<usize> = (0..KEYS_PER_WRITER).collect();
        let ids: Vec<String> = (0..n).map(|_| key(w, free.remove(rng.below(free.len() as u64) as usize))).collect();
        // the state each touched key will have if this write lands
        let mut after = State::new();
        let request = match op {
            0..=29 => {
                after.insert(ids[0].clone(), Some(document(w, stamp)));
                client.put(doc_url(&ids[0])).json(&document(w, stamp))
            }
            30..=49 => {
                let new = acked[&ids[0]].as_ref().map(|d| merge_patch(d, &patch(stamp)));
                after.insert(ids[0].clone(), new);
                client.patch(doc_url(&ids[0])).json(&patch(stamp))
            }
            50..=64 => {
                after.insert(ids[0].clone(), None);
                client.delete(doc_url(&ids[0]))
            }
            65..=82 => {
                // put, then patch or delete where the document exists (a batch that names a
                // missing document fails whole)
                let mut ops = vec![json!({"op": "put", "table": TABLE, "id": ids[0], "document": document(w, stamp)})];
                after.insert(ids[0].clone(), Some(document(w, stamp)));
                if let Some(d) = acked[&ids[1]].as_ref() {
                    ops.push(json!({"op": "patch", "table": TABLE, "id": ids[1], "document": patch(stamp)}));
                    after.insert(ids[1].clone(), Some(merge_patch(d, &patch(stamp))));
                }
                if exists(&acked, &ids[2]) {
                    ops.push(json!({"op": "delete", "table": TABLE, "id": ids[2]}));
                    after.insert(ids[2].clone(), None);
                }
                client.post(format!("{base}/v1/batch")).json(&json!({"operations": ops}))
            }
            _ => {
                let mut body = String::new();
                for (i, id) in ids.iter().enumerate() {
                    let mut d = document(w, stamp + i as u64 * 10_000_000);
                    after.insert(id.clone(), Some(d.clone()));
                    d["_id"] = json!(id);
                    body.push_str(&format!("{d}\n"));
                }
                client
                    .post(format!("{base}/v1/tables/{TABLE}/import"))
                    .header("content-type", "application/x-ndjson")
                    .body(body)
            }
        };
        out.in_flight = Some((after.clone(), batch));
        // acknowledged = the whole response arrived; anything else leaves the write in flight
        let Ok(resp) = request.send().await else { break };
        let status = resp.status();
        let Ok(body) = resp.bytes().await else { break };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        out.in_flight = None;
        out.acknowledged += 1;
        let expected: &[StatusCode] = match op {
            0..=29 if !exists(&acked, &ids[0]) => &[StatusCode::CREATED],
            0..=29 => &[StatusCode::OK],
            30..=49 if !exists(&acked, &ids[0]) => &[StatusCode::NOT_FOUND],
            30..=49 => &[StatusCode::OK],
            50..=64 if !exists(&acked, &ids[0]) => &[StatusCode::NOT_FOUND],
            50..=64 => &[StatusCode::NO_CONTENT],
            _ => &[StatusCode::OK],
        };
        assert!(expected.contains(&status), "writer {w}, op {op} on {ids:?}: {status} {body}");
        if op > 82 {
            assert_eq!((body["inserted"].as_u64(), body["failed"].as_u64()), (Some(3), Some(0)), "{body}");
        }
        if status.is_success() {
            acked.extend(after);
        }
    }
    out.acked = acked;
    out
}

/// What the server holds for each key, read over HTTP.
pub async fn read_back(client: &reqwest::Client, base: &str, ids: impl Iterator<Item = &String>) -> State {
    read_back_from(client, &format!("{base}/v1/tables/{TABLE}"), ids).await
}

/// What the table at `table_url` (`…/tables/{name}`, of any database) holds for each key.
pub async fn read_back_from<'a>(
    client: &reqwest::Client,
    table_url: &str,
    ids: impl Iterator<Item = &'a String>,
) -> State {
    let mut state = State::new();
    for id in ids {
        let r = client.get(format!("{table_url}/documents/{}", id.replace('/', "%2F"))).send().await.unwrap();
        let doc = match r.status() {
            StatusCode::OK => {
                let mut d: Value = r.json().await.unwrap();
                assert_eq!(d["_id"], json!(id));
                d.as_object_mut().unwrap().remove("_id");
                Some(d)
            }
            StatusCode::NOT_FOUND => None,
            s => panic!("GET {table_url}/documents/{id}: {s} {}", r.text().await.unwrap_or_default()),
        };
        state.insert(id.clone(), doc);
    }
    state
}

pub fn show(d: &Option<Value>) -> String {
    d.as_ref().map_or("absent".into(), Value::to_string)
}

/// What went wrong in what the restarted server holds (`found`), against what the writers knew
/// at the kill: every key as its last acknowledged write left it or as the write in flight would
/// have, a batch in flight whole or not at all. One line per problem; none = nothing lost.
pub fn lost(outcomes: &[Outcome], found: &State, label: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for o in outcomes {
        let in_flight_landed = o.in_flight.as_ref().map(|(after, _)| {
            after.iter().filter(|&(id, d)| found.get(id) == Some(d) && o.acked.get(id) != Some(d)).count()
        });
        for (id, want) in &o.acked {
            let got = &found[id];
            let in_flight = o.in_flight.as_ref().and_then(|(after, _)| after.get(id));
            if !(got == want || in_flight == Some(got)) {
                problems.push(format!(
                    "{label}: {id} is {}, but the last acknowledged write left {} (in flight: {})",
                    show(got),
                    show(want),
                    in_flight.map_or("nothing".into(), show),
                ));
            }
        }
        // a batch in flight landed whole or not at all
        if let (Some((after, true)), Some(landed)) = (&o.in_flight, in_flight_landed) {
            let changing = after.iter().filter(|&(id, d)| o.acked.get(id) != Some(d)).count();
            if !(landed == 0 || landed == changing) {
                problems.push(format!("{label}: half a batch: {after:?}"));
            }
        }
    }
    problems
}

/// After a restart: reads every key back, asserts nothing was [`lost`], that each stored
/// document is found through the unique index, that the table's count matches and that
/// `/v1/admin/check` is ok. Returns what the server holds (the next round's state).
pub async fn verify(client: &reqwest::Client, base: &str, keys: &State, outcomes: &[Outcome], label: &str) -> State {
    let found = read_back(client, base, keys.keys()).await;
    let problems = lost(outcomes, &found, label);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // the indexes agree with what came back: each stored document is found by its unique value
    for (id, doc) in found.iter().filter_map(|(id, d)| Some((id, d.as_ref()?))) {
        let q = json!({"filter": {"u": doc["u"]}, "explain": false});
        let r: Value =
            client.post(format!("{base}/v1/tables/{TABLE}/query")).json(&q).send().await.unwrap().json().await.unwrap();
        assert_eq!(r["documents"][0]["_id"], json!(id), "{label}: {r}");
    }
    // the count, and every index (a resumed build's too), agree with the documents
    let info: Value = client.get(format!("{base}/v1/tables/{TABLE}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["documents"], found.values().filter(|d| d.is_some()).count(), "{label}: {info}");
    let r = client.post(format!("{base}/v1/admin/check")).json(&json!({})).send().await.unwrap();
    let report: Value = r.json().await.unwrap();
    assert_eq!(report["ok"], true, "{label}: check after the restart: {report}");
    found
}
