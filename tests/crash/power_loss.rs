//! Power loss under the real server, on powerfs (`tests/powerfs`, a FUSE filesystem that keeps
//! only what was fsynced when told to `cut`):
//!
//! - **Crash trials**: the `mosaicdb` binary (sync durability) serves the indexed table of
//!   `workload` on a fresh data directory on powerfs, with its changefeed on, while concurrent
//!   writers PUT, PATCH, DELETE, batch and import and a consumer long-polls `/v1/changes`. At a
//!   random moment the server is SIGKILLed and the power cut; `mosaicdb check` must pass offline,
//!   and after a restart every key must be as its last acknowledged write left it (or as the
//!   write in flight would have, a batch whole or not at all), the count and `/v1/admin/check`
//!   must be right, and every change event that was served must still be served, the same, at
//!   the same seq, the seqs gap-free from 1 and their replay equal to the documents. Several
//!   rounds on the same directory, so a recovery is recovered again. One test per mode: `data`
//!   (only unsynced file data is lost) and `dirs` (unsynced directory entries are lost too).
//! - **Reads never run ahead of the fsync** (sync mode): while powerfs holds every fsync, the
//!   writes waiting on it are not acknowledged, and no GET, query, listing or changefeed read
//!   shows them; released, they complete and show; cut instead, they are gone and were never
//!   seen. Buffered mode, for contrast, shows a write before it is durable and loses it at a cut.
//!
//! Every test needs root, `/dev/fuse` and the powerfs binary; where one is missing it says so on
//! stderr and checks nothing (`.ci/run` builds powerfs first, so CI runs them all). Run:
//!
//! ```sh
//! cargo build --release --manifest-path tests/powerfs/Cargo.toml
//! MOSAIC_POWERFS=$PWD/tests/powerfs/target/release/powerfs MOSAIC_POWER_TRIALS=3 \
//!   cargo test --test crash power_loss::
//! ```
//!
//! `MOSAIC_CRASH_SEED` replays a run; trial `t` of a run uses seed + `t`, so one trial replays
//! alone with its seed and `MOSAIC_POWER_TRIALS=1`.

use crate::mount::PowerFs;
use crate::process::{ServerProc, kill, kill_and, start};
use crate::workload;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use workload::{
    Rng, State, TABLE, WAIT, acknowledged, create_table, empty_state, in_flight, join_writers, offline_check,
    spawn_writers, start_late_index, verify, wait_index_ready,
};

/// Rounds (kill, cut, restart) per trial, on the same data directory.
const ROUNDS: u64 = 3;

/// The consumer: long-polls the feed after `since` and records every event served (an event
/// counts once its whole page has arrived), until the server is gone.
async fn follow(client: reqwest::Client, base: String, mut since: u64, served: Arc<Mutex<Vec<Value>>>) {
    loop {
        let url = format!("{base}/v1/changes?since={since}&limit=1000&wait_ms=500");
        let Ok(resp) = client.get(url).send().await else { return };
        let status = resp.status();
        let Ok(body) = resp.bytes().await else { return };
        let page: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        assert_eq!(status, StatusCode::OK, "GET /v1/changes?since={since}: {page}");
        served.lock().unwrap().extend(page["events"].as_array().unwrap().iter().cloned());
        since = page["next"].as_u64().unwrap();
    }
}

/// Every event the feed serves, from the start.
async fn whole_feed(client: &reqwest::Client, base: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let mut since = 0;
    loop {
        let url = format!("{base}/v1/changes?since={since}&limit=1000");
        let page: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        let batch = page["events"].as_array().unwrap_or_else(|| panic!("{page}"));
        if batch.is_empty() {
            return events;
        }
        events.extend(batch.iter().cloned());
        since = page["next"].as_u64().unwrap();
    }
}

/// The feed after a restart against what was served before the cut and the documents held:
/// seqs gap-free from 1, every served event still there and the same, and the replay of the
/// feed equal to the documents. One line per problem.
fn feed_problems(feed: &[Value], served: &[Value], found: &State, label: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, e) in feed.iter().enumerate() {
        if e["seq"] != i as u64 + 1 {
            problems.push(format!("{label}: the feed's event {} has seq {}: {e}", i + 1, e["seq"]));
            return problems;
        }
    }
    for e in served {
        let seq = e["seq"].as_u64().unwrap();
        match feed.get(seq as usize - 1) {
            Some(now) if now == e => {}
            now => problems.push(format!(
                "{label}: event {seq} was served as {e}, after the cut it is {}",
                now.map_or("gone".into(), Value::to_string)
            )),
        }
    }
    let mut replica = State::new();
    for e in feed {
        assert_eq!(e["table"], TABLE, "{e}");
        let id = e["id"].as_str().unwrap().to_owned();
        let doc = match e["op"].as_str() {
            Some("put") => {
                let mut d = e["document"].clone();
                d.as_object_mut().unwrap().remove("_id");
                Some(d)
            }
            _ => None,
        };
        replica.insert(id, doc);
    }
    for (id, doc) in found {
        let replayed = replica.get(id).cloned().flatten();
        if &replayed != doc {
            problems.push(format!(
                "{label}: {id} is {}, the feed's replay gives {}",
                workload::show(doc),
                workload::show(&replayed)
            ));
        }
    }
    problems
}

