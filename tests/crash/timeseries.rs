//! Time series across a SIGKILL, with the merge task running every second: writers append points
//! (stored as blocks), write some again at earlier times (rewriting the blocks that hold them)
//! and write out of order; the server is killed while they write and the task merges. After the
//! restart every acknowledged point is there exactly once with its value, the records count what
//! is there, and `check` is clean.

use crate::process::{kill, start_with};
use crate::workload::WAIT;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The value of entity `w`'s point at `ts`: the same whichever write stores it, so a point written
/// twice reads the same whether or not the second write landed.
fn value(w: usize, ts: i64) -> f64 {
    ((ts * 7 + w as i64 * 13) % 1000) as f64 / 4.0
}

/// Writes points of entity `e{w}` until the server goes away; returns the times acknowledged.
async fn write_points(client: reqwest::Client, base: String, w: usize, start: i64) -> BTreeSet<i64> {
    let mut acknowledged = BTreeSet::new();
    let mut end = start;
    for i in 0.. {
        let times: Vec<i64> = match i % 4 {
            // earlier times again (inside blocks), and one before everything
            3 => (0..20).map(|k| start + (k * 37 + i) % (end - start).max(1)).chain([start - 1 - i]).collect(),
            _ => {
                let t: Vec<i64> = (end..end + 50).collect();
                end += 50;
                t
            }
        };
        let points: Vec<Value> =
            times.iter().map(|&ts| json!({"entity": format!("e{w}"), "ts": ts, "value": value(w, ts)})).collect();
        let sent = client.post(format!("{base}/v1/timeseries/m/points")).json(&json!({"points": points})).send().await;
        let Ok(r) = sent else { return acknowledged };
        if r.status() != 200 || r.bytes().await.is_err() {
            return acknowledged;
        }
        acknowledged.extend(times);
    }
    acknowledged
}

async fn get(client: &reqwest::Client, url: String) -> Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_points_survive_a_sigkill_during_writes_and_merges_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let flags = ["--ts-merge-interval", "1s"];
    let mut acknowledged: BTreeMap<usize, BTreeSet<i64>> = BTreeMap::new();
    let mut server = Some(start_with(&data, "sync", &flags, &client).await);
    for round in 0..3 {
        let live = server.take().unwrap();
        let writers: Vec<_> = (0..2)
            .map(|w| tokio::spawn(write_points(client.clone(), live.base.clone(), w, 1_000_000 * (round + 1) as i64)))
            .collect();
        tokio::time::sleep(Duration::from_millis(1300 + 400 * round as u64)).await;
        kill(live);
        for (w, writer) in writers.into_iter().enumerate() {
            acknowledged.entry(w).or_default().extend(writer.await.unwrap());
        }
        let live = start_with(&data, "sync", &flags, &client).await;
        let report = client.post(format!("{}/v1/admin/check", live.base)).json(&json!({})).send().await.unwrap();
        let report: Value = report.json().await.unwrap();
        assert_eq!(report["ok"], true, "round {round}: {report}");
        let mut total = 0;
        for (w, times) in &acknowledged {
            let mut found: Vec<(i64, f64)> = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut url = format!("{}/v1/timeseries/m/points?entity=e{w}&limit=100000", live.base);
                if let Some(c) = &cursor {
                    url.push_str(&format!("&cursor={c}"));
                }
                let page = get(&client, url).await;
                found.extend(
                    page["points"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| (p["ts"].as_i64().unwrap(), p["value"].as_f64().unwrap())),
                );
                match page["cursor"].as_str() {
                    Some(c) => cursor = Some(c.to_owned()),
                    None => break,
                }
            }
            // each time once, in order, with its value; every acknowledged one among them
            assert!(found.windows(2).all(|p| p[0].0 < p[1].0), "round {round}: e{w} has a time twice or out of order");
            assert!(found.iter().all(|&(ts, v)| v == value(*w, ts)), "round {round}: e{w} has a wrong value");
            let present: BTreeSet<i64> = found.iter().map(|p| p.0).collect();
            let lost: Vec<_> = times.difference(&present).take(5).collect();
            assert!(lost.is_empty(), "round {round}: e{w} lost acknowledged points, e.g. {lost:?}");
            total += found.len();
        }
        let metrics = get(&client, format!("{}/v1/timeseries", live.base)).await;
        assert_eq!(metrics["metrics"][0]["points"], total, "round {round}: {metrics}");
        eprintln!("round {round}: {total} points in {} keys", report["checked"]["points"]);
        server = Some(live);
    }
    if let Some(live) = server.take() {
        kill(live);
    }
}
