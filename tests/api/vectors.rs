//! Vector indexes over HTTP: recall against exact search on clustered data (also after churn),
//! filters that never starve the answer, restarts that keep the index, validation, rebuild, a
//! model-based run of random writes followed by `check`, the bulk paths whose inserts are
//! planned on every core (an import, a backfill) against brute force, every document reachable
//! by the graph walk, and an index that reads ready being searchable at once in sync mode.

use crate::common::{Rng, TestServer};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// Uniform in [-1, 1).
fn unit(rng: &mut Rng) -> f32 {
    (rng.next() >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
}

pub(super) const DIM: usize = 16;

/// Points around 20 cluster centres (not uniform noise): the centres are fixed by `seed`.
pub(super) struct Clusters {
    centres: Vec<Vec<f32>>,
    rng: Rng,
}
impl Clusters {
    pub(super) fn new(seed: u64) -> Clusters {
        let mut rng = Rng(seed);
        let centres = (0..20).map(|_| (0..DIM).map(|_| unit(&mut rng) * 3.0).collect()).collect();
        Clusters { centres, rng }
    }
    pub(super) fn point(&mut self) -> Vec<f32> {
        let c = self.rng.below(self.centres.len() as u64) as usize;
        let spread = 0.3 + (c % 3) as f32 * 0.2;
        (0..DIM).map(|i| self.centres[c][i] + unit(&mut self.rng) * spread).collect()
    }
}

pub(super) async fn insert(s: &TestServer, table: &str, docs: Vec<Value>) {
    for chunk in docs.chunks(500) {
        let (status, body) = s.post(&format!("/v1/tables/{table}/documents"), Value::Array(chunk.to_vec())).await;
        assert!(status.is_success(), "{status} {body}");
    }
}

async fn index(s: &TestServer, table: &str, metric: &str) {
    let body = json!({"name": "emb", "kind": "vector", "fields": ["embedding"],
        "options": {"dimension": DIM, "metric": metric}});
    let (status, def) = s.post(&format!("/v1/tables/{table}/indexes"), body).await;
    assert!(status.is_success(), "{status} {def}");
    assert_eq!(s.index_settled(table, "emb").await["state"], "ready");
}

pub(super) async fn search(s: &TestServer, table: &str, body: Value) -> Value {
    let (status, r) = s.post(&format!("/v1/tables/{table}/vector-search"), body).await;
    assert_eq!(status, 200, "{r}");
    r
}

pub(super) fn ids(r: &Value) -> Vec<String> {
    r["hits"].as_array().unwrap().iter().map(|h| h["_id"].as_str().unwrap().to_owned()).collect()
}

/// recall@10 of the default search against `exact: true` over `queries`.
async fn recall(s: &TestServer, table: &str, queries: &[Vec<f32>], filter: Option<&Value>) -> f64 {
    let mut hit = 0;
    let mut want_total = 0;
    for q in queries {
        let mut body = json!({"field": "embedding", "vector": q, "k": 10});
        if let Some(f) = filter {
            body["filter"] = f.clone();
        }
        let got: BTreeSet<String> = ids(&search(s, table, body.clone()).await).into_iter().collect();
        body["exact"] = json!(true);
        let want: BTreeSet<String> = ids(&search(s, table, body).await).into_iter().collect();
        hit += got.intersection(&want).count();
        want_total += want.len();
    }
    hit as f64 / want_total.max(1) as f64
}

#[tokio::test]
async fn recall_at_default_ef_holds_through_churn() {
    let s = TestServer::start().await;
    s.create_table("vr").await;
    index(&s, "vr", "l2").await;
    let mut data = Clusters::new(11);
    let docs: Vec<Value> =
        (0..2000).map(|i| json!({"_id": format!("d{i}"), "embedding": data.point(), "n": i})).collect();
    insert(&s, "vr", docs).await;
    let queries: Vec<Vec<f32>> = (0..40).map(|_| data.point()).collect();
    let r = recall(&s, "vr", &queries, None).await;
    eprintln!("recall@10 at the default ef, 2000 × {DIM}-d clustered, l2: {r:.3}");
    assert!(r >= 0.95, "recall {r}");
    // 30% churn: 15% deleted, 15% replaced by new points
    let mut deleted = BTreeSet::new();
    let mut replaced = BTreeMap::new();
    for i in 0..2000 {
        let id = format!("d{i}");
        match i % 20 {
            0..=2 => {
                assert_eq!(s.delete(&format!("/v1/tables/vr/documents/{id}")).await.0, 204);
                deleted.insert(id);
            }
            3..=5 => {
                let v = data.point();
                let (status, _) =
                    s.put(&format!("/v1/tables/vr/documents/{id}"), json!({"embedding": v, "n": i})).await;
                assert_eq!(status, 200);
                replaced.insert(id, v);
            }
            _ => {}
        }
    }
    let r = recall(&s, "vr", &queries, None).await;
    eprintln!("recall@10 after 30% deletes and replaces: {r:.3}");
    assert!(r >= 0.95, "recall after churn {r}");
    // deleted documents never come back; a replaced one is found at its new vector, distance 0
    for q in &queries {
        let hits = ids(&search(&s, "vr", json!({"field": "embedding", "vector": q, "k": 50})).await);
        assert!(hits.iter().all(|h| !deleted.contains(h)));
    }
    for (id, v) in replaced.iter().take(20) {
        let r = search(&s, "vr", json!({"field": "embedding", "vector": v, "k": 1})).await;
        assert_eq!(r["hits"][0]["_id"], id.as_str(), "{r}");
        assert!(r["hits"][0]["distance"].as_f64().unwrap() < 1e-3);
    }
    s.check_ok().await;
}

#[tokio::test]
async fn filters_at_any_selectivity_return_k_hits() {
    let s = TestServer::start().await;
    s.create_table("vf").await;
    index(&s, "vf", "cosine").await;
    let mut data = Clusters::new(5);
    let docs: Vec<Value> =
        (0..2000).map(|i| json!({"_id": format!("d{i}"), "embedding": data.point(), "p": i % 100})).collect();
    insert(&s, "vf", docs).await;
    let queries: Vec<Vec<f32>> = (0..10).map(|_| data.point()).collect();
    let filters = [json!({"p": 0}), json!({"p": {"$lt": 10}}), json!({"p": {"$lt": 50}})];
    for with_index in [false, true] {
        if with_index {
            let (status, _) =
                s.post("/v1/tables/vf/indexes", json!({"name": "by_p", "kind": "range", "fields": ["p"]})).await;
            assert!(status.is_success());
            assert_eq!(s.index_settled("vf", "by_p").await["state"], "ready");
        }
        for f in &filters {
            for q in &queries {
                let r =
                    search(&s, "vf", json!({"field": "embedding", "vector": q, "k": 10, "filter": f, "fields": ["p"]}))
                        .await;
                assert_eq!(r["hits"].as_array().unwrap().len(), 10, "filter {f}, index {with_index}: {r}");
                for h in r["hits"].as_array().unwrap() {
                    let p = h["document"]["p"].as_i64().unwrap();
                    assert!(if f["p"].is_number() { p == 0 } else { p < f["p"]["$lt"].as_i64().unwrap() }, "{h}");
                }
            }
            let r = recall(&s, "vf", &queries, Some(f)).await;
            eprintln!("filtered recall@10, filter {f}, range index {with_index}: {r:.3}");
            assert!(r >= 0.95, "filter {f}: recall {r}");
        }
    }
    // a selective filter served by the index is searched exactly over its matches
    let r = search(&s, "vf", json!({"field": "embedding", "vector": queries[0], "filter": {"p": 0}})).await;
    assert_eq!(r["strategy"], "filtered_exact");
    // fewer matches than k: all of them
    let r = search(&s, "vf", json!({"field": "embedding", "vector": queries[0], "k": 30, "filter": {"p": 7}})).await;
    assert_eq!(r["hits"].as_array().unwrap().len(), 20);
}

#[tokio::test]
async fn restart_opens_the_index_from_its_keys() {
    let s = TestServer::start_with(|c| c.storage.durability = mosaicdb::storage::Durability::Sync).await;
    s.create_table("vk").await;
    index(&s, "vk", "dot").await;
    let mut data = Clusters::new(3);
    let docs: Vec<Value> = (0..1000).map(|i| json!({"_id": format!("d{i}"), "embedding": data.point()})).collect();
    insert(&s, "vk", docs).await;
    for i in 0..100 {
        s.delete(&format!("/v1/tables/vk/documents/d{i}")).await;
    }
    let queries: Vec<Vec<f32>> = (0..10).map(|_| data.point()).collect();
    let mut before = Vec::new();
    for q in &queries {
        before.push(search(&s, "vk", json!({"field": "embedding", "vector": q})).await["hits"].clone());
    }
    let dir = s.stop().await;
    let started = std::time::Instant::now();
    let s = TestServer::start_in(dir, |_| {}).await;
    eprintln!("restart with a 900-node vector index took {:?}", started.elapsed());
    for (q, want) in queries.iter().zip(&before) {
        let got = search(&s, "vk", json!({"field": "embedding", "vector": q})).await;
        assert_eq!(&got["hits"], want, "the graph read back answers as before");
    }
    s.check_ok().await;
    // metric dot: a long vector in the query's direction is the nearest
    let v = data.point();
    let long: Vec<f32> = v.iter().map(|x| x * 100.0).collect();
    assert_eq!(s.put("/v1/tables/vk/documents/new", json!({"embedding": long})).await.0, 201);
    let r = search(&s, "vk", json!({"field": "embedding", "vector": v, "k": 1, "exact": true})).await;
    assert_eq!(r["hits"][0]["_id"], "new");
    s.check_ok().await;
}

#[tokio::test]
async fn bad_vectors_and_requests_are_refused() {
    let s = TestServer::start().await;
    s.create_table("vv").await;
    // documents stored before the index: the build indexes them, with progress
    let docs: Vec<Value> =
        (0..300).map(|i| json!({"_id": format!("d{i}"), "embedding": [i as f32 + 1.0, 1.0, 0.5]})).collect();
    insert(&s, "vv", docs).await;
    assert_eq!(s.put("/v1/tables/vv/documents/none", json!({"other": 1})).await.0, 201);
    let bad = |options: Value| json!({"name": "x", "kind": "vector", "fields": ["embedding"], "options": options});
    for options in [
        json!({}),
        json!({"dimension": 0}),
        json!({"dimension": 5000}),
        json!({"dimension": 3, "metric": "hamming"}),
        json!({"dimension": 3, "m": 1}),
        json!({"dimension": 3, "colour": 1}),
        json!({"dimension": 3, "quantization": "int4"}),
        json!({"dimension": 3, "quantization": 8}),
    ] {
        let r = s.send(Method::POST, "/v1/tables/vv/indexes", Some(&bad(options.clone())), &[]).await;
        assert!(r.status.is_client_error(), "{options}: {}", r.body);
    }
    let body =
        json!({"name": "emb", "kind": "vector", "fields": ["embedding"], "options": {"dimension": 3, "metric": "l2"}});
    let (status, def) = s.post("/v1/tables/vv/indexes", body).await;
    assert_eq!(status, 202, "{def}");
    assert_eq!(def["state"], "building");
    assert_eq!(
        def["options"],
        json!({"dimension": 3, "metric": "l2", "m": 16, "ef_construction": 200, "quantization": "none"})
    );
    assert_eq!(s.index_settled("vv", "emb").await["state"], "ready");
    // wrong length, non-numeric element, a squared length over f32's range: 422 naming the
    // field; nothing written
    for doc in [
        json!({"embedding": [1.0, 2.0]}),
        json!({"embedding": [1.0, "x", 2.0]}),
        json!({"embedding": "abc"}),
        json!({"embedding": [3e19, 3e19, 1.0]}),
    ] {
        let r = s.send(Method::PUT, "/v1/tables/vv/documents/bad", Some(&doc), &[]).await;
        assert!(r.is_problem(422, "invalid_vector"), "{}", r.body);
        assert!(r.body["detail"].as_str().unwrap().contains("embedding"));
    }
    assert_eq!(s.get("/v1/tables/vv/documents/bad").await.0, 404);
    let q = |v: Value| json!({"field": "embedding", "vector": v, "k": 5});
    let r = search(&s, "vv", q(json!([1.0, 1.0, 0.5]))).await;
    assert_eq!(ids(&r)[0], "d0");
    assert!(
        !ids(&search(&s, "vv", json!({"field": "embedding", "vector": [1, 1, 1], "k": 1000})).await)
            .contains(&"none".to_owned())
    );
    for (body, status, code) in [
        (q(json!([1.0, 2.0])), 400, "invalid_request"),
        (q(json!([3e19, 3e19, 1.0])), 400, "invalid_request"),
        (json!({"field": "embedding", "vector": [1, 2, 3], "k": 0}), 400, "invalid_request"),
        (json!({"field": "embedding", "vector": [1, 2, 3], "k": 1001}), 400, "invalid_request"),
        (json!({"field": "embedding", "vector": [1, 2, 3], "ef": 100000}), 400, "invalid_request"),
        (json!({"field": "embedding", "vector": [1, 2, 3], "oversampling": 0.5}), 400, "invalid_request"),
        (json!({"field": "embedding", "vector": [1, 2, 3], "oversampling": 101}), 400, "invalid_request"),
        (json!({"field": "other", "vector": [1, 2, 3]}), 422, "no_vector_index"),
    ] {
        let r = s.send(Method::POST, "/v1/tables/vv/vector-search", Some(&body), &[]).await;
        assert!(r.is_problem(status, code), "{body}: {}", r.body);
    }
    // rebuild: refused for other kinds, rebuilds a vector index from the documents
    s.post("/v1/tables/vv/indexes", json!({"name": "h", "kind": "hash", "fields": ["other"]})).await;
    let r = s.send(Method::POST, "/v1/tables/vv/indexes/h/rebuild", None, &[]).await;
    assert!(r.is_problem(400, "invalid_request"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/tables/vv/indexes/emb/rebuild", None, &[]).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(s.index_settled("vv", "emb").await["state"], "ready");
    assert_eq!(ids(&search(&s, "vv", q(json!([1.0, 1.0, 0.5]))).await)[0], "d0");
    s.check_ok().await;
    // a dropped index's keys go; the name can be used again
    assert_eq!(s.delete("/v1/tables/vv/indexes/emb").await.0, 204);
    let r = s.send(Method::POST, "/v1/tables/vv/vector-search", Some(&q(json!([1, 2, 3]))), &[]).await;
    assert!(r.is_problem(422, "no_vector_index"));
    s.check_ok().await;
}

/// Random inserts, replaces, deletes (PUT, PATCH, import, batches; some without the field), then
/// the exact answers equal a brute-force model's, and `check` finds the keys exactly right.
#[tokio::test]
async fn model_based_random_writes_then_check() {
    let s = TestServer::start().await;
    s.create_table("vm").await;
    let body = json!({"name": "emb", "kind": "vector", "fields": ["embedding"], "options": {"dimension": 4, "metric": "l2", "m": 4}});
    assert_eq!(s.post("/v1/tables/vm/indexes", body).await.0, 201);
    let mut rng = Rng(0x5eed);
    let mut model: BTreeMap<String, Option<Vec<f32>>> = BTreeMap::new();
    let vector = |rng: &mut Rng| -> Vec<f32> { (0..4).map(|_| (rng.below(1000) as f32) / 10.0).collect() };
    for step in 0..400 {
        let id = format!("m{}", rng.below(60));
        match rng.below(10) {
            0..=5 => {
                let v = if rng.below(8) == 0 { None } else { Some(vector(&mut rng)) };
                let doc = match &v {
                    Some(v) => json!({"embedding": v, "step": step}),
                    None => json!({"step": step}),
                };
                assert!(s.put(&format!("/v1/tables/vm/documents/{id}"), doc).await.0.is_success());
                model.insert(id, v);
            }
            6 => {
                s.delete(&format!("/v1/tables/vm/documents/{id}")).await;
                model.remove(&id);
            }
            7 if model.contains_key(&id) => {
                // a merge patch: a new vector, or null (the field goes: the node goes)
                let v = if rng.below(4) == 0 { None } else { Some(vector(&mut rng)) };
                let (status, body) = s.patch(&format!("/v1/tables/vm/documents/{id}"), json!({"embedding": v})).await;
                assert_eq!(status, 200, "{body}");
                model.insert(id, v);
            }
            7 => {
                let v = vector(&mut rng);
                let line =
                    format!("{}\n{}\n", json!({"_id": id, "embedding": v}), json!({"_id": "bad", "embedding": [1]}));
                let r = s.raw(Method::POST, "/v1/tables/vm/import", "application/x-ndjson", line).await;
                assert_eq!(r.status, 200, "{}", r.body);
                assert_eq!((r.body["inserted"].as_u64(), r.body["failed"].as_u64()), (Some(1), Some(1)), "{}", r.body);
                model.insert(id, Some(v));
            }
            _ => {
                let (v1, v2) = (vector(&mut rng), vector(&mut rng));
                let id2 = format!("m{}", rng.below(60));
                let ops = json!({"operations": [
                    {"op": "put", "table": "vm", "id": id, "document": {"embedding": v1}},
                    {"op": "put", "table": "vm", "id": id2, "document": {"embedding": v2}},
                ]});
                assert!(s.post("/v1/batch", ops).await.0.is_success());
                model.insert(id, Some(v1));
                model.insert(id2, Some(v2));
            }
        }
        if step % 100 == 99 {
            s.check_ok().await;
        }
    }
    // a batch that fails leaves the graph as it was
    let ops = json!({"operations": [
        {"op": "put", "table": "vm", "id": "fresh", "document": {"embedding": [1, 2, 3, 4]}},
        {"op": "put", "table": "vm", "id": "broken", "document": {"embedding": [1, 2]}},
    ]});
    assert!(!s.post("/v1/batch", ops).await.0.is_success());
    for _ in 0..20 {
        let q = vector(&mut rng);
        let mut want: Vec<(f32, String)> = model
            .iter()
            .filter_map(|(id, v)| {
                v.as_ref().map(|v| (v.iter().zip(&q).map(|(a, b)| (a - b) * (a - b)).sum::<f32>(), id.clone()))
            })
            .collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let r = search(&s, "vm", json!({"field": "embedding", "vector": q, "k": 100, "exact": true})).await;
        let got = ids(&r);
        assert_eq!(got.len(), want.len());
        let got_set: BTreeSet<_> = got.iter().cloned().collect();
        let want_set: BTreeSet<_> = want.iter().map(|w| w.1.clone()).collect();
        assert_eq!(got_set, want_set);
        assert!(!got_set.contains("fresh"));
        let walked = ids(&search(&s, "vm", json!({"field": "embedding", "vector": q, "k": 100})).await);
        assert_eq!(walked.len(), want.len(), "the walk (or its fallback) finds every node");
    }
    s.check_ok().await;
}

/// Hybrid search: both rankings fused by reciprocal rank fusion, each hit with its ranks.
#[tokio::test]
async fn hybrid_search_fuses_text_and_vector_rankings() {
    let s = TestServer::start().await;
    s.create_table("vh").await;
    let docs = json!([
        {"_id": "a", "text": "graph databases and graph queries", "embedding": [0.0, 1.0], "lang": "en"},
        {"_id": "b", "text": "graph theory", "embedding": [1.0, 0.0], "lang": "en"},
        {"_id": "c", "text": "cooking with herbs", "embedding": [0.9, 0.1], "lang": "en"},
        {"_id": "d", "text": "graph drawing", "embedding": [0.95, 0.05], "lang": "de"},
    ]);
    insert(&s, "vh", docs.as_array().unwrap().clone()).await;
    assert!(
        s.post("/v1/tables/vh/indexes", json!({"name": "ft", "kind": "fulltext", "fields": ["text"]}))
            .await
            .0
            .is_success()
    );
    let body = json!({"name": "emb", "kind": "vector", "fields": ["embedding"], "options": {"dimension": 2}});
    assert!(s.post("/v1/tables/vh/indexes", body).await.0.is_success());
    assert_eq!(s.index_settled("vh", "ft").await["state"], "ready");
    assert_eq!(s.index_settled("vh", "emb").await["state"], "ready");
    let (status, r) = s
        .post(
            "/v1/tables/vh/search",
            json!({"query": "graph", "vector": {"field": "embedding", "vector": [1.0, 0.0]},
            "fusion": {"method": "rrf", "k": 60}, "fields": ["lang"]}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let hits = r["hits"].as_array().unwrap();
    // b is first or second in both lists; c only in the vector list; a only in the text list
    assert_eq!(hits[0]["_id"], "b", "{r}");
    assert_eq!(r["total"], json!({"value": 4, "relation": "eq"}));
    let rrf = |ranks: &[Option<u64>]| ranks.iter().flatten().map(|r| 1.0 / (60.0 + *r as f64)).sum::<f64>();
    for h in hits {
        let (t, v) = (h["ranks"]["text"].as_u64(), h["ranks"]["vector"].as_u64());
        assert!((h["score"].as_f64().unwrap() - rrf(&[t, v])).abs() < 1e-12, "{h}");
        assert_eq!(h["distance"].is_number(), v.is_some());
        assert!(h["document"]["lang"].is_string());
    }
    let c = hits.iter().find(|h| h["_id"] == "c").unwrap();
    assert!(c["ranks"]["text"].is_null() && c["ranks"]["vector"].is_u64());
    // the filter applies to both lists
    let (_, r) = s
        .post(
            "/v1/tables/vh/search",
            json!({"query": "graph", "vector": {"field": "embedding", "vector": [1.0, 0.0]},
            "filter": {"lang": "en"}}),
        )
        .await;
    assert!(r["hits"].as_array().unwrap().iter().all(|h| h["_id"] != "d"), "{r}");
    let r = s
        .send(
            Method::POST,
            "/v1/tables/vh/search",
            Some(&json!({"query": "graph", "vector": {"field": "nope", "vector": [1, 0]}})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "no_vector_index"), "{}", r.body);
}

/// An expired document is never a hit, swept or not.
#[tokio::test]
async fn expired_documents_are_never_returned() {
    let s = TestServer::start().await;
    s.create_table("vx").await;
    let body =
        json!({"name": "emb", "kind": "vector", "fields": ["embedding"], "options": {"dimension": 2, "metric": "l2"}});
    assert_eq!(s.post("/v1/tables/vx/indexes", body).await.0, 201);
    let soon = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64 + 300;
    assert_eq!(s.put("/v1/tables/vx/documents/gone", json!({"embedding": [0, 0], "_expires_at": soon})).await.0, 201);
    assert_eq!(s.put("/v1/tables/vx/documents/kept", json!({"embedding": [5, 5]})).await.0, 201);
    let q = json!({"field": "embedding", "vector": [0, 0], "k": 5});
    assert_eq!(ids(&search(&s, "vx", q.clone()).await), ["gone", "kept"]);
    // poll until it has expired (the sweep runs every 60 s: it is hidden before it is swept)
    for _ in 0..500 {
        if s.get("/v1/tables/vx/documents/gone").await.0 == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(s.get("/v1/tables/vx/documents/gone").await.0, 404);
    for exact in [false, true] {
        let mut q = q.clone();
        q["exact"] = json!(exact);
        assert_eq!(ids(&search(&s, "vx", q).await), ["kept"]);
    }
}

/// The Euclidean distance, in f64.
pub(super) fn l2(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum::<f64>().sqrt()
}

/// The `k` nearest of `docs` to `q` by brute force under l2, nearest first: (distance, id).
pub(super) fn brute_force(docs: &[(String, Vec<f32>)], q: &[f32], k: usize) -> Vec<(f64, String)> {
    let mut all: Vec<(f64, String)> = docs.iter().map(|(id, v)| (l2(v, q), id.clone())).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.truncate(k);
    all
}

/// Against brute force over `docs` (all the table holds): `exact: true` answers each query with
/// the true 10 nearest (each hit at its own true distance, the i-th hit's distance the true i-th
/// nearest distance, so ties may come in either order), and the default search's recall@10 is
/// returned.
pub(super) async fn recall_against_brute_force(
    s: &TestServer,
    table: &str,
    docs: &[(String, Vec<f32>)],
    queries: &[Vec<f32>],
) -> f64 {
    let by_id: BTreeMap<&str, &Vec<f32>> = docs.iter().map(|(id, v)| (id.as_str(), v)).collect();
    let (mut hit, mut total) = (0, 0);
    for q in queries {
        let want = brute_force(docs, q, 10);
        let exact =
            search(s, table, json!({"field": "embedding", "vector": q, "k": 10, "exact": true, "fields": ["_id"]}))
                .await;
        let hits = exact["hits"].as_array().unwrap();
        assert_eq!((hits.len(), &exact["strategy"]), (want.len(), &json!("exact")), "{exact}");
        for (h, (want_d, _)) in hits.iter().zip(&want) {
            let d = h["distance"].as_f64().unwrap();
            let true_d = l2(by_id[h["_id"].as_str().unwrap()], q);
            assert!((d - true_d).abs() < 1e-4 && (d - want_d).abs() < 1e-4, "{h}: want {want_d} (true {true_d})");
        }
        let walked = search(s, table, json!({"field": "embedding", "vector": q, "k": 10, "fields": ["_id"]})).await;
        assert_eq!(walked["strategy"], "hnsw", "{walked}");
        let got: BTreeSet<String> = ids(&walked).into_iter().collect();
        hit += want.iter().filter(|(_, id)| got.contains(id)).count();
        total += want.len();
    }
    hit as f64 / total.max(1) as f64
}

/// Each of `docs` is the nearest hit of a search with its own vector (`ef` 128, twice the
/// default), at distance 0.
pub(super) async fn each_finds_itself(s: &TestServer, table: &str, docs: &[(String, Vec<f32>)]) {
    use futures_util::StreamExt;
    let lost: Vec<String> = futures_util::stream::iter(docs)
        .map(|(id, v)| async move {
            let r = search(s, table, json!({"field": "embedding", "vector": v, "k": 1, "ef": 128, "fields": ["_id"]}))
                .await;
            let found = r["hits"][0]["_id"] == id.as_str() && r["hits"][0]["distance"] == 0.0;
            (!found).then(|| format!("{id}: {r}"))
        })
        .buffer_unordered(4)
        .filter_map(|lost| async move { lost })
        .collect()
        .await;
    assert!(
        lost.is_empty(),
        "{} of {} not found by their own vector, e.g. {:?}",
        lost.len(),
        docs.len(),
        &lost[..lost.len().min(5)]
    );
}

/// `n` clustered documents `d{i}` as NDJSON lines, and their vectors.
pub(super) fn ndjson(data: &mut Clusters, from: usize, n: usize) -> (String, Vec<(String, Vec<f32>)>) {
    let docs: Vec<(String, Vec<f32>)> = (from..from + n).map(|i| (format!("d{i}"), data.point())).collect();
    let body = docs.iter().map(|(id, v)| format!("{}\n", json!({"_id": id, "embedding": v}))).collect();
    (body, docs)
}

/// The l2 index of the bulk-path tests: `ef_construction` 64, not 200, so that 4000 inserts
/// take seconds in a debug build (the planning and its apply do not depend on it).
fn bulk_index() -> Value {
    json!({"name": "emb", "kind": "vector", "fields": ["embedding"],
        "options": {"dimension": DIM, "metric": "l2", "ef_construction": 64}})
}

pub(super) async fn import(s: &TestServer, table: &str, body: String, n: usize) {
    let r = s.raw(Method::POST, &format!("/v1/tables/{table}/import"), "application/x-ndjson", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!((r.body["inserted"].as_u64(), r.body["failed"].as_u64()), (Some(n as u64), Some(0)), "{}", r.body);
}

/// One NDJSON import of 4000 vectors (one chunk) into a table whose vector index already holds
/// 500: the chunk's inserts are planned in parallel on the graph as it was (see `vectors::bulk`)
/// and applied on the committer — the first 64 as planned, the rest searched again there, as a
/// plan is only used within 2% of its graph's size (at least 64) of later inserts; afterwards `exact` answers are brute force's, the default
/// search's recall@10 against brute force is ≥ 0.95, every document is found by its own vector,
/// and `check` is clean.
#[tokio::test]
async fn a_parallel_bulk_import_answers_as_brute_force() {
    let s = TestServer::start().await;
    s.create_table("vb").await;
    assert_eq!(s.post("/v1/tables/vb/indexes", bulk_index()).await.0, 201);
    let mut data = Clusters::new(29);
    // a graph to plan against
    let (_, mut docs) = ndjson(&mut data, 0, 500);
    insert(&s, "vb", docs.iter().map(|(id, v)| json!({"_id": id, "embedding": v})).collect()).await;
    let (body, imported) = ndjson(&mut data, 500, 4000);
    let started = std::time::Instant::now();
    import(&s, "vb", body, imported.len()).await;
    eprintln!("import of {} into an index of {}: {:?}", imported.len(), docs.len(), started.elapsed());
    docs.extend(imported);
    answers_as_brute_force(&s, "vb", &docs, &mut data, "import").await;
}

/// After a bulk path (`what`) filled `table` with `docs`: the default search's recall@10 against
/// brute force over 50 new queries is ≥ 0.95, every document is found by its own vector, and
/// `check` is clean.
async fn answers_as_brute_force(
    s: &TestServer,
    table: &str,
    docs: &[(String, Vec<f32>)],
    data: &mut Clusters,
    what: &str,
) {
    let queries: Vec<Vec<f32>> = (0..50).map(|_| data.point()).collect();
    let r = recall_against_brute_force(s, table, docs, &queries).await;
    eprintln!("recall@10 at the default ef after a parallel {what}, {} × {DIM}-d, l2: {r:.3}", docs.len());
    assert!(r >= 0.95, "recall {r}");
    each_finds_itself(s, table, docs).await;
    s.check_ok().await;
}

/// An index created over 4000 stored vectors is built by the backfill, its chunks planned in
/// parallel: once ready, `exact` answers are brute force's, the default search's recall@10
/// against brute force is ≥ 0.95, every document is found by its own vector, and `check` is
/// clean.
#[tokio::test]
async fn a_parallel_backfill_answers_as_brute_force() {
    let s = TestServer::start().await;
    s.create_table("vp").await;
    let mut data = Clusters::new(31);
    let (body, docs) = ndjson(&mut data, 0, 4000);
    import(&s, "vp", body, docs.len()).await;
    let started = std::time::Instant::now();
    let (status, def) = s.post("/v1/tables/vp/indexes", bulk_index()).await;
    assert_eq!((status.as_u16(), &def["state"]), (202, &json!("building")), "{def}");
    assert_eq!(s.index_settled("vp", "emb").await["state"], "ready");
    eprintln!("backfill of {}: {:?}", docs.len(), started.elapsed());
    answers_as_brute_force(&s, "vp", &docs, &mut data, "backfill").await;
}

/// In sync mode a read shows a write only once it is durable, and reads agree with each other:
/// once `GET …/indexes/{name}` says a vector index is ready, a search on it is served.
#[tokio::test]
async fn a_vector_index_read_ready_is_searchable_at_once_in_sync_mode() {
    let s = TestServer::start_with(|c| c.storage.durability = mosaicdb::storage::Durability::Sync).await;
    s.create_table("vy").await;
    let mut data = Clusters::new(37);
    let (body, docs) = ndjson(&mut data, 0, 200);
    import(&s, "vy", body, docs.len()).await;
    let mut refused = Vec::new();
    for (round, (id, v)) in docs.iter().enumerate().take(50) {
        let name = format!("e{round}");
        let body = json!({"name": name, "kind": "vector", "fields": ["embedding"],
            "options": {"dimension": DIM, "metric": "l2", "ef_construction": 64}});
        let (status, def) = s.post("/v1/tables/vy/indexes", body).await;
        assert_eq!(status, 202, "{def}");
        // polled without a pause, so the first answer that says ready is the one acted on
        loop {
            let (_, def) = s.get(&format!("/v1/tables/vy/indexes/{name}")).await;
            if def["state"] == "ready" {
                break;
            }
            assert_eq!(def["state"], "building", "{def}");
        }
        let q = json!({"field": "embedding", "vector": v, "k": 1});
        let r = s.send(Method::POST, "/v1/tables/vy/vector-search", Some(&q), &[]).await;
        if r.status != 200 {
            refused.push(format!("round {round}: {} {}", r.status, r.body));
        } else {
            assert_eq!(r.body["hits"][0]["_id"], id.as_str(), "{}", r.body);
        }
        assert_eq!(s.delete(&format!("/v1/tables/vy/indexes/{name}")).await.0, 204);
    }
    assert!(
        refused.is_empty(),
        "{} of 50 searches refused right after the index read ready: {refused:?}",
        refused.len()
    );
}

/// A write refused for a key past the storage backend's limit (a 70 KB value under a hash index)
/// leaves the vector graph as it was: the refused document is never a hit, and later writes and
/// searches link and find only what was written.
#[tokio::test]
async fn a_write_refused_for_its_size_never_reaches_the_vector_graph() {
    let s = TestServer::start().await;
    s.create_table("vl").await;
    index(&s, "vl", "l2").await;
    let (status, body) =
        s.post("/v1/tables/vl/indexes", json!({"name": "by_tag", "kind": "hash", "fields": ["tag"]})).await;
    assert!(status.is_success(), "{status} {body}");
    let v = |x: f32| -> Vec<f32> { (0..DIM).map(|i| x + i as f32 * 0.01).collect() };
    let (status, _) = s.put("/v1/tables/vl/documents/a", json!({"embedding": v(0.0), "tag": "a"})).await;
    assert_eq!(status, 201);
    let long = "t".repeat(70_000);
    let r = s
        .send(
            reqwest::Method::PUT,
            "/v1/tables/vl/documents/big",
            Some(&json!({"embedding": v(5.0), "tag": long})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "key_too_large"), "{}", r.body);
    for (id, x) in [("b", 4.9), ("c", 1.0)] {
        let (status, _) = s.put(&format!("/v1/tables/vl/documents/{id}"), json!({"embedding": v(x), "tag": id})).await;
        assert_eq!(status, 201);
    }
    let hits = ids(&search(&s, "vl", json!({"field": "embedding", "vector": v(5.0), "k": 10})).await);
    assert_eq!(hits, ["b", "c", "a"]);
    s.check_ok().await;
}
