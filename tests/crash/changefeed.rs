//! The changefeed survives a SIGKILL of the real server: while concurrent clients write (puts,
//! patches, deletes, batches) on overlapping ids of a `full` table, the `mosaicdb` binary is
//! killed; after a restart, every acknowledged write's event is in the feed, the seqs run from 1
//! without a gap, no event names a write nobody made, and replaying the events gives exactly the
//! documents the store holds — so no event exists for a write that did not commit. Sync mode.

use crate::process::start;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: u64 = 4;
const IDS: u64 = 6;
/// No wait in this test lasts longer.
const WAIT: Duration = Duration::from_secs(20);

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Writes until the server is gone; each acknowledged stamp `(w, n)` is recorded.
async fn writer(client: reqwest::Client, base: String, w: u64, acked: Arc<Mutex<BTreeSet<(u64, u64)>>>) {
    let mut rng = Rng(0x2545_f491 ^ (w + 7));
    for n in 0.. {
        let id = format!("k{}", rng.below(IDS));
        let url = format!("{base}/v1/tables/cf/documents/{id}");
        let req = match rng.below(5) {
            0 | 1 => client.put(&url).json(&json!({"w": w, "n": n})),
            2 => client.patch(&url).json(&json!({"w": w, "n": n, "patched": true})),
            3 => client.delete(&url),
            _ => client.post(format!("{base}/v1/batch")).json(&json!({"operations": [
                {"op": "put", "table": "cf", "id": id, "document": {"w": w, "n": n}},
                {"op": "put", "table": "cf", "id": format!("b{w}"), "document": {"w": w, "n": n}},
            ]})),
        };
        let Ok(resp) = req.send().await else { return };
        let status = resp.status();
        // acknowledged only once the whole answer has arrived
        if resp.bytes().await.is_err() {
            return;
        }
        if status.is_success() {
            acked.lock().unwrap().insert((w, n));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_write_has_its_event_after_a_sigkill_and_none_exists_for_an_uncommitted_one() {
    let client = reqwest::Client::new();
    for round in 0..2u64 {
        let dir = tempfile::tempdir().unwrap();
        let server = start(dir.path(), "sync", &client).await;
        let r = client.post(format!("{}/v1/tables", server.base)).json(&json!({"name": "cf", "changefeed": "full"}));
        assert_eq!(r.send().await.unwrap().status(), 201);
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let writers: Vec<_> =
            (0..WRITERS).map(|w| tokio::spawn(writer(client.clone(), server.base.clone(), w, acked.clone()))).collect();
        // kill once some writes are acknowledged, at a moment that varies by round
        let deadline = Instant::now() + WAIT;
        while acked.lock().unwrap().len() < 40 + 60 * round as usize {
            assert!(Instant::now() < deadline, "no progress");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(server);
        for w in writers {
            w.await.unwrap();
        }
        let acked = acked.lock().unwrap().clone();

        let server = start(dir.path(), "sync", &client).await;
        let mut events = Vec::new();
        let mut since = 0;
        loop {
            let url = format!("{}/v1/changes?since={since}&limit=1000", server.base);
            let page: Value = client.get(url).send().await.unwrap().json().await.unwrap();
            let batch = page["events"].as_array().unwrap().clone();
            if batch.is_empty() {
                break;
            }
            since = page["next"].as_u64().unwrap();
            events.extend(batch);
        }
        // gap-free from 1
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["seq"], i as u64 + 1, "{e}");
        }
        // every acknowledged write left an event (a delete may have written nothing: 404)
        let stamps: BTreeSet<(u64, u64)> =
            events.iter().filter_map(|e| Some((e["document"]["w"].as_u64()?, e["document"]["n"].as_u64()?))).collect();
        let writes_made: BTreeSet<u64> = (0..WRITERS).collect();
        for e in &stamps {
            assert!(writes_made.contains(&e.0), "an event of a write nobody made: {e:?}");
        }
        // replaying gives the documents exactly
        let mut replica: BTreeMap<String, Value> = BTreeMap::new();
        for e in &events {
            let id = e["id"].as_str().unwrap().to_owned();
            match e["op"].as_str().unwrap() {
                "put" => replica.insert(id, e["document"].clone()),
                _ => replica.remove(&id),
            };
        }
        let list: Value = client
            .get(format!("{}/v1/tables/cf/documents?limit=1000", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let stored: BTreeMap<String, Value> = list["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["_id"].as_str().unwrap().to_owned(), d.clone()))
            .collect();
        assert_eq!(replica, stored, "round {round}: the replay differs from the store");
        // acknowledged puts, patches and batches each have their stamp in the feed: every
        // acknowledged stamp that is not a delete's shows up
        for (w, n) in acked.difference(&stamps) {
            // a delete writes no stamp: its writer's rng says which op it was
            let mut rng = Rng(0x2545_f491 ^ (w + 7));
            let mut op = 0;
            for _ in 0..=*n {
                rng.below(IDS);
                op = rng.below(5);
            }
            assert_eq!(op, 3, "acknowledged write ({w}, {n}) has no event");
        }
        // after the restart, seqs go on from the last durable event
        let r = client.put(format!("{}/v1/tables/cf/documents/after", server.base)).json(&json!({}));
        assert_eq!(r.send().await.unwrap().status(), 201);
        let page: Value =
            client.get(format!("{}/v1/changes?since={since}", server.base)).send().await.unwrap().json().await.unwrap();
        assert_eq!(page["events"][0]["seq"], since + 1);
        assert_eq!(page["events"][0]["id"], "after");
    }
}
