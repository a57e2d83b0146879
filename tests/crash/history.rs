//! Document history across SIGKILLs: writers PUT, PATCH and DELETE their own documents of a table
//! that keeps history, logging every acknowledged write; the server (sync durability) is killed
//! at a random moment, several rounds on one directory. After each restart:
//! - `mosaicdb check` passes offline and `/v1/admin/check` online (the `hist` family included);
//! - every document's history, newest first, is exactly its acknowledged writes (plus the write in
//!   flight at the kill, if it landed — then whole: its version and the head that moved), with
//!   strictly decreasing times across restarts;
//! - each listed version reads back as of its own time, and the table as of now (a query with
//!   `as_of`) equals the documents themselves.
//!
//! `MOSAIC_CRASH_SEED` replays a run.

use crate::common::model::{Rng, merge_patch};
use crate::process::{kill, start};
use crate::workload::{WAIT, offline_check, seed};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const TABLE: &str = "kept";
const WRITERS: usize = 3;
const KEYS: u64 = 4;

/// One acknowledged write: its op as the history names it, and the document after (none: deleted).
type Event = (&'static str, Option<Value>);

/// What a writer knows at the kill: each key's acknowledged writes, oldest first, and the write
/// in flight (its key and event).
#[derive(Default)]
struct Log {
    events: BTreeMap<String, Vec<Event>>,
    in_flight: Option<(String, Event)>,
}

fn url(base: &str, id: &str) -> String {
    format!("{base}/v1/tables/{TABLE}/documents/{id}")
}

async fn writer(client: reqwest::Client, base: String, w: usize, mut log: Log, mut rng: Rng) -> Log {
    for i in 0u64.. {
        let id = format!("w{w}k{}", rng.below(KEYS));
        let current = log.events.get(&id).and_then(|e| e.last()).and_then(|(_, d)| d.clone());
        let doc = json!({"w": w, "i": i, "n": rng.below(1000)});
        let (request, event): (_, Event) = match (rng.below(10), &current) {
            (0..=1, Some(_)) => (client.delete(url(&base, &id)), ("delete", None)),
            (2..=4, Some(d)) => {
                let patch = json!({"n": rng.below(1000), "p": i});
                (client.patch(url(&base, &id)).json(&patch), ("update", Some(merge_patch(d, &patch))))
            }
            (_, Some(_)) => (client.put(url(&base, &id)).json(&doc), ("update", Some(doc))),
            (_, None) => (client.put(url(&base, &id)).json(&doc), ("create", Some(doc))),
        };
        log.in_flight = Some((id.clone(), event.clone()));
        let Ok(resp) = request.send().await else { break };
        let status = resp.status();
        if resp.bytes().await.is_err() {
            break;
        }
        log.in_flight = None;
        assert!(status.is_success(), "writer {w} on {id}: {status}");
        let mut event = event;
        // the stored document carries its `_id`, as the history lists it
        if let Some(d) = &mut event.1 {
            d["_id"] = json!(id);
        }
        log.events.entry(id).or_default().push(event);
    }
    log
}

/// The history of `id` as (op, document) newest first, checking the times strictly decrease.
async fn history(client: &reqwest::Client, base: &str, id: &str) -> (Vec<Event>, Vec<Value>) {
    let r = client.get(format!("{}/history?limit=1000", url(base, id))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let page: Value = r.json().await.unwrap();
    let versions = page["versions"].as_array().unwrap().clone();
    let times: Vec<i64> = versions.iter().map(|v| v["at_us"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|t| t[0] > t[1]), "{id}: times not strictly newest first: {times:?}");
    let ops = versions
        .iter()
        .map(|v| {
            let op = match v["op"].as_str().unwrap() {
                "create" => "create",
                "update" => "update",
                "delete" => "delete",
                other => panic!("{id}: op {other}"),
            };
            (op, v.get("document").cloned())
        })
        .collect();
    (ops, versions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_is_every_acknowledged_write_across_sigkills() {
    let mut rng = Rng(seed() | 1);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let mut server = start(&data, "sync", &client).await;
    let create = json!({"name": TABLE, "history": {"max_versions": 100000}});
    let r = client.post(format!("{}/v1/tables", server.base)).json(&create).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let mut logs: Vec<Log> = (0..WRITERS).map(|_| Log::default()).collect();
    for round in 0..3 {
        let tasks: Vec<_> = logs
            .drain(..)
            .enumerate()
            .map(|(w, log)| tokio::spawn(writer(client.clone(), server.base.clone(), w, log, Rng(rng.next() | 1))))
            .collect();
        tokio::time::sleep(Duration::from_millis(300 + rng.below(700))).await;
        kill(server);
        for t in tasks {
            logs.push(tokio::time::timeout(WAIT, t).await.expect("a writer hung after the kill").unwrap());
        }
        let (ok, report) = offline_check(&data);
        assert!(ok, "round {round}: offline check: {report}");
        server = start(&data, "sync", &client).await;
        let base = server.base.clone();
        let report: Value =
            client.post(format!("{base}/v1/admin/check")).json(&json!({})).send().await.unwrap().json().await.unwrap();
        assert_eq!(report["ok"], true, "round {round}: {report}");
        assert!(report["checked"]["history_versions"].as_u64().unwrap() > 0, "{report}");

        let mut now_docs = Vec::new();
        for (w, log) in logs.iter_mut().enumerate() {
            // the write in flight landed or not, whole; from here on it is acknowledged if it did
            let in_flight = log.in_flight.take();
            for w_key in (0..KEYS).map(|k| format!("w{w}k{k}")) {
                let (got, versions) = history(&client, &base, &w_key).await;
                let mut want: Vec<Event> = log.events.get(&w_key).cloned().unwrap_or_default();
                want.reverse();
                let landed = match &in_flight {
                    Some((id, (op, doc))) if *id == w_key => {
                        let mut doc = doc.clone();
                        if let Some(d) = &mut doc {
                            d["_id"] = json!(id);
                        }
                        let mut with = vec![(*op, doc)];
                        with.extend(want.iter().cloned());
                        (got == with).then_some((*op, with[0].1.clone()))
                    }
                    _ => None,
                };
                match landed {
                    Some(event) => log.events.entry(w_key.clone()).or_default().push(event),
                    None => assert_eq!(got, want, "round {round}: history of {w_key}"),
                }
                // each version reads back as of its own start (RFC 3339 to the microsecond)
                for v in &versions {
                    let at = v["at_us"].as_i64().unwrap();
                    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(at) * 1000)
                        .unwrap()
                        .format(&time::format_description::well_known::Rfc3339)
                        .unwrap();
                    let r = client.get(format!("{}?as_of={at}", url(&base, &w_key))).send().await.unwrap();
                    match v.get("document") {
                        Some(doc) => {
                            assert_eq!(r.status(), StatusCode::OK, "{w_key} as of {at}");
                            assert_eq!(&r.json::<Value>().await.unwrap(), doc, "{w_key} as of {at}");
                        }
                        None => assert_eq!(r.status(), StatusCode::NOT_FOUND, "{w_key} as of {at}"),
                    }
                }
                let r = client.get(url(&base, &w_key)).send().await.unwrap();
                if r.status() == StatusCode::OK {
                    now_docs.push(r.json::<Value>().await.unwrap());
                }
            }
        }
        // the table as of now is the documents themselves
        now_docs.sort_by(|a, b| a["_id"].as_str().cmp(&b["_id"].as_str()));
        let q = json!({"as_of": "2200-01-01T00:00:00Z", "limit": 1000});
        let page: Value =
            client.post(format!("{base}/v1/tables/{TABLE}/query")).json(&q).send().await.unwrap().json().await.unwrap();
        assert_eq!(page["documents"], json!(now_docs), "round {round}");
    }
    kill(server);
}
