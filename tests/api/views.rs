//! Maintained views over HTTP: definitions and their errors, filter views (members, count,
//! paging, `$view` in queries), group views (aggregates, `key`, multikey groups, the per-document
//! cap), building over a full table while writes go on, drop and re-create, restart, TTL expiry,
//! import, concurrent writers — each compared with the recomputation of `model::views` and
//! followed by `check`.

use crate::common::TestServer;
use crate::common::model;
use model::views::Spec;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Waits until the view is no longer building and returns it.
async fn view_settled(s: &TestServer, table: &str, view: &str) -> Value {
    for _ in 0..3000 {
        let (_, def) = s.get(&format!("/v1/tables/{table}/views/{view}")).await;
        if def["state"] != "building" {
            return def;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("view {view} is still building");
}

fn group_spec(name: &str, filter: Option<Value>) -> Spec {
    Spec {
        name: name.into(),
        filter,
        by: vec!["city".into()],
        aggregates: [
            ("n", "count"),
            ("total", "sum(amount)"),
            ("avg_age", "avg(age)"),
            ("youngest", "min(age)"),
            ("oldest", "max(age)"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    }
}

fn filter_spec(name: &str, filter: Value) -> Spec {
    Spec { name: name.into(), filter: Some(filter), by: vec![], aggregates: vec![] }
}

/// Every document of the table as the model holds them (without `_id`).
async fn model_docs(s: &TestServer, table: &str) -> BTreeMap<String, Value> {
    let mut docs = s.all_documents(table).await;
    for d in docs.values_mut() {
        d.as_object_mut().unwrap().remove("_id");
    }
    docs
}

/// The view equals its recomputation from the table's documents.
async fn assert_view(s: &TestServer, table: &str, spec: &Spec) {
    let docs = model_docs(s, table).await;
    if spec.by.is_empty() {
        let (mut got, mut cursor) = (Vec::new(), None::<String>);
        loop {
            let q = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
            let (st, page) = s.get(&format!("/v1/tables/{table}/views/{}/documents?limit=3{q}", spec.name)).await;
            assert_eq!(st, 200, "{page}");
            got.extend(page["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap().to_owned()));
            match page["cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        assert_eq!(got, spec.members(&docs), "view {}", spec.name);
        let (_, info) = s.get(&format!("/v1/tables/{table}/views/{}", spec.name)).await;
        assert_eq!(info["count"], json!(got.len()), "{info}");
        return;
    }
    let (st, page) = s.get(&format!("/v1/tables/{table}/views/{}?limit=1000", spec.name)).await;
    assert_eq!(st, 200, "{page}");
    let got = page["groups"].as_array().unwrap();
    let want = spec.groups(&docs);
    assert_eq!(got.len(), want.len(), "{page} want {want:?}");
    assert_eq!(page["group_count"], json!(want.len()));
    for (g, (key, aggs)) in got.iter().zip(&want) {
        for (f, v) in spec.by.iter().zip(key) {
            assert!(model::cmp_scalar(&g["key"][f], v).is_eq(), "{g} want {key:?}");
        }
        for (name, e) in aggs {
            assert!(e.agrees(&g[name]), "{g}: {name} want {e:?}");
        }
    }
}

async fn create(s: &TestServer, table: &str, spec: &Spec) -> (u16, Value) {
    let (st, body) = s.post(&format!("/v1/tables/{table}/views"), spec.body()).await;
    (st.as_u16(), body)
}

#[tokio::test]
async fn definitions_and_their_errors() {
    let s = TestServer::start().await;
    let adults = filter_spec("adults", json!({"age": {"$gte": 18}}));
    assert_eq!(create(&s, "nope", &adults).await.1["code"], "table_not_found");
    s.create_table("users").await;
    let (st, def) = create(&s, "users", &adults).await;
    assert_eq!((st, &def["state"], &def["kind"]), (201, &json!("ready"), &json!("filter")), "{def}");
    let (st, body) = create(&s, "users", &adults).await;
    assert_eq!((st, &body["code"]), (409, &json!("view_exists")));
    for bad in [
        json!({"name": "x", "kind": "filter"}),
        json!({"name": "x", "kind": "filter", "filter": {"p": {"$near": {"lat": 1, "lon": 2, "meters": 3}}}}),
        json!({"name": "x", "kind": "filter", "filter": {"$not": {"p": {"$box": {"min_lat": 0, "min_lon": 0, "max_lat": 1, "max_lon": 1}}}}}),
        json!({"name": "x", "kind": "filter", "filter": {"$view": "adults"}}),
        json!({"name": "x", "kind": "group", "by": []}),
        json!({"name": "x", "kind": "group", "by": ["a", "b", "c", "d", "e"]}),
        json!({"name": "x", "kind": "group", "by": ["a"], "aggregates": {"m": "median(a)"}}),
        json!({"name": "", "kind": "group", "by": ["a"]}),
    ] {
        let (st, body) = s.post("/v1/tables/users/views", bad.clone()).await;
        assert_eq!((st.as_u16(), &body["code"]), (422, &json!("invalid_view")), "{bad}: {body}");
    }
    let (st, body) = s.post("/v1/tables/users/views", json!({"name": "x", "kind": "cube"})).await;
    assert_eq!(st, 422, "{body}");
    assert_eq!(s.get("/v1/tables/users/views/none").await.1["code"], "view_not_found");
    assert_eq!(s.delete("/v1/tables/users/views/none").await.1["code"], "view_not_found");
    assert_eq!(s.get("/v1/tables/users/views/none/documents").await.1["code"], "view_not_found");
    // at most 32 views per table
    for i in 1..32 {
        assert_eq!(create(&s, "users", &filter_spec(&format!("v{i}"), json!({"i": i}))).await.0, 201);
    }
    let (st, body) = create(&s, "users", &filter_spec("v32", json!({"i": 32}))).await;
    assert_eq!((st, &body["code"]), (422, &json!("invalid_view")), "{body}");
    let (_, list) = s.get("/v1/tables/users/views").await;
    assert_eq!(list["views"].as_array().unwrap().len(), 32);
    assert_eq!(s.delete("/v1/tables/users/views/v31").await.0, 204);
    assert_eq!(create(&s, "users", &filter_spec("v32", json!({"i": 32}))).await.0, 201);
    // reading a view the wrong way
    let (st, body) = s.get("/v1/tables/users/views/adults?key=%5B1%5D").await;
    assert_eq!((st.as_u16(), &body["code"]), (422, &json!("invalid_view")));
    assert_eq!(s.get("/v1/tables/users/views/adults/documents?limit=0").await.0, 400);
    assert_eq!(s.get("/v1/tables/users/views/adults/documents?cursor=junk").await.1["code"], "invalid_cursor");
    s.check_ok().await;
}

#[tokio::test]
async fn filter_views_page_members_and_serve_queries() {
    let s = TestServer::start().await;
    s.create_table("users").await;
    let spec = filter_spec("adults_oslo", json!({"age": {"$gte": 18}, "city": "Oslo"}));
    assert_eq!(create(&s, "users", &spec).await.0, 201);
    for i in 0..40 {
        let city = ["Oslo", "Rome", "Lima"][i % 3];
        let doc = json!({"age": 10 + i, "city": city, "name": format!("n{i}"), "tags": [i % 4]});
        assert_eq!(s.put(&format!("/v1/tables/users/documents/u{i:02}"), doc).await.0, 201);
    }
    assert_view(&s, "users", &spec).await;
    // a patch out of the view, a delete, a replace into it
    assert_eq!(s.patch("/v1/tables/users/documents/u12", json!({"city": "Rome"})).await.0, 200);
    assert_eq!(s.delete("/v1/tables/users/documents/u15").await.0, 204);
    assert_eq!(s.put("/v1/tables/users/documents/u01", json!({"age": 50, "city": "Oslo"})).await.0, 200);
    assert_view(&s, "users", &spec).await;
    // projection
    let (_, page) = s.get("/v1/tables/users/views/adults_oslo/documents?limit=2&fields=name,missing").await;
    assert_eq!(page["documents"][0], json!({"_id": "u01"}));
    assert_eq!(page["documents"][1], json!({"_id": "u09", "name": "n9"}));
    // `$view` in a query: starts from the members, the rest of the filter is checked on each
    let q = json!({"filter": {"$view": "adults_oslo", "tags": 0}});
    let docs = model_docs(&s, "users").await;
    let want: Vec<String> =
        spec.members(&docs).into_iter().filter(|id| model::model_match(&docs[id], &json!({"tags": 0}))).collect();
    let got: Vec<String> =
        s.query_pages("users", &q, 2).await.iter().map(|d| d["_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(got, want);
    let (_, plan) =
        s.post("/v1/tables/users/query", json!({"filter": {"$view": "adults_oslo"}, "explain": true})).await;
    assert_eq!(plan["plan"]["strategy"], "view_scan", "{plan}");
    assert_eq!(plan["plan"]["examined_rows"], json!(spec.members(&docs).len()));
    // an index that narrows further wins over the members
    let index = json!({"name": "by_name", "kind": "hash", "fields": ["name"]});
    assert!(s.post("/v1/tables/users/indexes", index).await.0.is_success());
    assert_eq!(s.index_settled("users", "by_name").await["state"], "ready");
    let (_, plan) = s
        .post("/v1/tables/users/query", json!({"filter": {"$view": "adults_oslo", "name": "n9"}, "explain": true}))
        .await;
    assert_eq!(plan["plan"]["strategy"], "index_scan", "{plan}");
    assert_eq!(plan["plan"]["returned_rows"], 1);
    // errors
    let bad = |f: Value| json!({ "filter": f });
    assert_eq!(s.post("/v1/tables/users/query", bad(json!({"$view": "none"}))).await.1["code"], "view_not_found");
    assert_eq!(s.post("/v1/tables/users/query", bad(json!({"$view": 3}))).await.1["code"], "invalid_filter");
    let by_city = group_spec("by_city", None);
    assert_eq!(create(&s, "users", &by_city).await.0, 202);
    let (st, body) = s.post("/v1/tables/users/query", bad(json!({"$view": "by_city"}))).await;
    assert!(st == 422 || st == 409, "{body}");
    view_settled(&s, "users", "by_city").await;
    let (st, body) = s.post("/v1/tables/users/query", bad(json!({"$view": "by_city"}))).await;
    assert_eq!((st.as_u16(), &body["code"]), (422, &json!("invalid_view")));
    assert_eq!(s.post("/v1/tables/users/query", bad(json!({"$or": [{"$view": "x"}]}))).await.0, 400);
    s.check_ok().await;
}

#[tokio::test]
async fn group_views_keep_every_aggregate() {
    let s = TestServer::start().await;
    s.create_table("orders").await;
    let spec = group_spec("by_city", Some(json!({"status": {"$ne": "void"}})));
    assert_eq!(create(&s, "orders", &spec).await.0, 201);
    let docs = [
        ("o1", json!({"city": "Oslo", "amount": 10, "age": 30})),
        ("o2", json!({"city": "Oslo", "amount": 2.5, "age": 19})),
        ("o3", json!({"city": "Oslo", "amount": "n/a", "age": 45})),
        ("o4", json!({"city": ["Rome", "Lima", "Rome"], "amount": 7, "age": 22})),
        ("o5", json!({"amount": 1, "age": "old"})),
        ("o6", json!({"city": "Oslo", "amount": 1000, "status": "void"})),
    ];
    for (id, d) in &docs {
        assert_eq!(s.put(&format!("/v1/tables/orders/documents/{id}"), d.clone()).await.0, 201);
    }
    assert_view(&s, "orders", &spec).await;
    let (_, oslo) = s.get("/v1/tables/orders/views/by_city?key=%7B%22city%22%3A%22Oslo%22%7D").await;
    assert_eq!(
        oslo["groups"],
        json!([{"key": {"city": "Oslo"}, "n": 3, "total": 12.5, "avg_age": 94.0 / 3.0, "youngest": 19, "oldest": 45}])
    );
    // the oldest leaves: the max is the next one, exactly, with no rescan
    assert_eq!(s.delete("/v1/tables/orders/documents/o3").await.0, 204);
    let (_, oslo) = s.get("/v1/tables/orders/views/by_city?key=%5B%22Oslo%22%5D").await;
    assert_eq!(oslo["groups"][0]["oldest"], 30);
    // the youngest changes age; the void order joins
    assert_eq!(s.patch("/v1/tables/orders/documents/o2", json!({"age": 50})).await.0, 200);
    assert_eq!(s.patch("/v1/tables/orders/documents/o6", json!({"status": "paid"})).await.0, 200);
    assert_view(&s, "orders", &spec).await;
    let (_, oslo) = s.get("/v1/tables/orders/views/by_city?key=%5B%22Oslo%22%5D").await;
    assert_eq!((&oslo["groups"][0]["youngest"], &oslo["groups"][0]["oldest"]), (&json!(30), &json!(50)));
    // a group nobody is in, and bad keys
    let (_, none) = s.get("/v1/tables/orders/views/by_city?key=%5B%22Bergen%22%5D").await;
    assert_eq!(none["groups"], json!([]));
    for bad in ["%5B1%2C2%5D", "nope", "%7B%22x%22%3A1%7D", "%5B%5B1%5D%5D"] {
        let (st, body) = s.get(&format!("/v1/tables/orders/views/by_city?key={bad}")).await;
        assert_eq!(st, 400, "{bad}: {body}");
    }
    // a write that changes nothing the view reads stages no view key: the view stays equal
    assert_eq!(s.patch("/v1/tables/orders/documents/o1", json!({"note": "x"})).await.0, 200);
    assert_view(&s, "orders", &spec).await;
    // the per-document cap: 4 fields of 8 distinct values each is 4096 groups
    let wide = Spec {
        name: "wide".into(),
        filter: None,
        by: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        aggregates: vec![("n".into(), "count".into())],
    };
    assert_eq!(create(&s, "orders", &wide).await.0, 202);
    assert_eq!(view_settled(&s, "orders", "wide").await["state"], "ready");
    let eight: Vec<u32> = (0..8).collect();
    let (st, body) =
        s.put("/v1/tables/orders/documents/w", json!({"a": eight, "b": eight, "c": eight, "d": eight})).await;
    assert_eq!((st.as_u16(), &body["code"]), (422, &json!("too_many_view_keys")), "{body}");
    assert_eq!(s.get("/v1/tables/orders/documents/w").await.0, 404);
    assert_view(&s, "orders", &wide).await;
    // paging groups with a cursor
    for i in 0..25 {
        let d = json!({"city": format!("c{i:02}"), "amount": i, "age": i});
        assert_eq!(s.put(&format!("/v1/tables/orders/documents/p{i}"), d).await.0, 201);
    }
    let (mut keys, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let q = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let (_, page) = s.get(&format!("/v1/tables/orders/views/by_city?limit=4{q}")).await;
        keys.extend(page["groups"].as_array().unwrap().iter().map(|g| g["key"]["city"].clone()));
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let want = spec.groups(&model_docs(&s, "orders").await);
    assert_eq!(keys.len(), want.len());
    assert_eq!(s.get("/v1/tables/orders/views/wide?limit=5&cursor=AAAAAAAAAAAA").await.1["code"], "invalid_cursor");
    s.check_ok().await;
}

#[tokio::test]
async fn a_view_builds_over_a_full_table_while_writes_go_on() {
    let s = TestServer::start_with(|c| c.options.backfill_chunk = 50).await;
    s.create_table("t").await;
    let lines: String = (0..3000)
        .map(|i| format!("{{\"_id\": \"d{i:04}\", \"g\": {}, \"v\": {}, \"f\": {}}}\n", i % 17, i, i % 5 == 0))
        .collect();
    let r = s.raw(Method::POST, "/v1/tables/t/import", "application/x-ndjson", lines).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let group = Spec {
        name: "by_g".into(),
        filter: None,
        by: vec!["g".into()],
        aggregates: vec![("n".into(), "count".into()), ("s".into(), "sum(v)".into()), ("hi".into(), "max(v)".into())],
    };
    let members = filter_spec("fives", json!({"f": true}));
    let (st, def) = create(&s, "t", &group).await;
    assert_eq!((st, &def["state"]), (202, &json!("building")), "{def}");
    assert_eq!(create(&s, "t", &members).await.0, 202);
    // not readable until ready
    let (st, body) = s.get("/v1/tables/t/views/fives/documents").await;
    if st == 409 {
        assert_eq!(body["code"], "view_not_ready");
    }
    // writes all over the table while the builds run: before and after their position
    for i in (0..3000).step_by(37) {
        let id = format!("d{i:04}");
        match i % 3 {
            0 => assert_eq!(s.delete(&format!("/v1/tables/t/documents/{id}")).await.0, 204),
            1 => assert_eq!(s.patch(&format!("/v1/tables/t/documents/{id}"), json!({"g": 99, "f": true})).await.0, 200),
            _ => assert_eq!(s.put(&format!("/v1/tables/t/documents/n{i}"), json!({"g": 1, "v": -1})).await.0, 201),
        }
    }
    assert_eq!(view_settled(&s, "t", "by_g").await["state"], "ready");
    assert_eq!(view_settled(&s, "t", "fives").await["state"], "ready");
    assert_view(&s, "t", &group).await;
    assert_view(&s, "t", &members).await;
    s.check_ok().await;
}

#[tokio::test]
async fn views_survive_restart_and_drop_and_recreate_leaves_no_stale_keys() {
    let s = TestServer::start().await;
    s.create_table("t").await;
    let spec = group_spec("by_city", None);
    let members = filter_spec("oslo", json!({"city": "Oslo"}));
    for sp in [&spec, &members] {
        assert_eq!(create(&s, "t", sp).await.0, 201);
    }
    for i in 0..30 {
        let city = ["Oslo", "Rome"][i % 2];
        let d = json!({"city": city, "amount": i, "age": 20 + i});
        assert_eq!(s.put(&format!("/v1/tables/t/documents/d{i}"), d).await.0, 201);
    }
    let dir = s.stop().await;
    let s = TestServer::start_in(dir, |_| {}).await;
    assert_view(&s, "t", &spec).await;
    assert_view(&s, "t", &members).await;
    assert_eq!(s.delete("/v1/tables/t/documents/d0").await.0, 204);
    assert_view(&s, "t", &spec).await;
    // drop, and re-create the name with another definition
    assert_eq!(s.delete("/v1/tables/t/views/oslo").await.0, 204);
    assert_eq!(s.get("/v1/tables/t/views/oslo").await.0, 404);
    let again = filter_spec("oslo", json!({"age": {"$lt": 30}}));
    assert_eq!(create(&s, "t", &again).await.0, 202);
    view_settled(&s, "t", "oslo").await;
    assert_view(&s, "t", &again).await;
    assert_eq!(s.delete("/v1/tables/t/views/by_city").await.0, 204);
    let again_group = group_spec("by_city", Some(json!({"city": "Rome"})));
    assert_eq!(create(&s, "t", &again_group).await.0, 202);
    view_settled(&s, "t", "by_city").await;
    assert_view(&s, "t", &again_group).await;
    s.check_ok().await;
    // a dropped table takes its views along; a new table of that name has none
    assert_eq!(s.delete("/v1/tables/t").await.0, 204);
    s.create_table("t").await;
    let (_, list) = s.get("/v1/tables/t/views").await;
    assert_eq!(list["views"], json!([]));
    s.check_ok().await;
}

#[tokio::test]
async fn ttl_expiry_and_import_update_views() {
    use mosaicdb::service::{Db, DbOptions};
    use mosaicdb::storage::Durability;
    let s = TestServer::start().await;
    s.create_table("s").await;
    let spec = group_spec("by_city", None);
    let members = filter_spec("oslo", json!({"city": "Oslo"}));
    for sp in [&spec, &members] {
        assert_eq!(create(&s, "s", sp).await.0, 201);
    }
    let lines = "{\"_id\": \"a\", \"city\": \"Oslo\", \"amount\": 1, \"age\": 5, \"_expires_at\": 0}\n\
                 {\"_id\": \"b\", \"city\": \"Oslo\", \"amount\": 2, \"age\": 50}\n\
                 {\"_id\": \"c\", \"city\": \"Rome\", \"amount\": 3, \"age\": 7, \"_expires_at\": 1}\n";
    let r = s.raw(Method::POST, "/v1/tables/s/import", "application/x-ndjson", lines).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // expired documents are not listed, but count until the sweep removes them
    let (_, page) = s.get("/v1/tables/s/views/oslo/documents").await;
    assert_eq!(page["documents"].as_array().unwrap().len(), 1, "{page}");
    let (_, info) = s.get("/v1/tables/s/views/oslo").await;
    assert_eq!(info["count"], 2);
    s.check_ok().await;
    let dir = s.stop().await;
    let mut cfg = crate::common::storage_config(dir.path());
    cfg.durability = Durability::Buffered;
    let db = Db::open(cfg, DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
    let outcome = db.pipeline.sweep_expired(i64::MAX / 2, 10_000).await.unwrap();
    assert_eq!(outcome.removed, 2, "{outcome:?}");
    db.core.close().unwrap();
    drop(db);
    let s = TestServer::start_in(dir, |_| {}).await;
    let (_, info) = s.get("/v1/tables/s/views/oslo").await;
    assert_eq!(info["count"], 1);
    let (_, groups) = s.get("/v1/tables/s/views/by_city").await;
    assert_eq!(
        groups["groups"],
        json!([{"key": {"city": "Oslo"}, "n": 1, "total": 2, "avg_age": 50.0, "youngest": 50, "oldest": 50}])
    );
    assert_view(&s, "s", &spec).await;
    s.check_ok().await;
}

#[tokio::test]
async fn concurrent_writers_then_check() {
    let s = std::sync::Arc::new(TestServer::start().await);
    s.create_table("c").await;
    let spec = group_spec("by_city", None);
    assert_eq!(create(&s, "c", &spec).await.0, 201);
    let members = filter_spec("big", json!({"amount": {"$gte": 50}}));
    assert_eq!(create(&s, "c", &members).await.0, 201);
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = model::Rng(w + 1);
            for _ in 0..60 {
                let id = format!("d{}", rng.below(30));
                let city = *rng.pick(&["Oslo", "Rome", "Lima", "Kyiv"]);
                match rng.below(4) {
                    0 => {
                        s.delete(&format!("/v1/tables/c/documents/{id}")).await;
                    }
                    1 => {
                        s.patch(&format!("/v1/tables/c/documents/{id}"), json!({"amount": rng.below(100)})).await;
                    }
                    _ => {
                        let d = json!({"city": city, "amount": rng.below(100), "age": rng.below(90) as f64 + 0.5});
                        s.put(&format!("/v1/tables/c/documents/{id}"), d).await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_view(&s, "c", &spec).await;
    assert_view(&s, "c", &members).await;
    s.check_ok().await;
}
