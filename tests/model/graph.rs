//! Model-based test of the graph: random vertex and edge writes (PUT, PATCH with both content
//! types moving endpoints, DELETE with reject and cascade, batch, import) go to the server and to
//! a plain in-memory graph written here; every answer — write statuses, neighbours in order,
//! traversals (directions, depth windows, filters, unique vertices or every loop-free path) and
//! shortest paths (hops, weighted, k paths) — must agree exactly, and `check` must pass.

use crate::common;
use crate::common::model::Rng;
use common::{TestServer, seg};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// Vertices: `table/id`, ids with `/` and `:` among them.
const VERTICES: &[&str] = &["v/a", "v/b/1", "v/c:2", "w/d", "w/a/b", "v/e:f/g", "w/h", "v/i"];
/// Edge ids (each edge table has its own).
const EDGE_IDS: &[&str] = &["e0", "e1", "e2", "x/1", "y:2", "e5", "e6", "e7", "e8", "z"];
/// `e`: cascade, declared weight field `w`; `f`: reject, `w` an ordinary field.
const EDGE_TABLES: &[&str] = &["e", "f"];

#[derive(Debug, Clone, PartialEq)]
struct Edge {
    from: String,
    to: String,
    w: i64,
    strong: bool,
}

#[derive(Debug, Clone, Default)]
struct Graph {
    /// vertex → its `k`
    vertices: BTreeMap<String, i64>,
    /// (edge table, id) → edge
    edges: BTreeMap<(String, String), Edge>,
}

