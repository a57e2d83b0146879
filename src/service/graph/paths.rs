//! `POST /v1/graph/shortest-path`: the shortest path by hops (bidirectional breadth-first
//! search), by a numeric edge field (Dijkstra), and the k shortest loop-free paths (Yen's
//! algorithm over Dijkstra). Written against [`WalkGraph`], so the unit tests run them on an
//! in-memory graph.

use super::{Cost, Graph, Result, ServiceError, Step, WalkDirection, WalkGraph, Walker, max_visited};
use crate::catalog::TableDef;
use crate::service::core::Handle;
use crate::service::core::cancel::Stop;
use crate::storage::ReadView;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use utoipa::ToSchema;

/// Most paths one request asks for.
pub const MAX_K: usize = 32;

/// The body of `POST /v1/graph/shortest-path`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"from": "users/alice", "to": "users/bob", "direction": "any", "edges": ["follows"], "k": 2}))]
pub struct ShortestPathRequest {
    /// the start vertex, `"table/id"`
    #[schema(example = "users/alice", min_length = 3, pattern = "^[^/]+/.+$")]
    pub from: String,
    /// the target vertex, `"table/id"`
    #[schema(example = "users/bob", min_length = 3, pattern = "^[^/]+/.+$")]
    pub to: String,
    /// `out` (default), `in` or `any`
    #[serde(default)]
    pub direction: WalkDirection,
    /// edge tables to follow (default: every edge table)
    #[serde(default)]
    #[schema(max_items = 32)]
    pub edges: Option<Vec<String>>,
    /// a numeric edge field (each a number >= 0) to minimise the sum of; without it the cost is
    /// the number of edges. The edge table's declared `weight_field` is read from the adjacency
    /// entries, any other field from the edge documents
    #[serde(default)]
    #[schema(min_length = 1, example = "km")]
    pub weight: Option<String>,
    /// how many loop-free paths, shortest first, 1-32 (default 1)
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 1, maximum = 32)]
    pub k: Option<usize>,
    /// most adjacency entries the search may read, 1-10000000 (default 100000); past it: 422
    /// `max_visited_exceeded`
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 1, maximum = 10000000)]
    pub max_visited: Option<usize>,
}

/// One path with its cost.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct WeightedPath {
    /// the vertices, `from` first and `to` last
    #[schema(example = json!(["cities/oslo", "cities/gol", "cities/bergen"]))]
    pub vertices: Vec<String>,
    /// the edges followed, `"edge_table/id"`
    #[schema(example = json!(["roads/r1", "roads/r7"]))]
    pub edges: Vec<String>,
    /// the number of edges, or the sum of their weights
    #[schema(value_type = f64, example = 463)]
    pub cost: Value,
}

/// The answer: the paths, shortest first, and the first one's fields at the top level.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShortestPathResponse {
    /// 1 to k paths, by cost
    pub paths: Vec<WeightedPath>,
    /// the shortest path's vertices
    pub vertices: Vec<String>,
    /// the shortest path's edges
    pub edges: Vec<String>,
    /// the shortest path's cost
    #[schema(value_type = f64)]
    pub cost: Value,
}

/// A path as the algorithms build it: numbers of the walk's graph.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    pub vertices: Vec<u32>,
    pub edges: Vec<u32>,
    pub weights: Vec<f64>,
}

impl Path {
    fn start(vertex: u32) -> Path {
        Path { vertices: vec![vertex], edges: Vec::new(), weights: Vec::new() }
    }

    pub(crate) fn cost(&self) -> f64 {
        self.weights.iter().sum()
    }

    fn same_route(&self, other: &Path) -> bool {
        self.edges == other.edges && self.vertices == other.vertices
    }
}

/// A cost as JSON: an integer when it is one.
fn cost_json(c: f64) -> Value {
    if c.fract() == 0.0 && c.abs() < 9_007_199_254_740_992.0 {
        Value::from(c as i64)
    } else {
        serde_json::Number::from_f64(c).map_or(Value::Null, Value::Number)
    }
}

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type Set<K> = HashSet<K, foldhash::fast::RandomState>;

/// The parent links of one side of a breadth-first search: vertex → (depth, (parent, edge)).
type Parents = Map<u32, (usize, Option<(u32, u32)>)>;

/// The chain from `v` back to the root of `side`: vertices (v first) and edges.
fn chain(side: &Parents, v: u32) -> (Vec<u32>, Vec<u32>) {
    let (mut vs, mut es) = (vec![v], Vec::new());
    let mut at = v;
    while let Some((_, Some((parent, edge)))) = side.get(&at) {
        vs.push(*parent);
        es.push(*edge);
        at = *parent;
    }
    (vs, es)
}

