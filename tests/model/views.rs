//! Model-based test of maintained views: random inserts, replaces, merge patches, deletes and
//! batches (one batch may touch a document, and so a group, several times) against the server,
//! with every view compared, page by page through its cursors, with its recomputation from the
//! in-memory documents (`model::views`) — filter membership and count, every group and every
//! aggregate, min/max also right after the document holding a group's extreme is deleted — and
//! `check` finding nothing wrong at the end.

use crate::common::TestServer;
use crate::common::model;
use model::views::Spec;
use model::{Rng, document, patch};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A random filter a view can hold (no `$box`).
fn view_filter(rng: &mut Rng) -> Value {
    loop {
        let f = model::filter(rng, 2);
        if !f.to_string().contains("$box") {
            return f;
        }
    }
}

fn specs(rng: &mut Rng) -> Vec<Spec> {
    let aggs = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    vec![
        Spec { name: "f1".into(), filter: Some(view_filter(rng)), by: vec![], aggregates: vec![] },
        Spec { name: "f2".into(), filter: Some(view_filter(rng)), by: vec![], aggregates: vec![] },
        Spec {
            name: "g1".into(),
            filter: None,
            by: vec!["b".into()],
            aggregates: aggs(&[
                ("n", "count"),
                ("s", "sum(a)"),
                ("av", "avg(a)"),
                ("lo", "min(a)"),
                ("hi", "max(a)"),
                ("tlo", "min(tags)"),
                ("thi", "max(tags)"),
            ]),
        },
        Spec {
            name: "g2".into(),
            filter: Some(view_filter(rng)),
            by: vec!["b".into(), "tags".into()],
            aggregates: aggs(&[("n", "count"), ("s", "sum(c)"), ("lo", "min(s)"), ("hi", "max(u)")]),
        },
        Spec {
            name: "g3".into(),
            filter: None,
            by: vec!["n.v".into()],
            aggregates: aggs(&[("n", "count"), ("s", "sum(n.v)"), ("av", "avg(a)"), ("hi", "max(s)")]),
        },
    ]
}

