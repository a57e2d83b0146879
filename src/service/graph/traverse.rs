//! `POST /v1/graph/traverse`: a breadth-first walk from one vertex.
//!
//! With `unique_vertices` (the default) each vertex is reached once, at its smallest depth; without
//! it every loop-free path is followed (a vertex at most once per path), so a vertex may come back
//! once per path reaching it. A vertex that fails `vertex_filter` is neither returned nor expanded;
//! an edge that fails `edge_filter` is not followed. The start vertex is not filtered (it is
//! returned when `min_depth` is 0).

use super::adjacency::split_vertex;
use super::{Cost, Graph, Result, ServiceError, WalkDirection, WalkGraph, Walker, max_visited};
use crate::catalog::TableDef;
use crate::entity::FieldDict;
use crate::keys::EntityKey;
use crate::service::core::Handle;
use crate::service::core::cancel::Stop;
use crate::service::core::filter::Filter;
use crate::storage::{ReadView, Space};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use utoipa::ToSchema;

/// Deepest `max_depth`.
pub const MAX_TRAVERSE_DEPTH: usize = 1000;
/// Most vertices one traversal returns.
pub const MAX_TRAVERSE_LIMIT: usize = 10_000;
/// Most fields one traversal returns per vertex.
pub const MAX_TRAVERSE_FIELDS: usize = 256;

/// What a traversal returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReturnKind {
    /// the vertices reached
    #[default]
    Vertices,
    /// the vertices, and the path to each
    Paths,
}

fn default_true() -> bool {
    true
}

/// The body of `POST /v1/graph/traverse`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"start": "users/alice", "direction": "out", "edges": ["follows"], "min_depth": 1,
    "max_depth": 3, "vertex_filter": {"age": {"$gte": 18}}, "limit": 100, "return": "paths", "fields": ["name"]}))]
pub struct TraverseRequest {
    /// the start vertex, `"table/id"`
    #[schema(example = "users/alice", min_length = 3, pattern = "^[^/]+/.+$")]
    pub start: String,
    /// `out` (default), `in` or `any`
    #[serde(default)]
    pub direction: WalkDirection,
    /// edge tables to follow (default: every edge table)
    #[serde(default)]
    #[schema(max_items = 32)]
    pub edges: Option<Vec<String>>,
    /// the smallest depth returned (default 1; 0 returns the start too)
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 0, maximum = 1000)]
    pub min_depth: Option<usize>,
    /// the largest depth walked (default 1, at most 1000)
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 0, maximum = 1000)]
    pub max_depth: Option<usize>,
    /// a filter (the query filter language) every vertex reached must match to be returned and
    /// expanded
    #[schema(value_type = Option<Object>, example = json!({"age": {"$gte": 18}}))]
    pub vertex_filter: Option<Value>,
    /// a filter every edge followed must match (it reads the edge documents)
    #[schema(value_type = Option<Object>, example = json!({"since": {"$gte": 2020}}))]
    pub edge_filter: Option<Value>,
    /// true (default): each vertex once, at its smallest depth; false: every loop-free path
    #[serde(default = "default_true")]
    pub unique_vertices: bool,
    /// most vertices returned, 1-10000 (default 1000); the walk stops there
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 1, maximum = 10000)]
    pub limit: Option<usize>,
    /// most adjacency entries the walk may read, 1-10000000 (default 100000); past it: 422
    /// `max_visited_exceeded`
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(minimum = 1, maximum = 10000000)]
    pub max_visited: Option<usize>,
    /// `vertices` (default) or `paths`
    #[serde(default, rename = "return")]
    pub return_kind: ReturnKind,
    /// return each vertex's document: these dotted fields, or `["*"]` for the whole document
    #[serde(default)]
    #[schema(max_items = 256)]
    pub fields: Option<Vec<String>>,
}

/// A vertex a traversal reached.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraversedVertex {
    /// `"table/id"`
    #[serde(rename = "_id")]
    #[schema(example = "users/bob")]
    pub id: String,
    /// edges from the start
    pub depth: usize,
    /// the document (with `fields`); null when the vertex has no document
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub document: Option<Value>,
}

