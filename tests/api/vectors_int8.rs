//! A vector index quantized to int8 (`"quantization": "int8"`) over HTTP: built by a backfill and
//! an import, its walk rescored on the documents' vectors, so answers carry exact distances and
//! the default search's recall@10 against brute force holds; `exact` and `filtered_exact` are
//! exact; replaced and deleted vectors, a restart (the codes are made again from the stored
//! floats) and `check`.

use super::vectors::{
    Clusters, DIM, brute_force, each_finds_itself, ids, import, l2, ndjson, recall_against_brute_force, search,
};
use crate::common::TestServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn int8_index() -> Value {
    json!({"name": "emb", "kind": "vector", "fields": ["embedding"],
        "options": {"dimension": DIM, "metric": "l2", "ef_construction": 64, "quantization": "int8"}})
}

/// Every hit of `r` is at its true distance to `q` (rescored on the document's own vector).
fn at_true_distances(r: &Value, q: &[f32], by_id: &BTreeMap<String, Vec<f32>>) {
    for h in r["hits"].as_array().unwrap() {
        let d = h["distance"].as_f64().unwrap();
        let true_d = l2(&by_id[h["_id"].as_str().unwrap()], q);
        assert!((d - true_d).abs() < 1e-4, "{h}: true distance {true_d}");
    }
}

#[tokio::test]
async fn an_int8_index_answers_as_brute_force_with_exact_distances() {
    let s = TestServer::start().await;
    s.create_table("vq").await;
    let mut data = Clusters::new(41);
    // a backfill over stored documents, then an import into the ready index
    let (body, mut docs) = ndjson(&mut data, 0, 2000);
    import(&s, "vq", body, docs.len()).await;
    let (status, def) = s.post("/v1/tables/vq/indexes", int8_index()).await;
    assert_eq!((status.as_u16(), &def["options"]["quantization"]), (202, &json!("int8")), "{def}");
    assert_eq!(s.index_settled("vq", "emb").await["state"], "ready");
    let (body, more) = ndjson(&mut data, 2000, 1000);
    import(&s, "vq", body, more.len()).await;
    docs.extend(more);
    let queries: Vec<Vec<f32>> = (0..50).map(|_| data.point()).collect();
    let r = recall_against_brute_force(&s, "vq", &docs, &queries).await;
    eprintln!("int8 recall@10 at the default ef and oversampling, {} × {DIM}-d, l2: {r:.3}", docs.len());
    assert!(r >= 0.95, "recall {r}");
    each_finds_itself(&s, "vq", &docs).await;
    let mut by_id: BTreeMap<String, Vec<f32>> = docs.iter().cloned().collect();
    for q in &queries[..10] {
        let r = search(&s, "vq", json!({"field": "embedding", "vector": q, "k": 10, "fields": ["_id"]})).await;
        at_true_distances(&r, q, &by_id);
        // oversampling 1: only k candidates rescored, still at their true distances
        let r = search(&s, "vq", json!({"field": "embedding", "vector": q, "k": 10, "oversampling": 1})).await;
        assert_eq!(r["hits"].as_array().unwrap().len(), 10);
        at_true_distances(&r, q, &by_id);
    }
    // filtered_exact over an indexed filter's matches: brute force's answer among them
    for (id, _) in &docs {
        let n: usize = id[1..].parse().unwrap();
        let (status, _) = s.patch(&format!("/v1/tables/vq/documents/{id}"), json!({"p": n % 50})).await;
        assert!(status.is_success());
    }
    let (status, _) = s.post("/v1/tables/vq/indexes", json!({"name": "by_p", "kind": "hash", "fields": ["p"]})).await;
    assert!(status.is_success());
    assert_eq!(s.index_settled("vq", "by_p").await["state"], "ready");
    let sevens: Vec<(String, Vec<f32>)> =
        docs.iter().filter(|(id, _)| id[1..].parse::<usize>().unwrap() % 50 == 7).cloned().collect();
    for q in &queries[..10] {
        let r = search(&s, "vq", json!({"field": "embedding", "vector": q, "k": 5, "filter": {"p": 7}})).await;
        assert_eq!(r["strategy"], "filtered_exact", "{r}");
        let want: Vec<String> = brute_force(&sevens, q, 5).into_iter().map(|(_, id)| id).collect();
        assert_eq!(ids(&r), want);
        at_true_distances(&r, q, &by_id);
    }
    // a replaced vector is found where it is now, a deleted one nowhere
    let moved = data.point();
    assert!(s.put("/v1/tables/vq/documents/d3", json!({"embedding": moved})).await.0.is_success());
    by_id.insert("d3".into(), moved.clone());
    let r = search(&s, "vq", json!({"field": "embedding", "vector": moved, "k": 1})).await;
    assert_eq!((&r["hits"][0]["_id"], &r["hits"][0]["distance"]), (&json!("d3"), &json!(0.0)), "{r}");
    assert_eq!(s.delete("/v1/tables/vq/documents/d4").await.0, 204);
    let r = search(&s, "vq", json!({"field": "embedding", "vector": docs[4].1, "k": 10, "exact": true})).await;
    assert!(!ids(&r).contains(&"d4".to_owned()), "{r}");
    s.check_ok().await;
    // /metrics shows the graph's memory: the codes take a quarter of the floats
    let text = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    let line =
        text.lines().find(|l| l.starts_with("mosaicdb_vector_index_memory_bytes{")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(r#"table="vq""#) && line.contains(r#"index="emb""#), "{line}");
    let bytes: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(bytes > (docs.len() * (DIM + 4)) as f64, "{line}");
    // reopened: the codes are made again from the stored floats, the answers are the same
    let before: Vec<Value> = {
        let mut out = Vec::new();
        for q in &queries[..10] {
            out.push(
                search(&s, "vq", json!({"field": "embedding", "vector": q, "fields": ["_id"]})).await["hits"].clone(),
            );
        }
        out
    };
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, |_| {}).await;
    for (q, want) in queries[..10].iter().zip(&before) {
        let got = search(&s, "vq", json!({"field": "embedding", "vector": q, "fields": ["_id"]})).await;
        assert_eq!(&got["hits"], want);
    }
    s.check_ok().await;
}