/// Every member of a filter view, paged with a small limit through its cursors.
async fn members(s: &TestServer, view: &str) -> Vec<String> {
    let (mut out, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/tables/t/views/{view}/documents?limit=7&cursor={c}"),
            None => format!("/v1/tables/t/views/{view}/documents?limit=7"),
        };
        let (st, page) = s.get(&path).await;
        assert_eq!(st, 200, "{page}");
        out.extend(page["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()));
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

/// Every group of a group view, paged with a small limit through its cursors.
async fn groups(s: &TestServer, view: &str) -> (Vec<Value>, u64) {
    let (mut out, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/tables/t/views/{view}?limit=5&cursor={c}"),
            None => format!("/v1/tables/t/views/{view}?limit=5"),
        };
        let (st, page) = s.get(&path).await;
        assert_eq!(st, 200, "{page}");
        out.extend(page["groups"].as_array().unwrap().iter().cloned());
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (out, page["group_count"].as_u64().unwrap()),
        }
    }
}

async fn compare(s: &TestServer, specs: &[Spec], docs: &BTreeMap<String, Value>, seed: u64, step: usize) {
    for spec in specs {
        if spec.by.is_empty() {
            let want = spec.members(docs);
            assert_eq!(members(s, &spec.name).await, want, "seed {seed} step {step} view {}", spec.name);
            let (_, info) = s.get(&format!("/v1/tables/t/views/{}", spec.name)).await;
            assert_eq!(info["count"], json!(want.len()), "seed {seed} step {step} view {}", spec.name);
            continue;
        }
        let want = spec.groups(docs);
        let (got, count) = groups(s, &spec.name).await;
        let ctx = format!("seed {seed} step {step} view {} ({})", spec.name, spec.body());
        if got.len() != want.len() {
            let gk: Vec<String> = got.iter().map(|g| g["key"].to_string()).collect();
            let wk: Vec<String> = want.iter().map(|(k, _)| Value::Array(k.clone()).to_string()).collect();
            panic!("{ctx}: group keys {gk:?}\nwant {wk:?}\ndocs {docs:?}");
        }
        assert_eq!(count, want.len() as u64, "{ctx}");
        for (g, (key, aggs)) in got.iter().zip(&want) {
            for (field, value) in spec.by.iter().zip(key) {
                assert!(
                    model::cmp_scalar(&g["key"][field], value).is_eq()
                        && (g["key"][field].is_null() == value.is_null()),
                    "{ctx}: group {g} want key {key:?}"
                );
            }
            for (name, expected) in aggs {
                assert!(expected.agrees(&g[name]), "{ctx}: group {g}: {name} want {expected:?}");
            }
        }
        // one group read by its key, as an array
        if let Some((key, aggs)) = want.first() {
            let k = mosaicdb::api::encode_path(&Value::Array(key.clone()).to_string());
            let (st, one) = s.get(&format!("/v1/tables/t/views/{}?key={k}", spec.name)).await;
            assert_eq!(st, 200, "{one}");
            let g = &one["groups"][0];
            assert!(aggs.iter().all(|(n, e)| e.agrees(&g[n])), "{ctx}: key {key:?}: {one}");
        }
    }
}

/// Deletes the document holding the greatest `a` of a random group of `g1`.
fn extreme_holder(rng: &mut Rng, docs: &BTreeMap<String, Value>) -> Option<String> {
    let b = *rng.pick(&["x", "y", "z", "w"]);
    let in_group: Vec<(&String, &Value)> = docs.iter().filter(|(_, d)| d.get("b") == Some(&json!(b))).collect();
    let mut best: Option<(&String, Value)> = None;
    for (id, d) in in_group {
        for v in model::views::range_values(d, "a") {
            if best.as_ref().is_none_or(|(_, bv)| model::cmp_scalar(&v, bv).is_gt()) {
                best = Some((id, v));
            }
        }
    }
    best.map(|(id, _)| id.clone())
}

async fn run(seed: u64, steps: usize) {
    let s = TestServer::start().await;
    s.create_table("t").await;
    let mut rng = Rng(seed);
    let specs = specs(&mut rng);
    // half the views exist before any document, half are built over the first documents
    let (early, late) = specs.split_at(2);
    for spec in early {
        let (st, body) = s.post("/v1/tables/t/views", spec.body()).await;
        assert_eq!(st, 201, "{body}");
    }
    let mut docs: BTreeMap<String, Value> = BTreeMap::new();
    let id = |rng: &mut Rng| format!("d{:02}", rng.below(40));
    for step in 0..steps {
        if step == 20 {
            for spec in late {
                let (st, body) = s.post("/v1/tables/t/views", spec.body()).await;
                assert!(st == 201 || st == 202, "{body}");
                for _ in 0..1000 {
                    let (_, v) = s.get(&format!("/v1/tables/t/views/{}", spec.name)).await;
                    if v["state"] == "ready" {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
            // the views built over the documents so far
            compare(&s, &specs, &docs, seed, step).await;
        }
        match rng.below(10) {
            0..=3 => {
                let (i, d) = (id(&mut rng), document(&mut rng));
                let (st, body) = s.put(&format!("/v1/tables/t/documents/{i}"), d.clone()).await;
                assert!(st.is_success(), "{body}");
                docs.insert(i, d);
            }
            4 | 5 => {
                let i = id(&mut rng);
                let p = patch(&mut rng);
                let (st, body) = s.patch(&format!("/v1/tables/t/documents/{i}"), p.clone()).await;
                match docs.get(&i) {
                    Some(d) => {
                        assert_eq!(st, 200, "{body}");
                        let next = model::merge_patch(d, &p);
                        docs.insert(i, next);
                    }
                    None => assert_eq!(st, 404, "{body}"),
                }
            }
            6 => {
                let i = id(&mut rng);
                let (st, _) = s.delete(&format!("/v1/tables/t/documents/{i}")).await;
                assert_eq!(st, if docs.remove(&i).is_some() { 204 } else { 404 });
            }
            7 => {
                if let Some(i) = extreme_holder(&mut rng, &docs) {
                    assert_eq!(s.delete(&format!("/v1/tables/t/documents/{i}")).await.0, 204);
                    docs.remove(&i);
                    compare(&s, &specs[..if step >= 20 { specs.len() } else { 2 }], &docs, seed, step).await;
                }
            }
            _ => {
                // a batch: puts, patches of existing documents and deletes, a document possibly twice
                let mut ops = Vec::new();
                let mut next = docs.clone();
                for _ in 0..1 + rng.below(5) {
                    let i = id(&mut rng);
                    match rng.below(3) {
                        0 if next.contains_key(&i) => {
                            let p = patch(&mut rng);
                            ops.push(json!({"op": "patch", "table": "t", "id": i, "document": p}));
                            let d = model::merge_patch(&next[&i], &p);
                            next.insert(i, d);
                        }
                        1 if next.contains_key(&i) => {
                            ops.push(json!({"op": "delete", "table": "t", "id": i}));
                            next.remove(&i);
                        }
                        _ => {
                            let d = document(&mut rng);
                            ops.push(json!({"op": "put", "table": "t", "id": i, "document": d}));
                            next.insert(i, d);
                        }
                    }
                }
                let (st, body) = s.post("/v1/batch", json!({ "operations": ops })).await;
                assert_eq!(st, 200, "{body}");
                docs = next;
            }
        }
        if step % 40 == 39 {
            let live = if step >= 20 { specs.len() } else { 2 };
            compare(&s, &specs[..live], &docs, seed, step).await;
        }
    }
    compare(&s, &specs, &docs, seed, steps).await;
    s.check_ok().await;
}

#[tokio::test]
async fn views_equal_their_recomputation_after_random_writes() {
    for seed in [0x5eed_0001u64, 0x5eed_0002, 0xdead_beef] {
        run(seed, 240).await;
    }
}
