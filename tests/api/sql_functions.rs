//! The models as SQL table functions: `search`, `knn`, `hybrid_search` and `traverse` answer
//! exactly as their routes do (same rows, same order, same scores), a filtered kNN returns k rows
//! whenever k documents match, bad calls answer their codes, and the cross-model question of
//! docs/sql.md (kNN ∩ full-text ∩ within two hops, joined with the authors) answers as the
//! same question assembled from the routes and brute force.

use crate::common::{Rng, TestServer};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const WORDS: [&str; 7] = ["graph", "database", "vector", "query", "engine", "storage", "index"];
const PAPERS: u64 = 80;
const PEOPLE: u64 = 12;

async fn rows(s: &TestServer, statement: &str, params: Value) -> Value {
    let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement, "params": params})), &[]).await;
    assert_eq!(r.status, 200, "{statement}: {}", r.body);
    r.body["rows"].clone()
}

async fn insert(s: &TestServer, table: &str, docs: Vec<Value>) {
    let r = s.send(Method::POST, &format!("/v1/tables/{table}/documents"), Some(&Value::Array(docs)), &[]).await;
    assert!(r.status.is_success(), "{}", r.body);
}

/// Papers with titles, years and 3-d embeddings; people who `wrote` them and `knows` each other.
struct World {
    papers: Vec<Value>,
    wrote: Vec<(u64, u64)>,
    knows: Vec<(u64, u64)>,
}

fn world() -> World {
    let mut rng = Rng(0x517a_b1e5);
    let papers = (0..PAPERS)
        .map(|i| {
            let title: Vec<&str> = (0..3).map(|_| WORDS[rng.below(WORDS.len() as u64) as usize]).collect();
            let e: Vec<f64> = (0..3).map(|_| (rng.below(2000) as f64 - 1000.0) / 997.0).collect();
            json!({"_id": format!("p{i:02}"), "title": title.join(" "), "year": 2015 + rng.below(10),
                "embedding": e})
        })
        .collect();
    let wrote = (0..PAPERS).map(|p| (rng.below(PEOPLE), p)).collect();
    let knows = (0..18).map(|_| (rng.below(PEOPLE), rng.below(PEOPLE))).filter(|(a, b)| a != b).collect();
    World { papers, wrote, knows }
}

async fn load(s: &TestServer, w: &World) {
    for t in ["papers", "people"] {
        s.create_table(t).await;
    }
    for t in ["wrote", "knows"] {
        assert_eq!(s.post("/v1/tables", json!({"name": t, "kind": "edge"})).await.0, 201);
    }
    insert(s, "papers", w.papers.clone()).await;
    insert(s, "people", (0..PEOPLE).map(|i| json!({"_id": format!("m{i:02}"), "name": format!("Name{i}")})).collect())
        .await;
    let edges = |list: &[(u64, u64)], from: &str, to: &str| -> Vec<Value> {
        list.iter()
            .map(|(a, b)| json!({"_from": format!("people/{from}{a:02}"), "_to": format!("{to}{b:02}")}))
            .collect()
    };
    insert(s, "wrote", edges(&w.wrote, "m", "papers/p")).await;
    insert(s, "knows", edges(&w.knows, "m", "people/m")).await;
    for (name, body) in [
        ("ft", json!({"name": "ft", "kind": "fulltext", "fields": ["title"]})),
        (
            "emb",
            json!({"name": "emb", "kind": "vector", "fields": ["embedding"], "options": {"dimension": 3, "metric": "l2"}}),
        ),
    ] {
        let (st, b) = s.post("/v1/tables/papers/indexes", body).await;
        assert!(st.is_success(), "{b}");
        assert_eq!(s.index_settled("papers", name).await["state"], "ready");
    }
}

/// A route's hits as rows `[_id, number]` (`key`: `score` or `distance`).
fn hits(answer: &Value, list: &str, key: &str) -> Value {
    let rows: Vec<Value> =
        answer[list].as_array().unwrap().iter().map(|h| json!([h["_id"], h[key].as_f64().map(|f| f as f32)])).collect();
    Value::Array(rows)
}

/// Rows with their second column rounded to f32, as the route's hits are.
fn rounded(rows: &Value) -> Value {
    rows.as_array().unwrap().iter().map(|r| json!([r[0], r[1].as_f64().map(|f| f as f32)])).collect()
}