#[derive(Default)]
struct Totals {
    trials: u64,
    cuts: u64,
    acknowledged: u64,
    served: u64,
    in_flight: u64,
    fsyncs: u64,
}

/// One trial: a fresh data directory on powerfs, [`ROUNDS`] rounds of writers, consumer, kill,
/// cut, offline check, restart and verification.
async fn trial(mode: &str, seed: u64, totals: &mut Totals) {
    let fs = PowerFs::mount(mode);
    let data = fs.data();
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let mut rng = Rng(seed | 1);
    let mut live: ServerProc = start(&data, "sync", &client).await;
    create_table(&client, &live.base, json!({"name": TABLE, "changefeed": "full"})).await;
    let mut state = empty_state();
    // every event served so far, in seq order (after a restart: the whole feed, served too)
    let mut served_all: Vec<Value> = Vec::new();
    for round in 0..ROUNDS {
        let label = format!("power loss ({mode}, seed {seed}) round {round}");
        let building = if round > 0 { Some(start_late_index(&client, &live.base, round).await) } else { None };
        let since = served_all.last().map_or(0, |e| e["seq"].as_u64().unwrap());
        let served = Arc::new(Mutex::new(Vec::new()));
        let consumer = tokio::spawn(follow(client.clone(), live.base.clone(), since, served.clone()));
        let tasks = spawn_writers(&client, &live.base, round, &state, &mut rng);
        tokio::time::sleep(Duration::from_millis(200 + rng.below(800))).await;
        // the power goes as the process dies: nothing it did not fsync survives
        kill_and(live, || fs.ctl("cut"));
        let outcomes = join_writers(tasks).await;
        tokio::time::timeout(WAIT, consumer).await.expect("the consumer hung after the kill").unwrap();
        let served = std::mem::take(&mut *served.lock().unwrap());
        let acknowledged = acknowledged(&outcomes);
        assert!(acknowledged > 0, "{label}: no write was acknowledged");

        let (ok, report) = offline_check(&data);
        assert!(ok && report["ok"] == true, "{label}: check after the cut: {report}");

        live = start(&data, "sync", &client).await;
        if let Some(building) = building {
            wait_index_ready(&client, &live.base, &building, &label).await;
        }
        state = verify(&client, &live.base, &state, &outcomes, &label).await;
        served_all.extend(served.iter().cloned());
        let feed = whole_feed(&client, &live.base).await;
        let problems = feed_problems(&feed, &served_all, &state, &label);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // the consumer goes on from the last event kept (there may be more than it was served)
        served_all = feed;
        totals.cuts += 1;
        totals.acknowledged += acknowledged;
        totals.served += served.len() as u64;
        totals.in_flight += in_flight(&outcomes) as u64;
        eprintln!(
            "{label}: {acknowledged} acknowledged, {} in flight, {} events served",
            in_flight(&outcomes),
            served.len()
        );
    }
    drop(live);
    totals.fsyncs += fs.status()["fsyncs"].as_u64().unwrap_or(0);
    totals.trials += 1;
}