/// The path from the start to one returned vertex.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraversePath {
    /// the vertices, start first
    pub vertices: Vec<String>,
    /// the edges followed, `"edge_table/id"`
    pub edges: Vec<String>,
}

/// The answer to a traversal, in breadth-first order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraverseResponse {
    /// the vertices reached within the depth window
    pub vertices: Vec<TraversedVertex>,
    /// with `return: paths`: the path to each vertex, in the same order
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<TraversePath>>,
}

/// A vertex reached, with the step that reached it (numbers of the walk's graph).
struct Node {
    vertex: u32,
    depth: usize,
    parent: Option<usize>,
    edge: Option<u32>,
}

/// The checked request.
struct Plan {
    min_depth: usize,
    max_depth: usize,
    limit: usize,
    max_visited: usize,
    vertex_filter: Option<Filter>,
    edge_filter: Option<Filter>,
}

fn check(req: &TraverseRequest) -> Result<Plan> {
    let bad = |m: String| Err(ServiceError::InvalidRequest(m));
    let min_depth = req.min_depth.unwrap_or(1);
    let max_depth = req.max_depth.unwrap_or(1);
    if max_depth > MAX_TRAVERSE_DEPTH || min_depth > max_depth {
        return bad(format!("depths must satisfy 0 <= min_depth <= max_depth <= {MAX_TRAVERSE_DEPTH}"));
    }
    let limit = req.limit.unwrap_or(1000);
    if !(1..=MAX_TRAVERSE_LIMIT).contains(&limit) {
        return bad(format!("limit must be between 1 and {MAX_TRAVERSE_LIMIT}"));
    }
    if let Some(fields) = &req.fields {
        if fields.len() > MAX_TRAVERSE_FIELDS {
            return Err(ServiceError::QueryTooComplex(format!(
                "a traversal returns at most {MAX_TRAVERSE_FIELDS} fields"
            )));
        }
        if fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)) {
            return bad("fields are non-empty dotted paths (or [\"*\"])".into());
        }
    }
    Ok(Plan {
        min_depth,
        max_depth,
        limit,
        max_visited: max_visited(req.max_visited)?,
        vertex_filter: req.vertex_filter.as_ref().map(Filter::parse).transpose()?,
        edge_filter: req.edge_filter.as_ref().map(Filter::parse).transpose()?,
    })
}

/// The document `table/id` from the snapshot, if it exists.
fn document(view: &ReadView, vertex: &str) -> Result<Option<(String, crate::storage::Slice)>> {
    let Some((table, id)) = split_vertex(vertex) else { return Ok(None) };
    Ok(view.get(Space::Entity, &EntityKey::new(table, id).encode())?.map(|b| (id.to_owned(), b)))
}

/// Whether the document of `vertex` (a vertex or an edge) matches `filter`; one without a
/// document matches nothing.
fn matches(view: &ReadView, dict: &FieldDict, filter: &Filter, vertex: &str) -> Result<bool> {
    match document(view, vertex)? {
        Some((id, blob)) => filter.matches(&id, &blob, dict),
        None => Ok(false),
    }
}

/// Whether `vertex` is on the path ending at node `at`.
fn on_path(nodes: &[Node], mut at: Option<usize>, vertex: u32) -> bool {
    while let Some(i) = at {
        let Some(n) = nodes.get(i) else { return false };
        if n.vertex == vertex {
            return true;
        }
        at = n.parent;
    }
    false
}

fn path_to(g: &impl WalkGraph, nodes: &[Node], at: usize) -> TraversePath {
    let (mut vertices, mut edges) = (Vec::new(), Vec::new());
    let mut i = Some(at);
    while let Some(n) = i.and_then(|i| nodes.get(i)) {
        vertices.push(g.vertex_name(n.vertex));
        edges.extend(n.edge.map(|e| g.edge_name(e)));
        i = n.parent;
    }
    vertices.reverse();
    edges.reverse();
    TraversePath { vertices, edges }
}