#[tokio::test]
async fn each_function_answers_as_its_route() {
    let s = TestServer::start().await;
    let w = world();
    load(&s, &w).await;
    // full-text search
    let (st, route) = s.post("/v1/tables/papers/search", json!({"query": "graph database", "limit": 20})).await;
    assert_eq!(st, 200, "{route}");
    let sql = rows(&s, "SELECT _id, score FROM search('papers', 'graph database', 20)", json!([])).await;
    assert_eq!(rounded(&sql), hits(&route, "hits", "score"));
    assert!(!sql.as_array().unwrap().is_empty());
    // kNN with a filter: k rows whenever k match, as the route
    let filter = json!({"year": {"$gte": 2022}});
    let body = json!({"field": "embedding", "vector": [0.1, 0.2, 0.3], "k": 7, "filter": filter});
    let (st, route) = s.post("/v1/tables/papers/vector-search", body).await;
    assert_eq!(st, 200, "{route}");
    let statement = "SELECT _id, distance FROM knn('papers', 'embedding', $1, 7, $2)";
    let sql = rows(&s, statement, json!(["[0.1, 0.2, 0.3]", json!({"filter": filter}).to_string()])).await;
    assert_eq!(rounded(&sql), hits(&route, "hits", "distance"));
    assert_eq!(sql.as_array().unwrap().len(), 7);
    // the vector as an SQL array, and the documents
    let docs =
        rows(&s, "SELECT _id, (doc->>'year')::int FROM knn('papers', 'embedding', [0.1, 0.2, 0.3], 3)", json!([]))
            .await;
    assert_eq!(docs.as_array().unwrap().len(), 3);
    assert!(docs.as_array().unwrap().iter().all(|r| r[1].as_i64().is_some_and(|y| (2015..2025).contains(&y))));
    // hybrid search
    let body = json!({"query": "vector index", "vector": {"field": "embedding", "vector": [1, 0, 0]}, "limit": 10});
    let (st, route) = s.post("/v1/tables/papers/search", body).await;
    assert_eq!(st, 200, "{route}");
    let sql = rows(
        &s,
        "SELECT _id, score FROM hybrid_search('papers', 'vector index', 'embedding', '[1, 0, 0]', 10)",
        json!([]),
    )
    .await;
    assert_eq!(rounded(&sql), hits(&route, "hits", "score"));
    // a traversal
    let body = json!({"start": "people/m00", "direction": "any", "min_depth": 1, "max_depth": 3, "edges": ["knows"]});
    let (st, route) = s.post("/v1/graph/traverse", body).await;
    assert_eq!(st, 200, "{route}");
    let sql = rows(
        &s,
        "SELECT vertex, depth, _table, _id, doc->>'name' FROM traverse('people/m00', 'any', 1, 3, '{\"edges\": [\"knows\"]}')",
        json!([]),
    )
    .await;
    let expected: Vec<Value> = route["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let id = v["_id"].as_str().unwrap();
            let n: u64 = id[8..].parse().unwrap();
            json!([id, v["depth"], "people", &id[7..], format!("Name{n}")])
        })
        .collect();
    assert_eq!(sql, Value::Array(expected));
}

#[tokio::test]
async fn bad_calls_answer_their_codes() {
    let s = TestServer::start().await;
    load(&s, &world()).await;
    for (statement, status, code) in [
        ("SELECT * FROM search('papers')", 400, "invalid_sql"),
        ("SELECT * FROM search('papers', 'x', 10, '{\"bogus\": 1}')", 400, "invalid_sql"),
        ("SELECT * FROM search('papers', 'x', 10, '[1]')", 400, "invalid_sql"),
        ("SELECT * FROM search('papers', 'x', 10, '{\"limit\": 3}')", 400, "invalid_sql"),
        ("SELECT * FROM search('papers', doc)", 400, "invalid_sql"),
        ("SELECT * FROM search('papers', $1)", 400, "invalid_sql"),
        ("SELECT * FROM knn('papers', 'embedding', 'not a vector')", 400, "invalid_sql"),
        ("SELECT * FROM knn('papers', 'embedding', '[1, 2]')", 400, "invalid_request"),
        ("SELECT * FROM knn('papers', 'embedding', '[1, 2, 3]', 5000)", 400, "invalid_request"),
        ("SELECT * FROM search('nope', 'x')", 404, "table_not_found"),
        ("SELECT * FROM traverse('people/m00', 'sideways')", 400, "invalid_sql"),
    ] {
        let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement})), &[]).await;
        assert!(r.is_problem(status, code), "{statement}: {} {}", r.status, r.body);
    }
}

