//! `GET /v1/graph/neighbors`: the edges at one vertex, a page at a time.
//!
//! Order: edge table (as named, or by name), then `out` before `in`, then edge id. The cursor
//! holds the last entry's position (table, direction, edge id) and is bound to the vertex, the
//! direction and the edge tables (with their incarnation), so a later page starts its scan right
//! after the previous one ended.

use super::memory::Adjacency;
use super::{Graph, Result, ServiceError, WalkDirection, dir_name};
use crate::catalog::TableDef;
use crate::keys::{AdjValue, Direction, GraphKey, prefix_successor};
use crate::service::core::Handle;
use crate::service::core::cursor::{self, Binding};
use crate::service::core::expiry::Expired;
use crate::storage::{KeyRange, ReadView, Space};
use serde::Serialize;
use std::ops::Bound;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most neighbours one page holds.
pub const MAX_NEIGHBORS_PAGE: usize = 1000;

/// What to list.
#[derive(Debug, Clone)]
pub struct NeighborsRequest {
    /// `"table/id"`
    pub vertex: String,
    /// out, in or any
    pub direction: WalkDirection,
    /// edge tables (none: every edge table)
    pub edges: Option<Vec<String>>,
    /// page size
    pub limit: usize,
    /// the previous page's cursor
    pub cursor: Option<String>,
}

/// One edge at the vertex.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Neighbor {
    /// the vertex at the edge's other end
    #[schema(example = "users/bob")]
    pub vertex: String,
    /// the edge, `"edge_table/id"`
    #[schema(example = "follows/e1")]
    pub edge: String,
    /// `out` (the vertex is the edge's `_from`) or `in` (its `_to`)
    #[schema(example = "out")]
    pub direction: &'static str,
}

/// A page of neighbours.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NeighborsPage {
    /// the edges, in order
    pub neighbors: Vec<Neighbor>,
    /// pass as `cursor` for the next page; null on the last page
    pub cursor: Option<String>,
}

fn dir_index(d: Direction) -> u8 {
    match d {
        Direction::Out => 0,
        Direction::In => 1,
    }
}

impl Graph {
    /// One page of the edges at a vertex.
    pub async fn neighbors(self: &Arc<Self>, req: NeighborsRequest) -> Result<NeighborsPage> {
        if !(1..=MAX_NEIGHBORS_PAGE).contains(&req.limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_NEIGHBORS_PAGE}")));
        }
        let tables = self.edge_tables(req.edges.as_deref())?;
        let (stop, _abandon) = self.core.request_stop();
        self.read(move |graph| {
            let view = graph.core.store.snapshot();
            graph.vertex_exists(&view, "vertex", &req.vertex)?;
            let mut parts: Vec<Vec<u8>> = vec![b"neighbors".to_vec(), req.vertex.as_bytes().to_vec()];
            parts.push(req.direction.tag().to_vec());
            for t in &tables {
                parts.push(t.name.as_bytes().to_vec());
                parts.push(t.created_at.to_be_bytes().to_vec());
            }
            let binding = Binding::new(&parts.iter().map(Vec::as_slice).collect::<Vec<_>>());
            // (table index, direction index, last edge id)
            let after = match &req.cursor {
                None => None,
                Some(c) => {
                    let payload = cursor::open(binding, c)?;
                    let bad = || cursor::invalid("it is not one this server handed out");
                    let (head, id) = payload.split_first_chunk::<3>().ok_or_else(bad)?;
                    let id = String::from_utf8(id.to_vec()).map_err(|_| bad())?;
                    Some((u16::from_be_bytes([head[0], head[1]]) as usize, head[2], id))
                }
            };
            let mut expired = Expired::new(&view, &graph.core.catalog);
            let mut neighbors = Vec::with_capacity(req.limit.min(64));
            let mut next = None;
            let mut last: Option<(usize, u8, String)> = None;
            let adj = view.derived::<Adjacency>();
            'tables: for (ti, table) in tables.iter().enumerate() {
                for &d in req.direction.dirs() {
                    let after_id = match &after {
                        Some((at, _, _)) if ti < *at => continue,
                        Some((at, di, _)) if ti == *at && dir_index(d) < *di => continue,
                        Some((at, di, id)) if ti == *at && dir_index(d) == *di => Some(id.as_str()),
                        _ => None,
                    };
                    let entries: Box<dyn Iterator<Item = Result<(String, String)>>> = match adj {
                        Some(adj) => Box::new(memory_entries(adj, table, d, &req.vertex, after_id)),
                        None => Box::new(key_entries(&view, table, d, &req.vertex, after_id)),
                    };
                    for (n, item) in entries.enumerate() {
                        if n % 256 == 255 {
                            stop.check()?;
                        }
                        let (edge_id, other) = item?;
                        if neighbors.len() == req.limit {
                            if let Some((lt, ld, lid)) = &last {
                                let mut payload = (*lt as u16).to_be_bytes().to_vec();
                                payload.push(*ld);
                                payload.extend_from_slice(lid.as_bytes());
                                next = Some(cursor::seal(binding, &payload));
                            }
                            break 'tables;
                        }
                        if expired.contains(&table.name, &edge_id, &stop)? || expired.vertex(&other, &stop)? {
                            continue;
                        }
                        neighbors.push(Neighbor {
                            vertex: other,
                            edge: format!("{}/{}", table.name, edge_id),
                            direction: dir_name(d),
                        });
                        last = Some((ti, dir_index(d), edge_id));
                    }
                }
            }
            Ok(NeighborsPage { neighbors, cursor: next })
        })
        .await
    }
}

/// The entries of `table` at `vertex` in direction `d` after edge id `after`, from the keys:
/// (edge id, other end).
fn key_entries(
    view: &ReadView,
    table: &TableDef,
    d: Direction,
    vertex: &str,
    after: Option<&str>,
) -> impl Iterator<Item = Result<(String, String)>> + use<> {
    let prefix = GraphKey::vertex_prefix(d, &table.name, vertex);
    let lower = match after {
        Some(id) => Bound::Excluded(GraphKey::new(d, &table.name, vertex, id).encode()),
        None => Bound::Included(prefix.clone()),
    };
    let upper = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    view.scan(Space::Graph, KeyRange::Between(lower, upper), false).map(|item| {
        let (key, value) = item?;
        let k = GraphKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?;
        let adj = AdjValue::decode(&value).map_err(|e| ServiceError::Internal(e.to_string()))?;
        Ok((k.edge_id.into_owned(), adj.other.into_owned()))
    })
}

/// The same entries from the in-memory adjacency (ordered by edge name, as the keys are).
fn memory_entries<'a>(
    adj: &'a Adjacency,
    table: &TableDef,
    d: Direction,
    vertex: &str,
    after: Option<&str>,
) -> impl Iterator<Item = Result<(String, String)>> + 'a {
    let prefix = format!("{}/", table.name);
    let at = adj.names().vertex(vertex);
    let list = at.and_then(|v| adj.table(&table.name, table.created_at).map(|t| t.at(d, v))).unwrap_or(&[]);
    let start = after.map_or(0, |id| {
        let full = format!("{prefix}{id}");
        let names = adj.names();
        list.partition_point(|e| names.edge_name(e.edge) <= full.as_str())
    });
    list[start..].iter().map(move |e| {
        let names = adj.names();
        let edge = names.edge_name(e.edge);
        Ok((edge.get(prefix.len()..).unwrap_or(edge).to_owned(), names.vertex_name(e.other).to_owned()))
    })
}
