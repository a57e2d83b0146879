//! Acknowledged writes survive a SIGKILL of the real server: the `mosaicdb` binary serves an
//! indexed table while concurrent clients PUT, PATCH, DELETE, batch and import; a write counts
//! as acknowledged only once its whole HTTP response has arrived. At a random moment the server
//! is killed; then `mosaicdb check` runs offline on the data directory, the server is started
//! again, and every document must read back as its last acknowledged write left it — or as the
//! write that was in flight at the kill left it (a batch wholly or not at all). In sync mode and
//! in buffered mode (which promises to survive a process crash, not a power loss).

mod model;
mod process;

use model::merge_patch;
use process::{BIN, kill, start};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TABLE: &str = "crash";
const WRITERS: usize = 6;
const KEYS_PER_WRITER: usize = 6;
/// No wait in this test lasts longer.
const WAIT: Duration = Duration::from_secs(20);

/// A small deterministic PRNG (xorshift64*), so a failure names the seed that reproduces its schedule.
#[derive(Clone)]
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `mosaicdb check <dir>` with the server stopped: its exit status and JSON report.
fn offline_check(dir: &Path) -> (bool, Value) {
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
fn document(w: usize, stamp: u64) -> Value {
    json!({
        "w": w, "stamp": stamp, "g": stamp % 5, "u": format!("u{w}-{stamp}"), "n": stamp,
        "text": format!("writer {w} wrote stamp s{stamp} with words w{} and common ones", stamp % 11),
        "tags": [stamp % 3, 10 + stamp % 4], "sub": {"x": stamp, "keep": true},
        "loc": {"lat": (stamp % 170) as f64 - 85.0 + 0.25, "lon": (stamp % 350) as f64 - 175.0 + 0.5},
    })
}

/// A merge patch: changes indexed fields, deletes one (`tags`) and one nested member.
fn patch(stamp: u64) -> Value {
    json!({"stamp": stamp, "n": -(stamp as i64), "g": format!("p{}", stamp % 3), "tags": null,
           "sub": {"x": null, "y": stamp}, "text": format!("patched w{} words", stamp % 7)})
}

fn key(w: usize, k: usize) -> String {
    format!("w{w}/k{k}")
}

/// Documents by id; `None` = absent.
type State = BTreeMap<String, Option<Value>>;

/// What one writer knows when the server dies.
#[derive(Default)]
struct Outcome {
    /// each key as the acknowledged writes left it
    acked: State,
    /// the write without a response at the kill: its keys as it would leave them, and whether
    /// it is all-or-nothing (a batch)
    in_flight: Option<(State, bool)>,
    acknowledged: u64,
}

/// One writer: random writes to its own keys, one at a time, until the server stops answering.
async fn writer(
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
async fn read_back(client: &reqwest::Client, base: &str, ids: impl Iterator<Item = &String>) -> State {
    let mut state = State::new();
    for id in ids {
        let r =
            client.get(format!("{base}/v1/tables/{TABLE}/documents/{}", id.replace('/', "%2F"))).send().await.unwrap();
        let doc = match r.status() {
            StatusCode::OK => {
                let mut d: Value = r.json().await.unwrap();
                assert_eq!(d["_id"], json!(id));
                d.as_object_mut().unwrap().remove("_id");
                Some(d)
            }
            StatusCode::NOT_FOUND => None,
            s => panic!("GET {id}: {s}"),
        };
        state.insert(id.clone(), doc);
    }
    state
}

fn show(d: &Option<Value>) -> String {
    d.as_ref().map_or("absent".into(), Value::to_string)
}

async fn crash_rounds(durability: &str, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let mut rng = Rng(seed | 1);
    let server = start(&data, durability, &client).await;
    let post = |path: &str, body: Value| client.post(format!("{}{path}", server.base)).json(&body).send();
    assert_eq!(post("/v1/tables", json!({"name": TABLE})).await.unwrap().status(), 201);
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
    let mut state: State = (0..WRITERS).flat_map(|w| (0..KEYS_PER_WRITER).map(move |k| (key(w, k), None))).collect();
    let mut server = Some(server);
    for round in 0..3 {
        let live = server.take().unwrap();
        // from the second round on, an index is built over the existing documents as the
        // writers start
        let building = format!("late{round}");
        if round > 0 {
            let req = json!({"name": building, "kind": "range", "fields": ["stamp"]});
            let r = client.post(format!("{}/v1/tables/{TABLE}/indexes", live.base)).json(&req).send().await.unwrap();
            // 202 over existing documents, 201 should the writers have deleted every one
            assert!([201, 202].contains(&r.status().as_u16()), "{}", r.text().await.unwrap());
        }
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let mine: State = state
                    .iter()
                    .filter(|(id, _)| id.starts_with(&format!("w{w}/")))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let seed = Rng(rng.next() | 1);
                tokio::spawn(writer(client.clone(), live.base.clone(), w, round, mine, seed))
            })
            .collect();
        // let the writers run a random while, then kill the server under them
        tokio::time::sleep(Duration::from_millis(300 + rng.below(900))).await;
        kill(live);
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(tokio::time::timeout(WAIT, t).await.expect("a writer hung after the kill").unwrap());
        }
        let acknowledged: u64 = outcomes.iter().map(|o| o.acknowledged).sum();
        assert!(acknowledged >= 20, "{durability} round {round}: only {acknowledged} writes were acknowledged");

        let (ok, report) = offline_check(&data);
        assert!(ok && report["ok"] == true, "{durability} round {round}: check after the kill: {report}");

        let live = start(&data, durability, &client).await;
        if round > 0 {
            // the build, should the kill have interrupted it, resumes and completes
            let url = format!("{}/v1/tables/{TABLE}/indexes/{building}", live.base);
            let deadline = Instant::now() + WAIT;
            loop {
                let def: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
                match def["state"].as_str() {
                    Some("ready") => break,
                    Some("building") if Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(20)).await
                    }
                    _ => panic!("{durability} round {round}: {def}"),
                }
            }
        }
        let found = read_back(&client, &live.base, state.keys()).await;
        for o in &outcomes {
            let in_flight_landed = o.in_flight.as_ref().map(|(after, _)| {
                after.iter().filter(|&(id, d)| found.get(id) == Some(d) && o.acked.get(id) != Some(d)).count()
            });
            for (id, want) in &o.acked {
                let got = &found[id];
                let in_flight = o.in_flight.as_ref().and_then(|(after, _)| after.get(id));
                assert!(
                    got == want || in_flight == Some(got),
                    "{durability} (seed {seed}) round {round}: {id} is {}, but the last acknowledged write \
                     left {} (in flight: {})",
                    show(got),
                    show(want),
                    in_flight.map_or("nothing".into(), show),
                );
            }
            // a batch in flight landed whole or not at all
            if let (Some((after, true)), Some(landed)) = (&o.in_flight, in_flight_landed) {
                let changing = after.iter().filter(|&(id, d)| o.acked.get(id) != Some(d)).count();
                assert!(landed == 0 || landed == changing, "{durability} round {round}: half a batch: {after:?}");
            }
        }
        // the indexes agree with what came back: each stored document is found by its unique value
        for (id, doc) in found.iter().filter_map(|(id, d)| Some((id, d.as_ref()?))) {
            let q = json!({"filter": {"u": doc["u"]}, "explain": false});
            let r: Value = client
                .post(format!("{}/v1/tables/{TABLE}/query", live.base))
                .json(&q)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(r["documents"][0]["_id"], json!(id), "{r}");
        }
        let in_flight = outcomes.iter().filter(|o| o.in_flight.is_some()).count();
        eprintln!("{durability} round {round}: {acknowledged} writes acknowledged, {in_flight} in flight at the kill");
        // the count, and every index (the resumed build's too), agree with the documents
        let info: Value =
            client.get(format!("{}/v1/tables/{TABLE}", live.base)).send().await.unwrap().json().await.unwrap();
        assert_eq!(info["documents"], found.values().filter(|d| d.is_some()).count(), "{info}");
        let r = client.post(format!("{}/v1/admin/check", live.base)).json(&json!({})).send().await.unwrap();
        let report: Value = r.json().await.unwrap();
        assert_eq!(report["ok"], true, "{durability} round {round}: check after the restart: {report}");
        state = found;
        server = Some(live);
    }
    drop(server);
}

fn seed() -> u64 {
    let seed = std::env::var("MOSAIC_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("MOSAIC_CRASH_SEED={seed}");
    seed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_http_writes_survive_sigkill_in_sync_mode() {
    crash_rounds("sync", seed()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_http_writes_survive_sigkill_in_buffered_mode() {
    crash_rounds("buffered", seed()).await;
}

#[test]
fn the_merge_patch_model_follows_rfc_7396() {
    // the RFC's appendix A examples that matter here
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
        (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
        (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
        (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
    ];
    for (target, patch, want) in cases {
        assert_eq!(merge_patch(&target, &patch), want, "{target} + {patch}");
    }
}