/// The cross-model question of docs/sql.md, in one statement.
const QUESTION: &str = "
WITH near AS (SELECT _id, distance FROM knn('papers', 'embedding', $1, 100, '{\"exact\": true}')),
     matching AS (SELECT _id FROM search('papers', 'graph database', 1000)),
     circle AS (SELECT _id FROM traverse('people/m00', 'any', 1, 2, '{\"edges\": [\"knows\"]}'))
SELECT p._id, p.doc->>'title' AS title, a.doc->>'name' AS author, n.distance
FROM near n
JOIN matching m ON m._id = n._id
JOIN papers p ON p._id = n._id
JOIN wrote w ON w._to = 'papers/' || p._id
JOIN people a ON 'people/' || a._id = w._from
JOIN circle c ON c._id = a._id
WHERE (p.doc->>'year')::int >= 2020
ORDER BY n.distance, p._id
LIMIT 10";

#[tokio::test]
async fn one_statement_answers_across_search_vectors_graph_and_tables() {
    let s = TestServer::start().await;
    let w = world();
    load(&s, &w).await;
    let query = [0.3, -0.2, 0.5];
    let sql = rows(&s, QUESTION, json!([json!(query).to_string()])).await;
    // brute force: the circle within two hops, the matching titles, exact distances
    let mut circle = BTreeSet::new();
    let mut frontier = BTreeSet::from([0u64]);
    for _ in 0..2 {
        let mut next = BTreeSet::new();
        for (a, b) in &w.knows {
            for (x, y) in [(a, b), (b, a)] {
                if frontier.contains(x) && *y != 0 && !circle.contains(y) {
                    next.insert(*y);
                }
            }
        }
        circle.extend(next.iter().copied());
        frontier = next;
    }
    let author: BTreeMap<u64, u64> = w.wrote.iter().map(|(m, p)| (*p, *m)).collect();
    let mut expected: Vec<(f64, String, String, String)> = w
        .papers
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let title = p["title"].as_str().unwrap();
            let words: Vec<&str> = title.split(' ').collect();
            let matches = words.contains(&"graph") || words.contains(&"database");
            let m = author[&(i as u64)];
            if !matches || p["year"].as_u64().unwrap() < 2020 || !circle.contains(&m) {
                return None;
            }
            let e: Vec<f64> = p["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            let d = e.iter().zip(query).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
            Some((d, format!("p{i:02}"), title.to_owned(), format!("Name{m}")))
        })
        .collect();
    expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    expected.truncate(10);
    assert!(!expected.is_empty(), "the generated world has no answer to the question");
    let got: Vec<(String, String, String)> = sql
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().into(), r[1].as_str().unwrap().into(), r[2].as_str().unwrap().into()))
        .collect();
    let want: Vec<(String, String, String)> =
        expected.iter().map(|e| (e.1.clone(), e.2.clone(), e.3.clone())).collect();
    assert_eq!(got, want);
    for (row, e) in sql.as_array().unwrap().iter().zip(&expected) {
        assert!((row[3].as_f64().unwrap() - e.0).abs() < 1e-5, "{row} vs {}", e.0);
    }
}