impl Graph {
    /// Walks the graph breadth-first from `req.start`.
    pub async fn traverse(self: &Arc<Self>, req: TraverseRequest) -> Result<TraverseResponse> {
        let plan = check(&req)?;
        let tables = self.edge_tables(req.edges.as_deref())?;
        let (stop, _abandon) = self.core.request_stop();
        let view = self.core.store.snapshot();
        let small = req.vertex_filter.is_none() && req.edge_filter.is_none() && req.fields.is_none();
        if let Some(budget) = self.inline_budget(&view, small, plan.max_visited) {
            match walk(self, &view, &req, &plan, &tables, &stop, budget) {
                Err(ServiceError::MaxVisited(_)) if budget < plan.max_visited => {}
                done => return done,
            }
        }
        self.read(move |model| walk(model, &view, &req, &plan, &tables, &stop, plan.max_visited)).await
    }
}

/// The walk of [`Graph::traverse`], reading at most `max_visited` adjacency entries.
fn walk(
    model: &Graph,
    view: &ReadView,
    req: &TraverseRequest,
    plan: &Plan,
    tables: &[Arc<TableDef>],
    stop: &Stop,
    max_visited: usize,
) -> Result<TraverseResponse> {
    model.vertex_exists(view, "start", &req.start)?;
    let dict = model.core.catalog.dict();
    let mut graph = Walker::new(model, view, tables, stop, Cost::Hops, max_visited);
    let start = graph.vertex(&req.start);
    let mut nodes = vec![Node { vertex: start, depth: 0, parent: None, edge: None }];
    let mut visited: HashSet<u32, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(256, Default::default());
    visited.insert(start);
    let mut returned: Vec<usize> = Vec::new();
    if plan.min_depth == 0 {
        returned.push(0);
    }
    let mut frontier = vec![0usize];
    let mut steps = Vec::new();
    // steps looked at, entries read again included (a vertex on many paths is expanded
    // once per path): bounded like the entries read
    let mut examined = 0usize;
    'walk: for depth in 1..=plan.max_depth {
        if returned.len() >= plan.limit {
            break;
        }
        let mut next = Vec::new();
        graph.warm(&frontier.iter().map(|&at| nodes[at].vertex).collect::<Vec<_>>(), req.direction);
        for &at in &frontier {
            steps.clear();
            graph.steps(nodes[at].vertex, req.direction, &mut steps)?;
            for step in &steps {
                examined += 1;
                if examined > max_visited {
                    return Err(ServiceError::MaxVisited(max_visited));
                }
                if req.unique_vertices && visited.contains(&step.vertex) {
                    continue;
                }
                if !req.unique_vertices && on_path(&nodes, Some(at), step.vertex) {
                    continue;
                }
                if let Some(f) = &plan.edge_filter
                    && !matches(view, &dict, f, &graph.edge_name(step.edge))?
                {
                    continue;
                }
                if let Some(f) = &plan.vertex_filter
                    && !matches(view, &dict, f, &graph.vertex_name(step.vertex))?
                {
                    // it fails whichever way it is reached
                    visited.insert(step.vertex);
                    continue;
                }
                visited.insert(step.vertex);
                nodes.push(Node { vertex: step.vertex, depth, parent: Some(at), edge: Some(step.edge) });
                let i = nodes.len() - 1;
                if depth >= plan.min_depth {
                    returned.push(i);
                    if returned.len() >= plan.limit {
                        break 'walk;
                    }
                }
                next.push(i);
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    let fields = req.fields.as_deref();
    let mut vertices = Vec::with_capacity(returned.len());
    let ids = graph.vertex_names(&returned.iter().map(|&i| nodes[i].vertex).collect::<Vec<_>>());
    for (&i, id) in returned.iter().zip(ids) {
        let n = &nodes[i];
        let doc = match fields {
            None => None,
            Some(f) => Some(match document(view, &id)? {
                None => Value::Null,
                Some((id, blob)) => {
                    let all = f.iter().any(|f| f == "*");
                    let text =
                        crate::service::core::filter::project(&blob, &dict, &id, if all { None } else { Some(f) })?;
                    serde_json::from_slice(&text).map_err(|e| ServiceError::Internal(e.to_string()))?
                }
            }),
        };
        vertices.push(TraversedVertex { id, depth: n.depth, document: doc });
    }
    let paths =
        (req.return_kind == ReturnKind::Paths).then(|| returned.iter().map(|&i| path_to(&graph, &nodes, i)).collect());
    Ok(TraverseResponse { vertices, paths })
}
