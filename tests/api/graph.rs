//! The graph over HTTP: edges need existing vertices on every write path, vertex deletes are
//! refused or cascade, neighbours page, traversals and shortest paths answer and fail clearly.

use crate::common::{TestServer, seg};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;

async fn edge_table(s: &TestServer, name: &str, extra: Value) {
    let mut body = json!({"name": name, "kind": "edge"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (st, def) = s.post("/v1/tables", body).await;
    assert_eq!(st, 201, "{def}");
}

async fn vertices(s: &TestServer, table: &str, ids: &[&str]) {
    let docs: Vec<Value> = ids.iter().enumerate().map(|(i, id)| json!({"_id": id, "n": i})).collect();
    let (st, body) = s.post(&format!("/v1/tables/{table}/documents"), json!(docs)).await;
    assert_eq!(st, 201, "{body}");
}

async fn edge(s: &TestServer, table: &str, id: &str, from: &str, to: &str) {
    let (st, body) =
        s.put(&format!("/v1/tables/{table}/documents/{}", seg(id)), json!({"_from": from, "_to": to})).await;
    assert!(st == 201 || st == 200, "{table}/{id} {from} -> {to}: {body}");
}

/// Every neighbour of `vertex` as (vertex, edge, direction), paging with `limit`.
async fn all_neighbors(
    s: &TestServer,
    vertex: &str,
    direction: &str,
    edges: &str,
    limit: usize,
) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let mut path = format!("/v1/graph/neighbors?vertex={}&direction={direction}&limit={limit}", seg(vertex));
        if !edges.is_empty() {
            path.push_str(&format!("&edges={edges}"));
        }
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (st, page) = s.get(&path).await;
        assert_eq!(st, 200, "{path}: {page}");
        let items = page["neighbors"].as_array().unwrap();
        assert!(items.len() <= limit);
        for n in items {
            out.push((
                n["vertex"].as_str().unwrap().to_owned(),
                n["edge"].as_str().unwrap().to_owned(),
                n["direction"].as_str().unwrap().to_owned(),
            ));
        }
        cursor = page["cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            return out;
        }
    }
    panic!("paging did not end");
}

fn triple(v: &str, e: &str, d: &str) -> (String, String, String) {
    (v.to_owned(), e.to_owned(), d.to_owned())
}