#[tokio::test]
async fn graph_history_time_series_and_as_of_answer_as_their_routes() {
    let s = TestServer::start().await;
    let w = world();
    load(&s, &w).await;
    // neighbors
    let (st, route) = s.get("/v1/graph/neighbors?vertex=people%2Fm00&direction=any&edges=knows&limit=1000").await;
    assert_eq!(st, 200, "{route}");
    let sql = rows(&s, "SELECT vertex, edge, direction FROM neighbors('people/m00', 'any', '{\"edges\": [\"knows\"], \"limit\": 1000}')", json!([])).await;
    let expected: Vec<Value> = route["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| json!([n["vertex"], n["edge"], n["direction"]]))
        .collect();
    assert_eq!(sql, Value::Array(expected));
    // shortest paths: the route's paths, ranked
    let target = route["neighbors"][0]["vertex"].as_str().unwrap_or("people/m01").to_owned();
    let body = json!({"from": "people/m00", "to": target, "direction": "any", "k": 3});
    let (st, route) = s.post("/v1/graph/shortest-path", body).await;
    assert_eq!(st, 200, "{route}");
    let sql = rows(&s, "SELECT path, cost, vertices, edges FROM shortest_paths('people/m00', $1, 3, '{\"direction\": \"any\"}') ORDER BY path", json!([target])).await;
    let expected: Vec<Value> = route["paths"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, p)| json!([i + 1, p["cost"].as_f64(), p["vertices"], p["edges"]]))
        .collect();
    assert_eq!(sql, Value::Array(expected));
    // history, and a table as it was
    assert_eq!(s.post("/v1/tables", json!({"name": "h", "history": {"max_versions": 10}})).await.0, 201);
    insert(&s, "h", vec![json!({"_id": "a", "v": 1}), json!({"_id": "b", "v": 1})]).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    insert(&s, "h", vec![json!({"_id": "a", "v": 2}), json!({"_id": "c", "v": 2})]).await;
    let (st, route) = s.get("/v1/tables/h/documents/a/history").await;
    assert_eq!(st, 200, "{route}");
    let sql =
        rows(&s, "SELECT op, current, etag, (doc->'v')::int, at IS NOT NULL FROM history('h', 'a')", json!([])).await;
    let expected: Vec<Value> = route["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| json!([v["op"], v["current"], v["etag"], v["document"]["v"], true]))
        .collect();
    assert_eq!(sql, Value::Array(expected));
    assert_eq!(sql.as_array().unwrap().len(), 2);
    let then = rows(&s, "SELECT _id, (doc->'v')::int FROM as_of('h', $1) ORDER BY _id", json!([between])).await;
    assert_eq!(then, json!([["a", 1], ["b", 1]]));
    let now = rows(&s, "SELECT _id, (doc->'v')::int FROM h ORDER BY _id", json!([])).await;
    assert_eq!(now, json!([["a", 2], ["b", 1], ["c", 2]]));
    let filtered = rows(&s, "SELECT _id FROM as_of('h', $1) WHERE _id = 'a'", json!([between])).await;
    assert_eq!(filtered, json!([["a"]]));
    // time series points
    let points: Vec<Value> =
        (0..50).map(|i| json!({"entity": format!("s{}", i % 3), "ts": 1000 * i, "value": i})).collect();
    let (st, r) = s.post("/v1/timeseries/cpu/points", json!({"points": points})).await;
    assert!(st.is_success(), "{r}");
    let (st, route) = s.get("/v1/timeseries/cpu/points?from=5000&to=40000").await;
    assert_eq!(st, 200, "{route}");
    let sql = rows(&s, "SELECT entity, ts, value FROM series('cpu', 5000, 40000)", json!([])).await;
    let expected: Vec<Value> = route["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let ts = chrono_free_rfc3339(p["ts"].as_i64().unwrap());
            json!([p["entity"], ts, p["value"].as_f64()])
        })
        .collect();
    assert_eq!(sql, Value::Array(expected));
    let agg = rows(&s, "SELECT entity, count(*), sum(value) FROM series('cpu') GROUP BY 1 ORDER BY 1", json!([])).await;
    assert_eq!(agg, json!([["s0", 17, 408.0], ["s1", 17, 425.0], ["s2", 16, 392.0]]));
    for (statement, status, code) in [
        ("SELECT * FROM as_of('h')", 400, "invalid_sql"),
        ("SELECT * FROM as_of('nope', 0)", 400, "invalid_sql"),
        ("SELECT * FROM history('nope', 'a')", 404, "table_not_found"),
        ("SELECT * FROM series('nope')", 404, "metric_not_found"),
        ("SELECT * FROM neighbors('nope')", 400, "invalid_request"),
    ] {
        let r = s.send(Method::POST, "/v1/sql", Some(&json!({"sql": statement})), &[]).await;
        assert!(r.is_problem(status, code), "{statement}: {} {}", r.status, r.body);
    }
}

/// A time of ms since the epoch as the SQL answer writes a `timestamptz` (whole seconds here).
fn chrono_free_rfc3339(ms: i64) -> String {
    let secs = ms / 1000;
    format!("1970-01-01T00:00:{secs:02}Z")
}