/// The fewest-edges path, by breadth-first search from both ends, a whole level at a time (the
/// smaller frontier first); after the first level in which the two searches meet, the best
/// meeting point of that level is a shortest path.
pub(crate) fn bfs(g: &mut impl WalkGraph, from: u32, to: u32, dir: WalkDirection) -> Result<Option<Path>> {
    if from == to {
        return Ok(Some(Path::start(from)));
    }
    let mut sides: [Parents; 2] = [Map::default(), Map::default()];
    sides[0].insert(from, (0, None));
    sides[1].insert(to, (0, None));
    let mut fronts = [vec![from], vec![to]];
    let mut steps = Vec::new();
    loop {
        if fronts[0].is_empty() || fronts[1].is_empty() {
            return Ok(None);
        }
        let s = if fronts[0].len() <= fronts[1].len() { 0 } else { 1 };
        let d = if s == 0 { dir } else { dir.reverse() };
        let mut best: Option<(usize, u32)> = None;
        let mut next = Vec::new();
        for v in std::mem::take(&mut fronts[s]) {
            let depth = sides[s].get(&v).map_or(0, |e| e.0) + 1;
            steps.clear();
            g.steps(v, d, &mut steps)?;
            for step in &steps {
                if sides[s].contains_key(&step.vertex) {
                    continue;
                }
                sides[s].insert(step.vertex, (depth, Some((v, step.edge))));
                if let Some((other, _)) = sides[1 - s].get(&step.vertex) {
                    let total = depth + other;
                    if best.is_none_or(|(b, _)| total < b) {
                        best = Some((total, step.vertex));
                    }
                }
                next.push(step.vertex);
            }
        }
        if let Some((_, meet)) = best {
            let (mut vertices, mut edges) = chain(&sides[0], meet);
            vertices.reverse();
            edges.reverse();
            let (back_v, back_e) = chain(&sides[1], meet);
            vertices.extend(back_v.into_iter().skip(1));
            edges.extend(back_e);
            let weights = vec![1.0; edges.len()];
            return Ok(Some(Path { vertices, edges, weights }));
        }
        fronts[s] = next;
    }
}

/// A cost ordered totally (costs are finite and >= 0).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ord64(f64);
impl Eq for Ord64 {}
impl PartialOrd for Ord64 {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ord64 {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// What a search may not use: vertices and edges (Yen's spur searches).
#[derive(Default)]
pub(crate) struct Banned {
    pub vertices: Set<u32>,
    pub edges: Set<u32>,
}

impl Banned {
    fn bans(&self, step: &Step) -> bool {
        (!self.edges.is_empty() && self.edges.contains(&step.edge))
            || (!self.vertices.is_empty() && self.vertices.contains(&step.vertex))
    }
}

/// The cheapest path, one way only (Dijkstra): the reference the two-way search is tested
/// against.
#[cfg(test)]
pub(crate) fn dijkstra(
    g: &mut impl WalkGraph,
    from: u32,
    to: u32,
    dir: WalkDirection,
    banned: &Banned,
) -> Result<Option<Path>> {
    let mut side = Side::new(from);
    let mut steps = Vec::new();
    while let Some(Reverse((Ord64(d), _, v))) = side.heap.pop() {
        if !side.done.insert(v) {
            continue;
        }
        if v == to {
            let mut path = Path::start(to);
            for (p, e, w) in side.chain(v) {
                path.vertices.push(p);
                path.edges.push(e);
                path.weights.push(w);
            }
            path.vertices.reverse();
            path.edges.reverse();
            path.weights.reverse();
            return Ok(Some(path));
        }
        steps.clear();
        g.steps(v, dir, &mut steps)?;
        for step in &steps {
            if !banned.bans(step) && !side.done.contains(&step.vertex) {
                side.reach(v, d, step);
            }
        }
    }
    Ok(None)
}

/// One side of a bidirectional Dijkstra: tentative costs, parent links, settled vertices, queue.
struct Side {
    dist: Map<u32, f64>,
    prev: Map<u32, (u32, u32, f64)>,
    done: Set<u32>,
    heap: BinaryHeap<Reverse<(Ord64, u64, u32)>>,
    seq: u64,
}

impl Side {
    fn new(root: u32) -> Side {
        let mut dist = Map::default();
        dist.insert(root, 0.0);
        Side {
            dist,
            prev: Map::default(),
            done: Set::default(),
            heap: BinaryHeap::from([Reverse((Ord64(0.0), 0, root))]),
            seq: 0,
        }
    }

    /// The smallest queued cost (infinite when nothing is queued).
    fn top(&self) -> f64 {
        self.heap.peek().map_or(f64::INFINITY, |Reverse((Ord64(d), _, _))| *d)
    }

