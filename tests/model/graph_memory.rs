//! The in-memory adjacency under load: writers change pairs of edges in single writes (batches,
//! import chunks, a vertex delete cascading to two edges) while readers walk; no reader may ever
//! see one edge of a pair without the other. Then a restart: the adjacency loaded from the keys
//! answers as the one kept by the commits did, and `check` compares it with the keys.

use crate::common::TestServer;
use crate::common::model::Rng;
use mosaicdb::storage::Durability;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Pairs of edges: `a{k}` and `b{k}` (r → l{k}, l{k} → r) come and go together.
const PAIRS: u64 = 24;

/// The edge ids a walk from `r` (any direction, depth 1) saw, from its paths.
fn edges_seen(body: &Value) -> BTreeSet<String> {
    body["paths"].as_array().into_iter().flatten().filter_map(|p| p["edges"][0].as_str()).map(str::to_owned).collect()
}

/// Every pair whole or absent: `a{k}` seen iff `b{k}`.
fn whole(seen: &BTreeSet<String>) -> Result<(), String> {
    for k in 0..PAIRS {
        let (a, b) = (seen.contains(&format!("p/a{k}")), seen.contains(&format!("p/b{k}")));
        if a != b {
            return Err(format!("pair {k}: a {a}, b {b} in {seen:?}"));
        }
    }
    Ok(())
}

async fn write(s: &TestServer, rng: &mut Rng) {
    let k = rng.below(PAIRS);
    let pair = |k: u64| {
        [
            json!({"op": "put", "table": "p", "id": format!("a{k}"), "document": {"_from": "v/r", "_to": format!("v/l{k}")}}),
            json!({"op": "put", "table": "p", "id": format!("b{k}"), "document": {"_from": format!("v/l{k}"), "_to": "v/r"}}),
        ]
    };
    match rng.below(4) {
        0 => {
            // 422 while the other writer has the vertex deleted
            let (status, body) = s.post("/v1/batch", json!({"operations": pair(k)})).await;
            assert!(status == 200 || status == 422, "{status} {body}");
        }
        1 => {
            let ops = ["a", "b"].map(|e| json!({"op": "delete", "table": "p", "id": format!("{e}{k}")}));
            // 404 when the pair is gone already: the batch then writes nothing
            let (status, body) = s.post("/v1/batch", json!({"operations": ops})).await;
            assert!(status == 200 || status == 404, "{status} {body}");
        }
        2 => {
            // the vertex goes, and with it (cascade) both edges of its pair; then it comes back
            let (status, _) = s.delete(&format!("/v1/tables/v/documents/l{k}")).await;
            assert!(status == 204 || status == 404, "{status}");
            let (status, _) = s.put(&format!("/v1/tables/v/documents/l{k}"), json!({})).await;
            assert!(status == 200 || status == 201, "{status}");
        }
        _ => {
            // an import chunk of several pairs: one write
            let lines: String = (0..3)
                .flat_map(|i| pair((k + i) % PAIRS))
                .map(|op| {
                    format!(
                        "{}\n",
                        json!({"_id": op["id"], "_from": op["document"]["_from"], "_to": op["document"]["_to"]})
                    )
                })
                .collect();
            let r = s.raw(reqwest::Method::POST, "/v1/tables/p/import", "application/x-ndjson", lines).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
        }
    }
}

async fn setup(durability: Durability, memory: bool) -> TestServer {
    let s = TestServer::start_with(|c| {
        c.storage.durability = durability;
        if !memory {
            c.options.graph_memory_bytes = 0;
        }
    })
    .await;
    s.create_table("v").await;
    let (status, _) = s.post("/v1/tables", json!({"name": "p", "kind": "edge", "on_vertex_delete": "cascade"})).await;
    assert_eq!(status, 201);
    let mut docs = vec![json!({"_id": "r"})];
    docs.extend((0..PAIRS).map(|k| json!({"_id": format!("l{k}")})));
    assert_eq!(s.post("/v1/tables/v/documents", Value::Array(docs)).await.0, 201);
    s
}

/// What readers see while writers write; returns the walks done.
async fn walk_while_writing(s: Arc<TestServer>, writes: usize) -> usize {
    let done = Arc::new(AtomicBool::new(false));
    let walks = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (s, done, walks) = (s.clone(), done.clone(), walks.clone());
        readers.push(tokio::spawn(async move {
            let walk = json!({"start": "v/r", "direction": "any", "max_depth": 1, "return": "paths", "unique_vertices": false});
            while !done.load(Ordering::Acquire) {
                let (status, body) = s.post("/v1/graph/traverse", walk.clone()).await;
                assert_eq!(status, 200, "{body}");
                whole(&edges_seen(&body)).unwrap();
                let (status, page) = s.get("/v1/graph/neighbors?vertex=v/r&direction=any&limit=1000").await;
                assert_eq!(status, 200);
                let seen = page["neighbors"].as_array().unwrap().iter().map(|n| n["edge"].as_str().unwrap().to_owned()).collect();
                whole(&seen).unwrap();
                walks.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            let mut rng = Rng(0x5eed + w * 7919);
            for _ in 0..writes {
                write(&s, &mut rng).await;
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.await.unwrap();
    }
    walks.load(Ordering::Relaxed)
}

/// The answers a restart must keep: every walk from `r` and a shortest path per leaf.
async fn answers(s: &TestServer) -> Vec<Value> {
    let mut out = Vec::new();
    for dir in ["out", "in", "any"] {
        let walk = json!({"start": "v/r", "direction": dir, "max_depth": 2, "return": "paths", "min_depth": 0});
        out.push(s.post("/v1/graph/traverse", walk).await.1);
    }
    for k in 0..PAIRS {
        let body = json!({"from": "v/r", "to": format!("v/l{k}"), "k": 2});
        out.push(s.post("/v1/graph/shortest-path", body).await.1);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn walks_never_see_half_a_write_and_a_restart_answers_the_same() {
    for (durability, memory) in [(Durability::Sync, true), (Durability::Buffered, true), (Durability::Buffered, false)]
    {
        let s = Arc::new(setup(durability, memory).await);
        let walks = walk_while_writing(s.clone(), 150).await;
        assert!(walks >= 20, "{durability:?}: only {walks} walks");
        let (_, info) = s.get("/v1/info").await;
        assert_eq!(info["graph_memory"]["state"], if memory { "on" } else { "off" }, "{info}");
        let (_, table) = s.get("/v1/tables/p").await;
        if memory {
            assert_eq!(info["graph_memory"]["edges"], table["documents"], "{info}");
            assert!(info["graph_memory"]["bytes_per_edge"].as_f64().unwrap() > 16.0, "{info}");
        }
        s.check_ok().await;
        let before = answers(&s).await;
        let s = Arc::into_inner(s).unwrap();
        let dir = s.stop().await;
        let s = TestServer::start_in(dir, |c| {
            c.storage.durability = durability;
            if !memory {
                c.options.graph_memory_bytes = 0;
            }
        })
        .await;
        assert_eq!(answers(&s).await, before, "{durability:?}, memory {memory}: answers changed across a restart");
        let (_, report) = s.post("/v1/admin/check", json!({})).await;
        assert_eq!(
            (report["ok"].clone(), report["checked"]["graph_memory"].clone()),
            (json!(true), json!(memory)),
            "{report}"
        );
        // and it keeps step after the restart
        let mut rng = Rng(99);
        for _ in 0..20 {
            write(&s, &mut rng).await;
        }
        s.check_ok().await;
    }
}