#[tokio::test]
async fn edges_need_existing_vertices_on_every_write_path() {
    let s = TestServer::start().await;
    s.create_table("users").await;
    edge_table(&s, "follows", json!({})).await;
    vertices(&s, "users", &["alice", "bob", "carol"]).await;

    // PUT, POST: a missing vertex, or a missing table, is named
    let r = s
        .send(
            Method::PUT,
            "/v1/tables/follows/documents/f1",
            Some(&json!({"_from": "users/alice", "_to": "users/zed"})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "invalid_document"), "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("users/zed"), "{}", r.body);
    let r = s
        .send(
            Method::PUT,
            "/v1/tables/follows/documents/f1",
            Some(&json!({"_from": "nosuch/x", "_to": "users/bob"})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "invalid_document"), "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("nosuch"), "{}", r.body);
    let two = json!([{"_id": "f1", "_from": "users/alice", "_to": "users/bob"}, {"_id": "f2", "_from": "users/bob", "_to": "users/nobody"}]);
    let r = s.send(Method::POST, "/v1/tables/follows/documents", Some(&two), &[]).await;
    assert!(r.is_problem(422, "invalid_document"), "{}", r.body);
    assert_eq!(s.get("/v1/tables/follows").await.1["documents"], 0, "all or nothing");
    edge(&s, "follows", "f1", "users/alice", "users/bob").await;

    // PATCH, with either content type, may not move an endpoint to a missing vertex
    for ct in ["application/json", "application/merge-patch+json"] {
        let r = s.raw(Method::PATCH, "/v1/tables/follows/documents/f1", ct, r#"{"_from": "nosuchtable/x"}"#).await;
        assert!(r.is_problem(422, "invalid_document"), "{ct}: {}", r.body);
        let r = s.raw(Method::PATCH, "/v1/tables/follows/documents/f1", ct, r#"{"_to": "users/ghost"}"#).await;
        assert!(r.is_problem(422, "invalid_document"), "{ct}: {}", r.body);
    }
    // a patch moving `_to` moves the adjacency
    let r = s
        .raw(
            Method::PATCH,
            "/v1/tables/follows/documents/f1",
            "application/merge-patch+json",
            r#"{"_to": "users/carol"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(all_neighbors(&s, "users/alice", "out", "", 10).await, [triple("users/carol", "follows/f1", "out")]);
    assert!(all_neighbors(&s, "users/bob", "any", "", 10).await.is_empty());
    assert_eq!(all_neighbors(&s, "users/carol", "in", "", 10).await, [triple("users/alice", "follows/f1", "in")]);

    // batch: a vertex put earlier in the batch counts; one deleted earlier does not
    let ops = json!({"operations": [
        {"op": "put", "table": "users", "id": "dave", "document": {}},
        {"op": "put", "table": "follows", "id": "f2", "document": {"_from": "users/dave", "_to": "users/alice"}},
    ]});
    assert_eq!(s.post("/v1/batch", ops).await.0, 200);
    let ops = json!({"operations": [
        {"op": "put", "table": "users", "id": "erin", "document": {}},
        {"op": "delete", "table": "users", "id": "erin"},
        {"op": "put", "table": "follows", "id": "f3", "document": {"_from": "users/erin", "_to": "users/alice"}},
    ]});
    let r = s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await;
    assert!(r.is_problem(422, "invalid_document"), "{}", r.body);
    assert_eq!(r.body["operation"], 2);
    let ops = json!({"operations": [
        {"op": "patch", "table": "follows", "id": "f2", "document": {"_from": "users/nobody"}},
    ]});
    assert!(s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await.is_problem(422, "invalid_document"));

    // import: a line whose vertex is missing fails alone
    let body = concat!(
        r#"{"_id": "i1", "_from": "users/alice", "_to": "users/dave"}"#,
        "\n",
        r#"{"_id": "i2", "_from": "users/alice", "_to": "users/nobody"}"#,
        "\n",
        r#"{"_id": "i3", "_from": "nosuch/a", "_to": "users/dave"}"#,
        "\n",
        r#"{"_id": "i4", "_from": "users/carol", "_to": "users/carol"}"#,
        "\n",
    );
    let r = s.raw(Method::POST, "/v1/tables/follows/import", "application/x-ndjson", body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!((r.body["inserted"].as_u64(), r.body["failed"].as_u64()), (Some(2), Some(2)), "{}", r.body);
    let lines: Vec<(u64, &str)> = r.body["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["line"].as_u64().unwrap(), f["code"].as_str().unwrap()))
        .collect();
    assert_eq!(lines, [(2, "invalid_document"), (3, "invalid_document")]);
    s.check_ok().await;
}

#[tokio::test]
async fn deleting_a_vertex_is_refused_or_cascades_in_one_write() {
    let s = TestServer::start().await;
    s.create_table("users").await;
    s.create_table("posts").await;
    edge_table(&s, "follows", json!({"on_vertex_delete": "reject"})).await;
    edge_table(&s, "likes", json!({"on_vertex_delete": "cascade"})).await;
    // edges of edges: a tag on a like goes when the like goes
    edge_table(&s, "tags", json!({"on_vertex_delete": "cascade"})).await;
    let (_, def) = s.get("/v1/tables/follows").await;
    assert_eq!(def["on_vertex_delete"], "reject");
    let (_, def) = s.get("/v1/tables/likes").await;
    assert_eq!(def["on_vertex_delete"], "cascade");
    vertices(&s, "users", &["alice", "bob"]).await;
    vertices(&s, "posts", &["p1", "p2"]).await;
    edge(&s, "follows", "f1", "users/alice", "users/bob").await;
    edge(&s, "likes", "l1", "users/alice", "posts/p1").await;
    edge(&s, "likes", "l2", "users/bob", "users/alice").await;
    edge(&s, "likes", "l3", "users/alice", "users/alice").await;
    edge(&s, "likes", "l4", "users/bob", "posts/p2").await;
    edge(&s, "tags", "t1", "likes/l1", "posts/p2").await;

    let r = s.send(Method::DELETE, "/v1/tables/users/documents/alice", None, &[]).await;
    assert!(r.is_problem(409, "vertex_has_edges"), "{}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("follows/f1"), "{}", r.body);
    assert_eq!(s.get("/v1/tables/users/documents/alice").await.0, 200, "nothing was deleted");
    assert_eq!(s.get("/v1/tables/likes").await.1["documents"], 4);

    // in a batch, the edge deleted first frees the vertex; the other order is refused
    let ops = |first: Value, second: Value| json!({"operations": [first, second]});
    let del_alice = json!({"op": "delete", "table": "users", "id": "alice"});
    let del_f1 = json!({"op": "delete", "table": "follows", "id": "f1"});
    let r = s.send(Method::POST, "/v1/batch", Some(&ops(del_alice.clone(), del_f1.clone())), &[]).await;
    assert!(r.is_problem(409, "vertex_has_edges"), "{}", r.body);
    assert_eq!(r.body["operation"], 0);
    let r = s.send(Method::POST, "/v1/batch", Some(&ops(del_f1, del_alice)), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // alice's likes (out, in, the self-loop) went with her, and the tag on l1 with l1
    for gone in ["likes/documents/l1", "likes/documents/l2", "likes/documents/l3", "tags/documents/t1"] {
        assert_eq!(s.get(&format!("/v1/tables/{gone}")).await.0, 404, "{gone}");
    }
    assert_eq!(s.get("/v1/tables/likes/documents/l4").await.0, 200);
    assert_eq!(s.get("/v1/tables/likes").await.1["documents"], 1);
    assert_eq!(s.get("/v1/tables/tags").await.1["documents"], 0);
    assert!(all_neighbors(&s, "posts/p1", "any", "", 10).await.is_empty());
    assert_eq!(all_neighbors(&s, "posts/p2", "any", "", 10).await, [triple("users/bob", "likes/l4", "in")]);
    s.check_ok().await;

    // a vertex deleted in a batch cannot get an edge later in the batch
    let ops = json!({"operations": [
        {"op": "delete", "table": "posts", "id": "p2"},
        {"op": "put", "table": "likes", "id": "l9", "document": {"_from": "users/bob", "_to": "posts/p2"}},
    ]});
    let r = s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await;
    assert!(r.is_problem(422, "invalid_document"), "{}", r.body);
    assert_eq!(s.get("/v1/tables/likes/documents/l4").await.0, 200, "the batch wrote nothing");
    // a patch of an edge that a delete earlier in the batch cascaded away finds no document
    let ops = json!({"operations": [
        {"op": "put", "table": "users", "id": "cy", "document": {}},
        {"op": "put", "table": "likes", "id": "l5", "document": {"_from": "users/cy", "_to": "posts/p2"}},
    ]});
    assert_eq!(s.post("/v1/batch", ops).await.0, 200);
    let ops = json!({"operations": [
        {"op": "delete", "table": "users", "id": "cy"},
        {"op": "patch", "table": "likes", "id": "l5", "document": {"_from": "users/bob"}},
    ]});
    let r = s.send(Method::POST, "/v1/batch", Some(&ops), &[]).await;
    assert!(r.is_problem(404, "document_not_found"), "{}", r.body);
    assert_eq!(r.body["operation"], 1);
    assert_eq!(s.delete("/v1/tables/users/documents/cy").await.0, 204);
    // a plain delete cascades too
    assert_eq!(s.delete("/v1/tables/posts/documents/p2").await.0, 204);
    assert_eq!(s.get("/v1/tables/likes/documents/l4").await.0, 404);
    s.check_ok().await;

    // table options are for edge tables, and checked
    for bad in [
        json!({"name": "x", "on_vertex_delete": "cascade"}),
        json!({"name": "x", "weight_field": "km"}),
        json!({"name": "x", "kind": "edge", "weight_field": "_km"}),
    ] {
        let r = s.send(Method::POST, "/v1/tables", Some(&bad), &[]).await;
        assert!(r.is_problem(400, "invalid_request"), "{bad}: {}", r.body);
    }
    let r = s
        .send(
            Method::POST,
            "/v1/tables",
            Some(&json!({"name": "x", "kind": "edge", "on_vertex_delete": "nullify"})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "invalid_body"), "{}", r.body);
}

#[tokio::test]
async fn self_loops_parallel_edges_and_ids_with_slashes_and_colons() {
    let s = TestServer::start().await;
    s.create_table("v").await;
    edge_table(&s, "e", json!({"on_vertex_delete": "cascade"})).await;
    let (a, b, c) = ("a/b:c", "x:y/z", "plain");
    vertices(&s, "v", &[a, b, c]).await;
    let (va, vb, vc) = (format!("v/{a}"), format!("v/{b}"), format!("v/{c}"));
    edge(&s, "e", "loop/1", &va, &va).await;
    edge(&s, "e", "p:1", &va, &vb).await;
    edge(&s, "e", "p:2", &va, &vb).await;
    edge(&s, "e", "q", &vb, &vc).await;
    // the self-loop is met both ways; the parallel edges each once
    let got = all_neighbors(&s, &va, "any", "e", 1).await;
    assert_eq!(
        got,
        [
            triple(&va, "e/loop/1", "out"),
            triple(&vb, "e/p:1", "out"),
            triple(&vb, "e/p:2", "out"),
            triple(&va, "e/loop/1", "in"),
        ]
    );
    // a vertex `v/a` must not see `v/a/b:c`'s edges
    vertices(&s, "v", &["a"]).await;
    assert!(all_neighbors(&s, "v/a", "any", "", 5).await.is_empty());
    // two shortest paths of one hop (parallel edges), then the two-hop ones
    let (st, r) = s.post("/v1/graph/shortest-path", json!({"from": va, "to": vc, "k": 5})).await;
    assert_eq!(st, 200, "{r}");
    let paths: Vec<(Vec<Value>, Value)> = r["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["edges"].as_array().unwrap().clone(), p["cost"].clone()))
        .collect();
    assert_eq!(paths, [(vec![json!("e/p:1"), json!("e/q")], json!(2)), (vec![json!("e/p:2"), json!("e/q")], json!(2))]);
    assert_eq!(r["vertices"], json!([va, vb, vc]));
    assert_eq!(r["cost"], 2);
    // a traversal does not go round the loop
    let (st, t) = s.post("/v1/graph/traverse", json!({"start": va, "max_depth": 5, "min_depth": 0})).await;
    assert_eq!(st, 200, "{t}");
    let got: Vec<(String, u64)> = t["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["_id"].as_str().unwrap().to_owned(), v["depth"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, [(va.clone(), 0), (vb.clone(), 1), (vc.clone(), 2)]);
    // deleting the vertex with a self-loop cascades it once
    assert_eq!(s.delete(&format!("/v1/tables/v/documents/{}", seg(a))).await.0, 204);
    assert_eq!(s.get("/v1/tables/e").await.1["documents"], 1);
    s.check_ok().await;
}

#[tokio::test]
async fn neighbors_page_with_a_bound_cursor_and_refuse_bad_input() {
    let s = TestServer::start().await;
    s.create_table("u").await;
    edge_table(&s, "follows", json!({})).await;
    edge_table(&s, "likes", json!({})).await;
    let ids: Vec<String> = (0..30).map(|i| format!("n{i:02}")).collect();
    let mut all: Vec<&str> = ids.iter().map(String::as_str).collect();
    all.push("hub");
    vertices(&s, "u", &all).await;
    let mut want = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let (table, from, to) =
            if i % 3 == 0 { ("likes", "u/hub", format!("u/{id}")) } else { ("follows", "u/hub", format!("u/{id}")) };
        let (from, to) = if i % 2 == 0 { (from.to_owned(), to) } else { (to, from.to_owned()) };
        edge(&s, table, &format!("e{i:02}"), &from, &to).await;
        let other = if from == "u/hub" { to.clone() } else { from.clone() };
        want.push((table, if from == "u/hub" { 0 } else { 1 }, format!("e{i:02}"), other));
    }
    // the order: edge table as listed, out before in, then edge id
    let order = |tables: &[&str]| {
        let mut w: Vec<_> = want.iter().filter(|x| tables.contains(&x.0)).cloned().collect();
        w.sort_by_key(|(t, d, id, _)| (tables.iter().position(|x| x == t), *d, id.clone()));
        w.into_iter()
            .map(|(t, d, id, other)| {
                (other, format!("{t}/{id}"), if d == 0 { "out".to_owned() } else { "in".to_owned() })
            })
            .collect::<Vec<_>>()
    };
    for limit in [1, 7, 100] {
        assert_eq!(all_neighbors(&s, "u/hub", "any", "likes,follows", limit).await, order(&["likes", "follows"]));
        assert_eq!(all_neighbors(&s, "u/hub", "any", "", limit).await, order(&["follows", "likes"]));
    }
    let outs: Vec<_> = order(&["follows", "likes"]).into_iter().filter(|n| n.2 == "out").collect();
    assert_eq!(all_neighbors(&s, "u/hub", "out", "", 4).await, outs);

    // a cursor works only for the listing that made it
    let (_, page) = s.get("/v1/graph/neighbors?vertex=u/hub&direction=any&limit=3").await;
    let c = page["cursor"].as_str().unwrap().to_owned();
    for other in [
        format!("/v1/graph/neighbors?vertex=u/n00&direction=any&limit=3&cursor={c}"),
        format!("/v1/graph/neighbors?vertex=u/hub&direction=out&limit=3&cursor={c}"),
        format!("/v1/graph/neighbors?vertex=u/hub&direction=any&edges=likes&limit=3&cursor={c}"),
        "/v1/graph/neighbors?vertex=u/hub&cursor=garbage!".to_owned(),
    ] {
        let r = s.send(Method::GET, &other, None, &[]).await;
        assert!(r.is_problem(400, "invalid_cursor"), "{other}: {}", r.body);
    }
    for (path, status, code) in [
        ("/v1/graph/neighbors", 400, "invalid_query"),
        ("/v1/graph/neighbors?vertex=hub", 400, "invalid_request"),
        ("/v1/graph/neighbors?vertex=u/hub&limit=0", 400, "invalid_request"),
        ("/v1/graph/neighbors?vertex=u/hub&limit=1001", 400, "invalid_request"),
        ("/v1/graph/neighbors?vertex=u/hub&direction=up", 400, "invalid_query"),
        ("/v1/graph/neighbors?vertex=u/hub&edges=nosuch", 404, "table_not_found"),
        ("/v1/graph/neighbors?vertex=u/hub&edges=u", 400, "invalid_request"),
        ("/v1/graph/neighbors?vertex=u/nobody", 404, "document_not_found"),
        ("/v1/graph/neighbors?vertex=nosuch/x", 404, "table_not_found"),
    ] {
        let r = s.send(Method::GET, path, None, &[]).await;
        assert!(r.is_problem(status, code), "{path}: {}", r.body);
    }
}

/// users a..g: a → b → c → d, a → e → d, e → f (weak), g alone; `k` on each vertex.
async fn small_graph(s: &TestServer) {
    s.create_table("p").await;
    edge_table(s, "r", json!({"weight_field": "km"})).await;
    let docs: Vec<Value> = ["a", "b", "c", "d", "e", "f", "g"]
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"_id": id, "k": i, "name": id.to_uppercase()}))
        .collect();
    assert_eq!(s.post("/v1/tables/p/documents", json!(docs)).await.0, 201);
    for (id, from, to, km, strong) in [
        ("ab", "a", "b", 1, true),
        ("bc", "b", "c", 1, true),
        ("cd", "c", "d", 1, true),
        ("ae", "a", "e", 5, true),
        ("ed", "e", "d", 5, true),
        ("ef", "e", "f", 2, false),
    ] {
        let doc = json!({"_from": format!("p/{from}"), "_to": format!("p/{to}"), "km": km, "strong": strong, "toll": km * 10});
        assert_eq!(s.put(&format!("/v1/tables/r/documents/{id}"), doc).await.0, 201);
    }
}

fn ids_depths(t: &Value) -> Vec<(String, u64)> {
    t["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["_id"].as_str().unwrap().to_owned(), v["depth"].as_u64().unwrap()))
        .collect()
}

fn set(items: &[(&str, u64)]) -> BTreeSet<(String, u64)> {
    items.iter().map(|(v, d)| (format!("p/{v}"), *d)).collect()
}

#[tokio::test]
async fn traversals_walk_depth_windows_directions_and_filters() {
    let s = TestServer::start().await;
    small_graph(&s).await;
    let walk = |body: Value| {
        let s = &s;
        async move {
            let (st, t) = s.post("/v1/graph/traverse", body.clone()).await;
            assert_eq!(st, 200, "{body}: {t}");
            let got = ids_depths(&t);
            assert!(got.windows(2).all(|w| w[0].1 <= w[1].1), "breadth-first order: {got:?}");
            (got.into_iter().collect::<BTreeSet<_>>(), t)
        }
    };
    let (got, _) = walk(json!({"start": "p/a", "max_depth": 3})).await;
    assert_eq!(got, set(&[("b", 1), ("e", 1), ("c", 2), ("d", 2), ("f", 2)]));
    let (got, _) = walk(json!({"start": "p/a", "min_depth": 2, "max_depth": 2})).await;
    assert_eq!(got, set(&[("c", 2), ("d", 2), ("f", 2)]));
    let (got, _) = walk(json!({"start": "p/d", "direction": "in", "max_depth": 10, "min_depth": 0})).await;
    assert_eq!(got, set(&[("d", 0), ("c", 1), ("e", 1), ("b", 2), ("a", 2)]));
    let (got, _) = walk(json!({"start": "p/f", "direction": "any", "max_depth": 2})).await;
    assert_eq!(got, set(&[("e", 1), ("a", 2), ("d", 2)]));
    // a vertex filter prunes: c fails, so d is reached only through e
    let (got, _) = walk(json!({"start": "p/a", "max_depth": 3, "vertex_filter": {"k": {"$ne": 2}}})).await;
    assert_eq!(got, set(&[("b", 1), ("e", 1), ("d", 2), ("f", 2)]));
    // an edge filter: weak edges are not followed
    let (got, _) = walk(json!({"start": "p/a", "max_depth": 3, "edge_filter": {"strong": true}})).await;
    assert_eq!(got, set(&[("b", 1), ("e", 1), ("c", 2), ("d", 2)]));
    // every loop-free path: d is reached twice (a-b-c-d, a-e-d)
    let (_, t) = walk(json!({"start": "p/a", "max_depth": 3, "unique_vertices": false, "return": "paths"})).await;
    let mut got = ids_depths(&t);
    got.sort();
    let want: Vec<(String, u64)> = [("b", 1), ("c", 2), ("d", 2), ("d", 3), ("e", 1), ("f", 2)]
        .iter()
        .map(|(v, d)| (format!("p/{v}"), *d))
        .collect();
    assert_eq!(got, want);
    for (v, p) in t["vertices"].as_array().unwrap().iter().zip(t["paths"].as_array().unwrap()) {
        let vs = p["vertices"].as_array().unwrap();
        assert_eq!(vs.first().unwrap(), "p/a");
        assert_eq!(vs.last().unwrap(), &v["_id"]);
        assert_eq!(p["edges"].as_array().unwrap().len() as u64, v["depth"].as_u64().unwrap());
    }
    // fields: projected, or the whole document; limit stops the walk
    let (_, t) = walk(json!({"start": "p/a", "fields": ["name"], "limit": 1})).await;
    assert_eq!(t["vertices"].as_array().unwrap().len(), 1);
    assert_eq!(t["vertices"][0], json!({"_id": "p/b", "depth": 1, "document": {"_id": "b", "name": "B"}}));
    let (_, t) = walk(json!({"start": "p/a", "fields": ["*"], "max_depth": 1})).await;
    assert!(t["vertices"].as_array().unwrap().iter().all(|v| v["document"]["k"].is_number()), "{t}");
    assert!(t.get("paths").is_none());
    // bounded: past max_visited the walk stops with 422
    let r = s
        .send(Method::POST, "/v1/graph/traverse", Some(&json!({"start": "p/a", "max_depth": 5, "max_visited": 3})), &[])
        .await;
    assert!(r.is_problem(422, "max_visited_exceeded"), "{}", r.body);
    for (body, status, code) in [
        (json!({"start": "p/a", "min_depth": 3, "max_depth": 2}), 400, "invalid_request"),
        (json!({"start": "p/a", "max_depth": 1001}), 400, "invalid_request"),
        (json!({"start": "p/a", "limit": 0}), 400, "invalid_request"),
        (json!({"start": "p/a", "max_visited": 0}), 400, "invalid_request"),
        (json!({"start": "p/a", "vertex_filter": {"$foo": 1}}), 400, "invalid_filter"),
        (json!({"start": "p/a", "edge_filter": [1]}), 400, "invalid_filter"),
        (json!({"start": "p/a", "fields": ["a..b"]}), 400, "invalid_request"),
        (json!({"start": "p/a", "edges": ["p"]}), 400, "invalid_request"),
        (json!({"start": "p/zz"}), 404, "document_not_found"),
        (json!({"start": "p/a", "edges": ["nope"]}), 404, "table_not_found"),
        (json!({"start": "p/a", "depth": 2}), 422, "invalid_body"),
        (json!({"start": "p/a", "direction": "sideways"}), 422, "invalid_body"),
    ] {
        let r = s.send(Method::POST, "/v1/graph/traverse", Some(&body), &[]).await;
        assert!(r.is_problem(status, code), "{body}: {}", r.body);
    }
}

#[tokio::test]
async fn shortest_paths_by_hops_weight_and_k() {
    let s = TestServer::start().await;
    small_graph(&s).await;
    let path = |body: Value| {
        let s = &s;
        async move {
            let (st, p) = s.post("/v1/graph/shortest-path", body.clone()).await;
            assert_eq!(st, 200, "{body}: {p}");
            p
        }
    };
    let p = path(json!({"from": "p/a", "to": "p/d"})).await;
    assert_eq!(
        (p["vertices"].clone(), p["edges"].clone(), p["cost"].clone()),
        (json!(["p/a", "p/e", "p/d"]), json!(["r/ae", "r/ed"]), json!(2))
    );
    assert_eq!(p["paths"][0]["edges"], p["edges"]);
    // by the declared weight field (from the adjacency) and by another field (from the documents)
    let p = path(json!({"from": "p/a", "to": "p/d", "weight": "km"})).await;
    assert_eq!((p["edges"].clone(), p["cost"].clone()), (json!(["r/ab", "r/bc", "r/cd"]), json!(3)));
    let p = path(json!({"from": "p/a", "to": "p/d", "weight": "toll"})).await;
    assert_eq!((p["edges"].clone(), p["cost"].clone()), (json!(["r/ab", "r/bc", "r/cd"]), json!(30)));
    // k paths, cheapest first
    let p = path(json!({"from": "p/a", "to": "p/d", "weight": "km", "k": 5})).await;
    let costs: Vec<&Value> = p["paths"].as_array().unwrap().iter().map(|p| &p["cost"]).collect();
    assert_eq!(costs, [&json!(3), &json!(10)]);
    let p = path(json!({"from": "p/d", "to": "p/f", "direction": "any", "k": 3})).await;
    assert_eq!(p["paths"].as_array().unwrap().iter().map(|p| p["cost"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 5]);
    let p = path(json!({"from": "p/a", "to": "p/a"})).await;
    assert_eq!((p["vertices"].clone(), p["cost"].clone()), (json!(["p/a"]), json!(0)));
    let r = s.send(Method::POST, "/v1/graph/shortest-path", Some(&json!({"from": "p/a", "to": "p/g"})), &[]).await;
    assert!(r.is_problem(404, "no_path"), "{}", r.body);
    let r = s.send(Method::POST, "/v1/graph/shortest-path", Some(&json!({"from": "p/d", "to": "p/a"})), &[]).await;
    assert!(r.is_problem(404, "no_path"), "{}", r.body);

    // the declared weight field is enforced on writes
    for bad in [json!(-1), json!("far"), json!(null)] {
        let r = s
            .send(Method::PUT, "/v1/tables/r/documents/x", Some(&json!({"_from": "p/a", "_to": "p/g", "km": bad})), &[])
            .await;
        assert!(r.is_problem(422, "schema_violation"), "{bad}: {}", r.body);
    }
    // an undeclared weight that is negative or not a number is refused when the walk meets it
    let doc = json!({"_from": "p/f", "_to": "p/g", "km": 1, "toll": -4, "label": "x"});
    assert_eq!(s.put("/v1/tables/r/documents/fg", doc).await.0, 201);
    for weight in ["toll", "label", "missing"] {
        let r = s
            .send(
                Method::POST,
                "/v1/graph/shortest-path",
                Some(&json!({"from": "p/f", "to": "p/g", "weight": weight})),
                &[],
            )
            .await;
        assert!(r.is_problem(422, "invalid_weight"), "{weight}: {}", r.body);
    }
    let r = s
        .send(
            Method::POST,
            "/v1/graph/shortest-path",
            Some(&json!({"from": "p/a", "to": "p/g", "max_visited": 2})),
            &[],
        )
        .await;
    assert!(r.is_problem(422, "max_visited_exceeded"), "{}", r.body);
    for (body, status, code) in [
        (json!({"from": "p/a", "to": "p/d", "k": 0}), 400, "invalid_request"),
        (json!({"from": "p/a", "to": "p/d", "k": 33}), 400, "invalid_request"),
        (json!({"from": "p/a", "to": "p/d", "weight": ""}), 400, "invalid_request"),
        (json!({"from": "a", "to": "p/d"}), 400, "invalid_request"),
        (json!({"from": "p/a", "to": "p/nobody"}), 404, "document_not_found"),
        (json!({"from": "p/a"}), 422, "invalid_body"),
    ] {
        let r = s.send(Method::POST, "/v1/graph/shortest-path", Some(&body), &[]).await;
        assert!(r.is_problem(status, code), "{body}: {}", r.body);
    }
    s.check_ok().await;
}

/// Adjacency is the only graph state: after a restart every answer is the same.
#[tokio::test]
async fn answers_survive_a_restart() {
    let s = TestServer::start().await;
    small_graph(&s).await;
    async fn ask(s: &TestServer) -> (Value, Value) {
        let t = s.post("/v1/graph/traverse", json!({"start": "p/a", "max_depth": 3, "direction": "any"})).await.1;
        let p = s.post("/v1/graph/shortest-path", json!({"from": "p/a", "to": "p/d", "weight": "km", "k": 3})).await.1;
        (t, p)
    }
    let before = ask(&s).await;
    assert_eq!(before.1["paths"].as_array().unwrap().len(), 2, "{:?}", before);
    let s = TestServer::start_in(s.stop().await, |_| {}).await;
    assert_eq!(ask(&s).await, before);
    s.check_ok().await;
}

/// The graph walk-through of docs/graph.md answers as it says.
#[tokio::test]
async fn the_readme_walkthrough_answers_as_documented() {
    let s = TestServer::start().await;
    s.create_table("cities").await;
    edge_table(&s, "roads", json!({"on_vertex_delete": "cascade", "weight_field": "km"})).await;
    let cities = json!([{"_id": "oslo", "pop": 700000}, {"_id": "gol", "pop": 5000}, {"_id": "bergen", "pop": 290000}]);
    assert_eq!(s.post("/v1/tables/cities/documents", cities).await.0, 201);
    let roads = json!([
        {"_id": "r1", "_from": "cities/oslo", "_to": "cities/gol", "km": 200, "toll": 0},
        {"_id": "r2", "_from": "cities/gol", "_to": "cities/bergen", "km": 270, "toll": 40},
        {"_id": "r3", "_from": "cities/oslo", "_to": "cities/bergen", "km": 520, "toll": 0}]);
    assert_eq!(s.post("/v1/tables/roads/documents", roads).await.0, 201);
    let (_, n) = s.get("/v1/graph/neighbors?vertex=cities/oslo&direction=out&edges=roads&limit=100").await;
    assert_eq!(
        n,
        json!({"neighbors": [{"vertex": "cities/gol", "edge": "roads/r1", "direction": "out"},
            {"vertex": "cities/bergen", "edge": "roads/r3", "direction": "out"}], "cursor": null})
    );
    let body = json!({"start": "cities/oslo", "direction": "any", "max_depth": 2,
        "vertex_filter": {"pop": {"$gt": 10000}}, "return": "paths", "fields": ["pop"]});
    let (_, t) = s.post("/v1/graph/traverse", body).await;
    assert_eq!(
        t,
        json!({"vertices": [{"_id": "cities/bergen", "depth": 1, "document": {"_id": "bergen", "pop": 290000}}],
            "paths": [{"vertices": ["cities/oslo", "cities/bergen"], "edges": ["roads/r3"]}]})
    );
    let (_, p) = s.post("/v1/graph/shortest-path", json!({"from": "cities/oslo", "to": "cities/bergen"})).await;
    assert_eq!((p["edges"].clone(), p["cost"].clone()), (json!(["roads/r3"]), json!(1)));
    let body = json!({"from": "cities/oslo", "to": "cities/bergen", "weight": "km", "k": 2});
    let (_, p) = s.post("/v1/graph/shortest-path", body).await;
    let costs: Vec<&Value> = p["paths"].as_array().unwrap().iter().map(|p| &p["cost"]).collect();
    assert_eq!(costs, [&json!(470), &json!(520)]);
    assert_eq!(s.delete("/v1/tables/cities/documents/gol").await.0, 204);
    assert_eq!(s.get("/v1/tables/roads").await.1["documents"], 1);
    s.check_ok().await;
}