    /// Reaches `step.vertex` from `v` (at cost `d`), if that is cheaper than known.
    fn reach(&mut self, v: u32, d: f64, step: &Step) {
        let nd = d + step.weight;
        if self.dist.get(&step.vertex).is_none_or(|&old| nd < old) {
            self.dist.insert(step.vertex, nd);
            self.prev.insert(step.vertex, (v, step.edge, step.weight));
            self.seq += 1;
            self.heap.push(Reverse((Ord64(nd), self.seq, step.vertex)));
        }
    }

    /// The chain from `v` back to the root: (vertex, edge, weight) steps, `v`'s first.
    fn chain(&self, v: u32) -> Vec<(u32, u32, f64)> {
        let mut out = Vec::new();
        let mut at = v;
        while let Some(&(p, e, w)) = self.prev.get(&at) {
            out.push((p, e, w));
            at = p;
        }
        out
    }
}

/// The cheapest path avoiding `banned`, searched from both ends at once (Dijkstra forward from
/// `from` and backward from `to`, always advancing the side with the cheaper queue head): it
/// stops once the two queue heads together cost at least the best meeting found, so on a graph
/// with hubs each side settles a small ball instead of every vertex cheaper than the target.
pub(crate) fn dijkstra_both_ways(
    g: &mut impl WalkGraph,
    from: u32,
    to: u32,
    dir: WalkDirection,
    banned: &Banned,
) -> Result<Option<Path>> {
    let mut sides = [Side::new(from), Side::new(to)];
    let mut best: Option<(f64, u32)> = (from == to).then_some((0.0, from));
    let mut steps = Vec::new();
    loop {
        let (tf, tb) = (sides[0].top(), sides[1].top());
        // A side with nothing queued has settled all it reaches: had it reached the other end,
        // scanning that edge would have found a meeting. Otherwise stop once no meeting can be
        // cheaper than the best one found.
        if tf.is_infinite() || tb.is_infinite() || best.is_some_and(|(mu, _)| tf + tb >= mu) {
            break;
        }
        let s = if tf <= tb { 0 } else { 1 };
        let walk = if s == 0 { dir } else { dir.reverse() };
        let Some(Reverse((Ord64(d), _, v))) = sides[s].heap.pop() else { break };
        if !sides[s].done.insert(v) {
            continue;
        }
        steps.clear();
        g.steps(v, walk, &mut steps)?;
        for step in &steps {
            if banned.bans(step) {
                continue;
            }
            if let Some(other) = sides[1 - s].dist.get(&step.vertex) {
                let total = d + step.weight + other;
                if best.is_none_or(|(mu, _)| total < mu) {
                    best = Some((total, step.vertex));
                }
            }
            if !sides[s].done.contains(&step.vertex) {
                sides[s].reach(v, d, step);
            }
        }
    }
    let Some((_, meet)) = best else { return Ok(None) };
    // from → meet along the forward tree, then meet → to along the backward tree
    let forward = sides[0].chain(meet);
    let mut path = Path {
        vertices: forward.iter().rev().map(|(p, _, _)| *p).collect(),
        edges: forward.iter().rev().map(|(_, e, _)| *e).collect(),
        weights: forward.iter().rev().map(|(_, _, w)| *w).collect(),
    };
    path.vertices.push(meet);
    for (p, e, w) in sides[1].chain(meet) {
        path.vertices.push(p);
        path.edges.push(e);
        path.weights.push(w);
    }
    Ok(Some(loop_free(path)))
}

/// The path with any cycle cut out (a cheapest path may hold one of zero cost where the two
/// searches' trees cross); weights are >= 0, so the cost does not grow.
fn loop_free(path: Path) -> Path {
    let mut out = Path::start(path.vertices[0]);
    for ((&v, e), w) in path.vertices.iter().skip(1).zip(path.edges).zip(path.weights) {
        if let Some(at) = out.vertices.iter().position(|&x| x == v) {
            out.vertices.truncate(at + 1);
            out.edges.truncate(at);
            out.weights.truncate(at);
        } else {
            out.vertices.push(v);
            out.edges.push(e);
            out.weights.push(w);
        }
    }
    out
}

/// The `k` cheapest loop-free paths from `first` (a cheapest path) on (Yen's algorithm): each
/// next path leaves a previous one at some vertex (its spur) and avoids the edges by which the
/// paths found so far leave that same root, and the root's other vertices. Each spur search runs
/// from both ends. Ties go by edge ids.
pub(crate) fn yen(g: &mut impl WalkGraph, first: Path, to: u32, dir: WalkDirection, k: usize) -> Result<Vec<Path>> {
    let mut found = vec![first];
    let mut candidates: Vec<Path> = Vec::new();
    while found.len() < k {
        let Some(last) = found.last().cloned() else { break };
        for i in 0..last.edges.len() {
            let root_v = &last.vertices[..=i];
            let root_e = &last.edges[..i];
            let banned = Banned {
                edges: found
                    .iter()
                    .filter(|p| p.edges.len() > i && p.vertices[..=i] == *root_v && p.edges[..i] == *root_e)
                    .map(|p| p.edges[i])
                    .collect(),
                vertices: root_v[..i].iter().copied().collect(),
            };
            let Some(spur) = dijkstra_both_ways(g, root_v[i], to, dir, &banned)? else { continue };
            let mut path =
                Path { vertices: root_v.to_vec(), edges: root_e.to_vec(), weights: last.weights[..i].to_vec() };
            path.vertices.extend(spur.vertices.into_iter().skip(1));
            path.edges.extend(spur.edges);
            path.weights.extend(spur.weights);
            if !found.iter().chain(&candidates).any(|p| p.same_route(&path)) {
                candidates.push(path);
            }
        }
        let names = |p: &Path| p.edges.iter().map(|&e| g.edge_name(e)).collect::<Vec<_>>();
        let best = candidates
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| a.cost().total_cmp(&b.cost()).then_with(|| names(a).cmp(&names(b))))
            .map(|(i, _)| i);
        let Some(best) = best else { break };
        found.push(candidates.swap_remove(best));
    }
    Ok(found)
}

impl Graph {
    /// The shortest path(s) between two vertices.
    pub async fn shortest_path(self: &Arc<Self>, req: ShortestPathRequest) -> Result<ShortestPathResponse> {
        let k = req.k.unwrap_or(1);
        if !(1..=MAX_K).contains(&k) {
            return Err(ServiceError::InvalidRequest(format!("k must be between 1 and {MAX_K}")));
        }
        if req.weight.as_deref().is_some_and(|w| w.is_empty() || w.split('.').any(str::is_empty)) {
            return Err(ServiceError::InvalidRequest("weight is a non-empty field path".into()));
        }
        let max_visited = max_visited(req.max_visited)?;
        let tables = self.edge_tables(req.edges.as_deref())?;
        let (stop, _abandon) = self.core.request_stop();
        let view = self.core.store.snapshot();
        // a declared weight (or none) is in the adjacency: no edge document is read
        let small = req.weight.as_deref().is_none_or(|w| tables.iter().all(|t| t.weight_field.as_deref() == Some(w)));
        if let Some(budget) = self.inline_budget(&view, small, max_visited) {
            match paths(self, &view, &req, &tables, &stop, k, budget) {
                Err(ServiceError::MaxVisited(_)) if budget < max_visited => {}
                done => return done,
            }
        }
        self.read(move |model| paths(model, &view, &req, &tables, &stop, k, max_visited)).await
    }
}

/// The search of [`Graph::shortest_path`], reading at most `max_visited` adjacency entries.
fn paths(
    model: &Graph,
    view: &ReadView,
    req: &ShortestPathRequest,
    tables: &[Arc<TableDef>],
    stop: &Stop,
    k: usize,
    max_visited: usize,
) -> Result<ShortestPathResponse> {
    model.vertex_exists(view, "from", &req.from)?;
    model.vertex_exists(view, "to", &req.to)?;
    let cost = req.weight.clone().map_or(Cost::Hops, Cost::Field);
    let mut g = Walker::new(model, view, tables, stop, cost.clone(), max_visited);
    let (from, to) = (g.vertex(&req.from), g.vertex(&req.to));
    let first = match cost {
        Cost::Hops => bfs(&mut g, from, to, req.direction)?,
        Cost::Field(_) => dijkstra_both_ways(&mut g, from, to, req.direction, &Banned::default())?,
    };
    let first = first.ok_or_else(|| ServiceError::NoPath { from: req.from.clone(), to: req.to.clone() })?;
    let found = if k > 1 { yen(&mut g, first, to, req.direction, k)? } else { vec![first] };
    let paths: Vec<WeightedPath> = found
        .into_iter()
        .map(|p| WeightedPath {
            cost: cost_json(p.cost()),
            vertices: p.vertices.iter().map(|&v| g.vertex_name(v)).collect(),
            edges: p.edges.iter().map(|&e| g.edge_name(e)).collect(),
        })
        .collect();
    let head = paths.first().cloned().ok_or_else(|| ServiceError::Internal("no first path".into()))?;
    Ok(ShortestPathResponse { paths, vertices: head.vertices, edges: head.edges, cost: head.cost })
}

#[cfg(test)]
mod tests;