/// A write's expected outcome: the success status, or the failure status and code.
type Expect = Result<u16, (u16, &'static str)>;

impl Graph {
    fn put_vertex(&mut self, v: &str, k: i64) -> Expect {
        let created = self.vertices.insert(v.to_owned(), k).is_none();
        Ok(if created { 201 } else { 200 })
    }

    fn delete_vertex(&mut self, v: &str) -> Expect {
        if !self.vertices.contains_key(v) {
            return Err((404, "document_not_found"));
        }
        let touches = |e: &Edge| e.from == v || e.to == v;
        if self.edges.iter().any(|((t, _), e)| t == "f" && touches(e)) {
            return Err((409, "vertex_has_edges"));
        }
        self.vertices.remove(v);
        self.edges.retain(|_, e| !touches(e));
        Ok(204)
    }

    fn put_edge(&mut self, table: &str, id: &str, e: Edge) -> Expect {
        if !self.vertices.contains_key(&e.from) || !self.vertices.contains_key(&e.to) {
            return Err((422, "invalid_document"));
        }
        let created = self.edges.insert((table.to_owned(), id.to_owned()), e).is_none();
        Ok(if created { 201 } else { 200 })
    }

    fn patch_edge(&mut self, table: &str, id: &str, patch: &Value) -> Expect {
        let Some(mut e) = self.edges.get(&(table.to_owned(), id.to_owned())).cloned() else {
            return Err((404, "document_not_found"));
        };
        if let Some(f) = patch["_from"].as_str() {
            e.from = f.to_owned();
        }
        if let Some(t) = patch["_to"].as_str() {
            e.to = t.to_owned();
        }
        if let Some(w) = patch["w"].as_i64() {
            e.w = w;
        }
        self.put_edge(table, id, e).map(|_| 200)
    }

    fn delete_edge(&mut self, table: &str, id: &str) -> Expect {
        match self.edges.remove(&(table.to_owned(), id.to_owned())) {
            Some(_) => Ok(204),
            None => Err((404, "document_not_found")),
        }
    }

    /// The steps from `v`: (edge "t/id", other vertex, "out"|"in", edge), in the server's order
    /// (edge table as listed, out before in, edge id bytewise).
    fn steps(&self, v: &str, dir: &str, tables: &[&str]) -> Vec<(String, String, &'static str, Edge)> {
        let mut out = Vec::new();
        for t in tables {
            for d in ["out", "in"] {
                if dir != "any" && dir != d {
                    continue;
                }
                for ((et, id), e) in &self.edges {
                    if et != t {
                        continue;
                    }
                    let (at, other) = if d == "out" { (&e.from, &e.to) } else { (&e.to, &e.from) };
                    if at == v {
                        out.push((format!("{t}/{id}"), other.clone(), d, e.clone()));
                    }
                }
            }
        }
        out
    }
}

fn vertex_path(v: &str) -> String {
    let (t, id) = v.split_once('/').unwrap();
    format!("/v1/tables/{t}/documents/{}", seg(id))
}

fn edge_doc(rng: &mut Rng, from: &str, to: &str) -> (Edge, Value) {
    let (w, strong) = (rng.below(5) as i64, rng.chance(70));
    (Edge { from: from.into(), to: to.into(), w, strong }, json!({"_from": from, "_to": to, "w": w, "strong": strong}))
}

struct Run {
    s: TestServer,
    g: Graph,
    rng: Rng,
    seed: u64,
    counts: BTreeMap<&'static str, usize>,
}

impl Run {
    fn check(&mut self, what: &str, r: &common::Reply, want: Expect) {
        match want {
            Ok(status) => assert_eq!(r.status.as_u16(), status, "seed {}: {what}: {}", self.seed, r.body),
            Err((status, code)) => {
                assert!(r.is_problem(status, code), "seed {}: {what}: want {status} {code}, got {}", self.seed, r.body)
            }
        }
        *self.counts.entry(if want.is_ok() { "ok" } else { "refused" }).or_default() += 1;
    }

    fn vertex(&mut self) -> String {
        self.rng.pick(VERTICES).to_string()
    }

    async fn write(&mut self) {
        let (table, id) = (*self.rng.pick(EDGE_TABLES), *self.rng.pick(EDGE_IDS));
        let edge_path = format!("/v1/tables/{table}/documents/{}", seg(id));
        match self.rng.below(20) {
            0..=4 => {
                let v = self.vertex();
                let k = self.rng.below(5) as i64;
                let r = self.s.send(Method::PUT, &vertex_path(&v), Some(&json!({"k": k})), &[]).await;
                let want = self.g.put_vertex(&v, k);
                self.check(&format!("put vertex {v}"), &r, want);
            }
            5..=7 => {
                let v = self.vertex();
                let r = self.s.send(Method::DELETE, &vertex_path(&v), None, &[]).await;
                let edges_before = self.g.edges.len();
                let want = self.g.delete_vertex(&v);
                if self.g.edges.len() < edges_before {
                    *self.counts.entry("cascades").or_default() += 1;
                }
                *self
                    .counts
                    .entry(match want {
                        Ok(_) => "vertex deleted",
                        Err((409, _)) => "vertex delete refused",
                        Err(_) => "vertex missing",
                    })
                    .or_default() += 1;
                self.check(&format!("delete vertex {v}"), &r, want);
            }
            8..=12 => {
                let (from, to) = (self.vertex(), self.vertex());
                let (e, doc) = edge_doc(&mut self.rng, &from, &to);
                let r = self.s.send(Method::PUT, &edge_path, Some(&doc), &[]).await;
                let want = self.g.put_edge(table, id, e);
                self.check(&format!("put edge {table}/{id} {doc}"), &r, want);
            }
            13..=15 => {
                let mut patch = json!({});
                match self.rng.below(3) {
                    0 => patch["_from"] = json!(self.vertex()),
                    1 => patch["_to"] = json!(self.vertex()),
                    _ => patch["w"] = json!(self.rng.below(5)),
                }
                let ct = if self.rng.chance(50) { "application/json" } else { "application/merge-patch+json" };
                let r = self.s.raw(Method::PATCH, &edge_path, ct, patch.to_string()).await;
                let want = self.g.patch_edge(table, id, &patch);
                self.check(&format!("patch edge {table}/{id} {patch} ({ct})"), &r, want);
            }
            16 => {
                let r = self.s.send(Method::DELETE, &edge_path, None, &[]).await;
                let want = self.g.delete_edge(table, id);
                self.check(&format!("delete edge {table}/{id}"), &r, want);
            }
            17 | 18 => self.batch().await,
            _ => self.import(table).await,
        }
    }

    /// A batch of three random operations, all or nothing: the model applies them to a copy.
    async fn batch(&mut self) {
        let mut ops = Vec::new();
        let mut copy = self.g.clone();
        let mut outcome: Result<(), (usize, u16, &'static str)> = Ok(());
        for i in 0..3 {
            let (table, id) = (*self.rng.pick(EDGE_TABLES), *self.rng.pick(EDGE_IDS));
            let v = self.vertex();
            let (op, want) = match self.rng.below(4) {
                0 => (
                    json!({"op": "put", "table": &v[..1], "id": &v[2..], "document": {"k": 1}}),
                    copy.put_vertex(&v, 1),
                ),
                1 => (json!({"op": "delete", "table": &v[..1], "id": &v[2..]}), copy.delete_vertex(&v)),
                2 => {
                    let to = self.vertex();
                    let (e, doc) = edge_doc(&mut self.rng, &v, &to);
                    (json!({"op": "put", "table": table, "id": id, "document": doc}), copy.put_edge(table, id, e))
                }
                _ => {
                    let patch = json!({"_to": v});
                    (
                        json!({"op": "patch", "table": table, "id": id, "document": patch}),
                        copy.patch_edge(table, id, &patch),
                    )
                }
            };
            ops.push(op);
            if let (Err((status, code)), Ok(())) = (want, &outcome) {
                outcome = Err((i, status, code));
            }
        }
        let body = json!({"operations": ops});
        let r = self.s.send(Method::POST, "/v1/batch", Some(&body), &[]).await;
        match outcome {
            Ok(()) => {
                assert_eq!(r.status, 200, "seed {}: batch {body}: {}", self.seed, r.body);
                self.g = copy;
                *self.counts.entry("batch ok").or_default() += 1;
            }
            Err((i, status, code)) => {
                assert!(
                    r.is_problem(status, code),
                    "seed {}: batch {body}: want {status} {code}: {}",
                    self.seed,
                    r.body
                );
                assert_eq!(r.body["operation"], i, "seed {}: {body}", self.seed);
                *self.counts.entry("batch refused").or_default() += 1;
            }
        }
    }

    /// Three NDJSON edges: each line with a missing vertex fails alone.
    async fn import(&mut self, table: &str) {
        let mut body = String::new();
        let mut want_failed = Vec::new();
        for line in 1..=3u64 {
            let id = *self.rng.pick(EDGE_IDS);
            let (from, to) = (self.vertex(), self.vertex());
            let (e, mut doc) = edge_doc(&mut self.rng, &from, &to);
            doc["_id"] = json!(id);
            body.push_str(&format!("{doc}\n"));
            if self.g.put_edge(table, id, e).is_err() {
                want_failed.push(line);
            }
        }
        let r =
            self.s.raw(Method::POST, &format!("/v1/tables/{table}/import"), "application/x-ndjson", body.clone()).await;
        assert_eq!(r.status, 200, "seed {}: {}", self.seed, r.body);
        let failed: Vec<u64> =
            r.body["failures"].as_array().unwrap().iter().map(|f| f["line"].as_u64().unwrap()).collect();
        assert_eq!(failed, want_failed, "seed {}: import {body}: {}", self.seed, r.body);
        assert_eq!(r.body["inserted"].as_u64(), Some(3 - want_failed.len() as u64));
    }

    fn tables(&mut self) -> (Option<Vec<&'static str>>, Vec<&'static str>) {
        match self.rng.below(4) {
            0 => (None, vec!["e", "f"]),
            1 => (Some(vec!["e"]), vec!["e"]),
            2 => (Some(vec!["f"]), vec!["f"]),
            _ => (Some(vec!["f", "e"]), vec!["f", "e"]),
        }
    }

    fn existing(&mut self) -> Option<String> {
        let vs: Vec<String> = self.g.vertices.keys().cloned().collect();
        (!vs.is_empty()).then(|| self.rng.pick(&vs).clone())
    }

    async fn neighbors(&mut self) {
        let Some(v) = self.existing() else { return };
        let dir = *self.rng.pick(&["out", "in", "any"]);
        let (named, tables) = self.tables();
        let limit = 1 + self.rng.below(4) as usize;
        let want: Vec<Value> = self
            .g
            .steps(&v, dir, &tables)
            .into_iter()
            .map(|(edge, vertex, d, _)| json!({"vertex": vertex, "edge": edge, "direction": d}))
            .collect();
        let mut got = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/v1/graph/neighbors?vertex={}&direction={dir}&limit={limit}", seg(&v));
            if let Some(t) = &named {
                path.push_str(&format!("&edges={}", t.join(",")));
            }
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let (st, page) = self.s.get(&path).await;
            assert_eq!(st, 200, "seed {}: {path}: {page}", self.seed);
            got.extend(page["neighbors"].as_array().unwrap().iter().cloned());
            cursor = page["cursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(got, want, "seed {}: neighbours of {v} {dir} {tables:?}", self.seed);
        *self.counts.entry("neighbour lists").or_default() += 1;
    }

    async fn traverse(&mut self) {
        let Some(start) = self.existing() else { return };
        let dir = *self.rng.pick(&["out", "in", "any"]);
        let (named, tables) = self.tables();
        let min_depth = self.rng.below(3) as usize;
        let max_depth = min_depth + self.rng.below(4) as usize;
        let vertex_filter = self.rng.chance(40).then(|| json!({"k": {"$lt": 3}}));
        let edge_filter = self.rng.chance(40).then(|| json!({"strong": true}));
        let unique = self.rng.chance(60);
        let v_ok = |v: &str| vertex_filter.is_none() || self.g.vertices.get(v).is_some_and(|k| *k < 3);
        let e_ok = |e: &Edge| edge_filter.is_none() || e.strong;
        let mut want: Vec<(String, usize)> = Vec::new();
        if min_depth == 0 {
            want.push((start.clone(), 0));
        }
        if unique {
            let mut seen = BTreeSet::from([start.clone()]);
            let mut frontier = vec![start.clone()];
            for depth in 1..=max_depth {
                let mut next = Vec::new();
                for at in &frontier {
                    for (_, other, _, e) in self.g.steps(at, dir, &tables) {
                        if !e_ok(&e) || seen.contains(&other) {
                            continue;
                        }
                        seen.insert(other.clone());
                        if !v_ok(&other) {
                            continue;
                        }
                        if depth >= min_depth {
                            want.push((other.clone(), depth));
                        }
                        next.push(other);
                    }
                }
                frontier = next;
            }
        } else {
            // every loop-free path, depth first
            let mut stack: Vec<Vec<String>> = vec![vec![start.clone()]];
            while let Some(path) = stack.pop() {
                if path.len() > max_depth {
                    continue;
                }
                let at = path.last().unwrap().clone();
                for (_, other, _, e) in self.g.steps(&at, dir, &tables) {
                    if !e_ok(&e) || path.contains(&other) || !v_ok(&other) {
                        continue;
                    }
                    if path.len() >= min_depth {
                        want.push((other.clone(), path.len()));
                    }
                    let mut longer = path.clone();
                    longer.push(other);
                    stack.push(longer);
                }
            }
        }
        let mut body = json!({"start": start, "direction": dir, "min_depth": min_depth, "max_depth": max_depth,
            "unique_vertices": unique, "limit": 10000});
        if let Some(t) = &named {
            body["edges"] = json!(t);
        }
        if let Some(f) = &vertex_filter {
            body["vertex_filter"] = f.clone();
        }
        if let Some(f) = &edge_filter {
            body["edge_filter"] = f.clone();
        }
        let (st, t) = self.s.post("/v1/graph/traverse", body.clone()).await;
        assert_eq!(st, 200, "seed {}: {body}: {t}", self.seed);
        let mut got: Vec<(String, usize)> = t["vertices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["_id"].as_str().unwrap().to_owned(), v["depth"].as_u64().unwrap() as usize))
            .collect();
        assert!(got.windows(2).all(|w| w[0].1 <= w[1].1), "seed {}: {body}: not breadth-first: {got:?}", self.seed);
        got.sort();
        want.sort();
        assert_eq!(got, want, "seed {}: {body} on {:?}", self.seed, self.g);
        *self.counts.entry(if want.len() > 2 { "traversals (3+ results)" } else { "traversals" }).or_default() += 1;
    }

    async fn shortest(&mut self) {
        let (Some(from), Some(to)) = (self.existing(), self.existing()) else { return };
        let dir = *self.rng.pick(&["out", "in", "any"]);
        let (named, tables) = self.tables();
        let weighted = self.rng.chance(50);
        let k = 1 + self.rng.below(4) as usize;
        // every loop-free path and its cost
        let mut costs = Vec::new();
        let mut stack: Vec<(Vec<String>, i64)> = vec![(vec![from.clone()], 0)];
        while let Some((path, cost)) = stack.pop() {
            let at = path.last().unwrap().clone();
            if at == to {
                costs.push(cost);
                continue;
            }
            for (_, other, _, e) in self.g.steps(&at, dir, &tables) {
                if !path.contains(&other) {
                    let mut longer = path.clone();
                    longer.push(other);
                    stack.push((longer, cost + if weighted { e.w } else { 1 }));
                }
            }
        }
        costs.sort();
        costs.truncate(k);
        let mut body = json!({"from": from, "to": to, "direction": dir, "k": k});
        if weighted {
            body["weight"] = json!("w");
        }
        if let Some(t) = &named {
            body["edges"] = json!(t);
        }
        let r = self.s.send(Method::POST, "/v1/graph/shortest-path", Some(&body), &[]).await;
        if costs.is_empty() {
            assert!(r.is_problem(404, "no_path"), "seed {}: {body}: {}", self.seed, r.body);
            *self.counts.entry("no path").or_default() += 1;
            return;
        }
        assert_eq!(r.status, 200, "seed {}: {body}: {}", self.seed, r.body);
        let paths = r.body["paths"].as_array().unwrap();
        let got: Vec<i64> = paths.iter().map(|p| p["cost"].as_i64().unwrap()).collect();
        assert_eq!(got, costs, "seed {}: {body} on {:?}", self.seed, self.g);
        assert_eq!(r.body["cost"], paths[0]["cost"]);
        let mut distinct = BTreeSet::new();
        for p in paths {
            let vs: Vec<&str> = p["vertices"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            let es: Vec<&str> = p["edges"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            assert_eq!((vs.first(), vs.last()), (Some(&from.as_str()), Some(&to.as_str())), "{p}");
            assert_eq!(vs.iter().collect::<BTreeSet<_>>().len(), vs.len(), "loop-free: {p}");
            assert_eq!(es.len() + 1, vs.len(), "{p}");
            let mut cost = 0;
            for (i, e) in es.iter().enumerate() {
                let (t, id) = e.split_once('/').unwrap();
                assert!(tables.contains(&t), "{p}");
                let edge = &self.g.edges[&(t.to_owned(), id.to_owned())];
                let fwd = edge.from == vs[i] && edge.to == vs[i + 1];
                let back = edge.to == vs[i] && edge.from == vs[i + 1];
                assert!(
                    match dir {
                        "out" => fwd,
                        "in" => back,
                        _ => fwd || back,
                    },
                    "seed {}: {p}: {edge:?}",
                    self.seed
                );
                cost += if weighted { edge.w } else { 1 };
            }
            assert_eq!(p["cost"], cost, "{p}");
            assert!(distinct.insert(es.join(" ")), "a path came back twice: {p}");
        }
        *self.counts.entry(if k > 1 && paths.len() > 1 { "k paths" } else { "shortest paths" }).or_default() += 1;
    }
}

async fn model_run(seed: u64, ops: usize, counts: &mut BTreeMap<&'static str, usize>) {
    let s = TestServer::start().await;
    s.create_table("v").await;
    s.create_table("w").await;
    for body in [
        json!({"name": "e", "kind": "edge", "on_vertex_delete": "cascade", "weight_field": "w"}),
        json!({"name": "f", "kind": "edge", "on_vertex_delete": "reject"}),
    ] {
        assert_eq!(s.post("/v1/tables", body).await.0, 201);
    }
    let rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut run = Run { s, g: Graph::default(), rng, seed, counts: BTreeMap::new() };
    // most vertices exist from the start, so edges have somewhere to go
    for v in VERTICES.iter().take(6) {
        let r = run.s.send(Method::PUT, &vertex_path(v), Some(&json!({"k": 1})), &[]).await;
        let want = run.g.put_vertex(v, 1);
        run.check(v, &r, want);
    }
    for step in 0..ops {
        run.write().await;
        if step % 8 == 7 {
            run.neighbors().await;
            run.traverse().await;
            run.traverse().await;
            run.shortest().await;
            run.shortest().await;
        }
    }
    for t in EDGE_TABLES {
        let (_, info) = run.s.get(&format!("/v1/tables/{t}")).await;
        let n = run.g.edges.keys().filter(|(et, _)| et == t).count();
        assert_eq!(info["documents"], n, "seed {seed}: {t}");
    }
    run.s.check_ok().await;
    for (k, v) in run.counts {
        *counts.entry(k).or_default() += v;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_agrees_with_the_model() {
    let mut counts = BTreeMap::new();
    // MOSAIC_MODEL_SEEDS=5-40 explores more seeds (the coverage asserts below hold for 1-4)
    let seeds = std::env::var("MOSAIC_MODEL_SEEDS").ok().and_then(|r| {
        let (a, b) = r.split_once('-')?;
        Some(a.parse::<u64>().ok()?..=b.parse::<u64>().ok()?)
    });
    for seed in seeds.unwrap_or(1..=4) {
        model_run(seed, 300, &mut counts).await;
    }
    eprintln!("{counts:?}");
    for what in [
        "vertex deleted",
        "vertex delete refused",
        "cascades",
        "batch ok",
        "batch refused",
        "refused",
        "traversals (3+ results)",
        "k paths",
        "shortest paths",
        "no path",
        "neighbour lists",
    ] {
        assert!(counts.get(what).is_some_and(|n| *n >= 3), "too few {what}: {counts:?}");
    }
}
