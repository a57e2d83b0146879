//! The in-memory graph adjacency across a SIGKILL: edges are written (batches, imports, a vertex
//! delete that cascades) while the server is killed; after the restart the adjacency loaded from
//! the keys must equal them (`check` compares memory, keys and edge documents), traversals must
//! answer from it, and it must keep step with the writes that follow.

use crate::process::{kill, start};
use crate::workload::WAIT;
use serde_json::{Value, json};
use std::time::Duration;

const LEAVES: usize = 40;

async fn post(client: &reqwest::Client, base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = client.post(format!("{base}{path}")).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Writes edges until the server goes away; returns the writes acknowledged.
async fn write_edges(client: reqwest::Client, base: String, seed: usize) -> usize {
    let mut acknowledged = 0;
    for i in 0.. {
        let k = (i * 7 + seed) % LEAVES;
        let op = |id: String, from: String, to: String| json!({"op": "put", "table": "links", "id": id, "document": {"_from": from, "_to": to, "w": (i % 9) + 1}});
        let ops = [
            op(format!("a{k}"), "nodes/r".into(), format!("nodes/l{k}")),
            op(format!("b{k}"), format!("nodes/l{k}"), format!("nodes/l{}", (k + 1) % LEAVES)),
        ];
        let sent = if i % 5 == 4 {
            // the leaf goes with its edges (cascade), then comes back
            client.delete(format!("{base}/v1/tables/nodes/documents/l{k}")).send().await
        } else {
            client.post(format!("{base}/v1/batch")).json(&json!({"operations": ops})).send().await
        };
        let Ok(r) = sent else { return acknowledged };
        if r.bytes().await.is_err() {
            return acknowledged;
        }
        acknowledged += 1;
        if i % 5 == 4
            && client.put(format!("{base}/v1/tables/nodes/documents/l{k}")).json(&json!({})).send().await.is_err()
        {
            return acknowledged;
        }
    }
    acknowledged
}

async fn check_ok(client: &reqwest::Client, base: &str, label: &str) {
    let (status, report) = post(client, base, "/v1/admin/check", json!({})).await;
    assert_eq!(status, 200, "{label}");
    assert_eq!(
        (report["ok"].clone(), report["checked"]["graph_memory"].clone()),
        (json!(true), json!(true)),
        "{label}: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adjacency_in_memory_equals_the_keys_after_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let server = start(&data, "sync", &client).await;
    assert_eq!(post(&client, &server.base, "/v1/tables", json!({"name": "nodes"})).await.0, 201);
    let edges = json!({"name": "links", "kind": "edge", "on_vertex_delete": "cascade", "weight_field": "w"});
    assert_eq!(post(&client, &server.base, "/v1/tables", edges).await.0, 201);
    let mut nodes = vec![json!({"_id": "r"})];
    nodes.extend((0..LEAVES).map(|k| json!({"_id": format!("l{k}")})));
    assert_eq!(post(&client, &server.base, "/v1/tables/nodes/documents", Value::Array(nodes)).await.0, 201);
    let mut server = Some(server);
    for round in 0..3 {
        let live = server.take().unwrap();
        let writers: Vec<_> =
            (0..3).map(|w| tokio::spawn(write_edges(client.clone(), live.base.clone(), w + round * 3))).collect();
        tokio::time::sleep(Duration::from_millis(400 + 300 * round as u64)).await;
        kill(live);
        let mut acknowledged = 0;
        for w in writers {
            acknowledged += w.await.unwrap();
        }
        assert!(acknowledged >= 10, "round {round}: only {acknowledged} writes acknowledged");
        let live = start(&data, "sync", &client).await;
        let label = format!("round {round}, after the restart");
        check_ok(&client, &live.base, &label).await;
        let (status, info) = {
            let r = client.get(format!("{}/v1/info", live.base)).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        };
        assert_eq!((status, info["graph_memory"]["state"].clone()), (200, json!("on")), "{info}");
        let walk = json!({"start": "nodes/r", "direction": "out", "max_depth": 3});
        let (status, body) = post(&client, &live.base, "/v1/graph/traverse", walk).await;
        assert_eq!(status, 200, "{body}");
        // and it keeps step with the writes after the restart
        let more = tokio::spawn(write_edges(client.clone(), live.base.clone(), 100 + round));
        tokio::time::sleep(Duration::from_millis(300)).await;
        more.abort();
        let _ = more.await;
        check_ok(&client, &live.base, &format!("round {round}, writes after the restart")).await;
        eprintln!("round {round}: {acknowledged} writes acknowledged before the kill");
        server = Some(live);
    }
}