async fn power_loss(mode: &str) {
    if PowerFs::binary().is_none() {
        return;
    }
    let trials: u64 = std::env::var("MOSAIC_POWER_TRIALS").ok().map_or(3, |s| s.parse().expect("MOSAIC_POWER_TRIALS"));
    let seed = workload::seed();
    let started = Instant::now();
    let mut totals = Totals::default();
    for t in 0..trials {
        let seed = seed.wrapping_add(t);
        eprintln!("power loss ({mode}) trial {t}: MOSAIC_CRASH_SEED={seed} MOSAIC_POWER_TRIALS=1 replays it");
        trial(mode, seed, &mut totals).await;
    }
    // stderr, not captured by the harness: the figures are the point of a run
    let line = format!(
        "power loss ({mode}): {} trials, {} cuts, {} acknowledged writes ({} in flight at a cut), {} served \
         events, 0 lost, {} fsyncs, {:.1} s (seed {seed})",
        totals.trials,
        totals.cuts,
        totals.acknowledged,
        totals.in_flight,
        totals.served,
        totals.fsyncs,
        started.elapsed().as_secs_f64()
    );
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_and_served_events_survive_power_loss_in_data_mode() {
    power_loss("data").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_and_served_events_survive_power_loss_in_dirs_mode() {
    power_loss("dirs").await;
}

// ---------- reads and the fsync ----------

const HELD: &str = "held";

/// What every read path shows of the documents `a`, `b` and `c` of the table `held`: each by
/// GET, the ids each query on the `v` index finds, the listing, the count, and the events served
/// after `since` as `[op, id, v]`.
async fn observe(client: &reqwest::Client, base: &str, since: u64) -> Value {
    let mut seen = serde_json::Map::new();
    for id in ["a", "b", "c"] {
        let r = client.get(format!("{base}/v1/tables/{HELD}/documents/{id}")).send().await.unwrap();
        let doc = match r.status() {
            StatusCode::OK => r.json::<Value>().await.unwrap()["v"].clone(),
            StatusCode::NOT_FOUND => Value::Null,
            s => panic!("GET {id}: {s}"),
        };
        seen.insert(id.into(), doc);
    }
    let ids = |docs: &Value| -> Value {
        docs["documents"].as_array().unwrap().iter().map(|d| d["_id"].clone()).collect::<Vec<_>>().into()
    };
    for v in 1..=5 {
        let q = json!({"filter": {"v": v}});
        let r: Value =
            client.post(format!("{base}/v1/tables/{HELD}/query")).json(&q).send().await.unwrap().json().await.unwrap();
        seen.insert(format!("v={v}"), ids(&r));
    }
    let list: Value =
        client.get(format!("{base}/v1/tables/{HELD}/documents")).send().await.unwrap().json().await.unwrap();
    seen.insert("list".into(), ids(&list));
    let table: Value = client.get(format!("{base}/v1/tables/{HELD}")).send().await.unwrap().json().await.unwrap();
    seen.insert("count".into(), table["documents"].clone());
    let page: Value =
        client.get(format!("{base}/v1/changes?since={since}")).send().await.unwrap().json().await.unwrap();
    let events: Vec<Value> =
        page["events"].as_array().unwrap().iter().map(|e| json!([e["op"], e["id"], e["document"]["v"]])).collect();
    seen.insert("events".into(), events.into());
    Value::Object(seen)
}

/// What [`observe`] should show: the documents by `v`, and the events expected after `since`.
fn expect(docs: &[(&str, i64)], events: &[(&str, i64)]) -> Value {
    let mut seen = serde_json::Map::new();
    let by_id: BTreeMap<&str, i64> = docs.iter().copied().collect();
    for id in ["a", "b", "c"] {
        seen.insert(id.into(), by_id.get(id).map_or(Value::Null, |v| json!(v)));
    }
    for v in 1..=5 {
        let ids: Vec<&str> = by_id.iter().filter(|&(_, &dv)| dv == v).map(|(&id, _)| id).collect();
        seen.insert(format!("v={v}"), json!(ids));
    }
    seen.insert("list".into(), json!(by_id.keys().collect::<Vec<_>>()));
    seen.insert("count".into(), json!(by_id.len()));
    seen.insert("events".into(), events.iter().map(|(id, v)| json!(["put", id, v])).collect::<Vec<_>>().into());
    Value::Object(seen)
}

/// The seq of the feed's last event.
async fn last_seq(client: &reqwest::Client, base: &str) -> u64 {
    whole_feed(client, base).await.last().map_or(0, |e| e["seq"].as_u64().unwrap())
}

/// PUTs `{"v": v}` as `id` in the background: the status, or None if no answer came.
fn put_later(client: &reqwest::Client, base: &str, id: &str, v: i64) -> tokio::task::JoinHandle<Option<u16>> {
    let req = client.put(format!("{base}/v1/tables/{HELD}/documents/{id}")).json(&json!({"v": v}));
    tokio::spawn(async move {
        let resp = req.send().await.ok()?;
        let status = resp.status().as_u16();
        resp.bytes().await.ok()?;
        Some(status)
    })
}

/// The table `held` (changefeed on, a hash index on `v`) with `a` = 1, durable.
async fn setup_held(client: &reqwest::Client, base: &str) {
    let r = client.post(format!("{base}/v1/tables")).json(&json!({"name": HELD, "changefeed": "full"}));
    assert_eq!(r.send().await.unwrap().status(), 201);
    let r = client
        .post(format!("{base}/v1/tables/{HELD}/indexes"))
        .json(&json!({"name": "by_v", "kind": "hash", "fields": ["v"]}));
    assert_eq!(r.send().await.unwrap().status(), 201);
    let r = client.put(format!("{base}/v1/tables/{HELD}/documents/a")).json(&json!({"v": 1}));
    assert_eq!(r.send().await.unwrap().status(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_sync_mode_no_read_sees_a_write_before_the_fsync_that_makes_it_durable() {
    let Some(fs) = PowerFs::try_mount("data") else { return };
    let data = fs.data();
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let live = start(&data, "sync", &client).await;
    setup_held(&client, &live.base).await;
    let since = last_seq(&client, &live.base).await;
    assert_eq!(observe(&client, &live.base, since).await, expect(&[("a", 1)], &[]));

    // held, then released: the writes wait for their fsync, and nothing shows them meanwhile
    let held = fs.hold();
    let new = put_later(&client, &live.base, "b", 2);
    let changed = put_later(&client, &live.base, "a", 3);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!new.is_finished() && !changed.is_finished(), "a write was acknowledged with its fsync held");
    assert_eq!(observe(&client, &live.base, since).await, expect(&[("a", 1)], &[]), "a read saw a held write");
    assert!(!new.is_finished() && !changed.is_finished(), "a write was acknowledged with its fsync held");
    assert!(fs.status()["pending"].as_u64().unwrap() > 0, "{}", fs.status());
    drop(held);
    assert_eq!(tokio::time::timeout(WAIT, new).await.unwrap().unwrap(), Some(201));
    assert_eq!(tokio::time::timeout(WAIT, changed).await.unwrap().unwrap(), Some(200));
    let mut shown = observe(&client, &live.base, since).await;
    shown["events"].as_array_mut().unwrap().sort_by_key(|e| e[1].to_string());
    assert_eq!(shown, expect(&[("a", 3), ("b", 2)], &[("a", 3), ("b", 2)]));

    // held, then the power cut: the writes are gone, and no read showed them
    let since = last_seq(&client, &live.base).await;
    let before = expect(&[("a", 3), ("b", 2)], &[]);
    let held = fs.hold();
    let new = put_later(&client, &live.base, "c", 5);
    let changed = put_later(&client, &live.base, "a", 4);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!new.is_finished() && !changed.is_finished(), "a write was acknowledged with its fsync held");
    assert_eq!(observe(&client, &live.base, since).await, before, "a read saw a held write");
    // the server's fsync thread is stuck in the held fsync until the cut answers it (EIO)
    kill_and(live, || fs.ctl("cut"));
    assert_eq!(tokio::time::timeout(WAIT, new).await.unwrap().unwrap(), None);
    assert_eq!(tokio::time::timeout(WAIT, changed).await.unwrap().unwrap(), None);
    drop(held);
    let (ok, report) = offline_check(&data);
    assert!(ok && report["ok"] == true, "{report}");
    let live = start(&data, "sync", &client).await;
    assert_eq!(observe(&client, &live.base, since).await, before, "a held write survived the cut");
    assert_eq!(last_seq(&client, &live.base).await, since);
    let report: Value = client
        .post(format!("{}/v1/admin/check", live.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(report["ok"], true, "{report}");
    drop(live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_buffered_mode_reads_see_a_write_before_it_is_durable_and_a_power_cut_takes_it_back() {
    let Some(fs) = PowerFs::try_mount("data") else { return };
    let data = fs.data();
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    // the table and `a` made durable in sync mode, then the server runs buffered
    let live = start(&data, "sync", &client).await;
    setup_held(&client, &live.base).await;
    kill(live);
    let live = start(&data, "buffered", &client).await;
    let since = last_seq(&client, &live.base).await;
    assert_eq!(observe(&client, &live.base, since).await, expect(&[("a", 1)], &[]));

    // with every fsync held, the writes are acknowledged and every read shows them...
    let held = fs.hold();
    let new = put_later(&client, &live.base, "b", 2);
    let changed = put_later(&client, &live.base, "a", 3);
    assert_eq!(tokio::time::timeout(WAIT, new).await.unwrap().unwrap(), Some(201));
    assert_eq!(tokio::time::timeout(WAIT, changed).await.unwrap().unwrap(), Some(200));
    let mut shown = observe(&client, &live.base, since).await;
    shown["events"].as_array_mut().unwrap().sort_by_key(|e| e[1].to_string());
    assert_eq!(shown, expect(&[("a", 3), ("b", 2)], &[("a", 3), ("b", 2)]));

    // ...and a power cut takes them back, the events a consumer was served with them
    kill_and(live, || fs.ctl("cut"));
    drop(held);
    let (ok, report) = offline_check(&data);
    assert!(ok && report["ok"] == true, "{report}");
    let live = start(&data, "sync", &client).await;
    assert_eq!(observe(&client, &live.base, since).await, expect(&[("a", 1)], &[]));
    let r = client.get(format!("{}/v1/changes?since={}", live.base, since + 2)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT, "a served seq is past the feed's end: changefeed_ahead");
    drop(live);
}
