//! The graph rules of the write path: an edge's vertices must exist, its adjacency entries
//! (`graph:out` at `_from`, `graph:in` at `_to`) change with it, and a vertex's edges are found —
//! to refuse its delete or to cascade it — from those entries alone. [`stage`] is the graph's
//! step of every document change (`write::derived`), so every write path (PUT, POST, PATCH,
//! batch, import, TTL sweep, cascade) follows them.

use super::memory::oplog::EdgeOp;
use crate::catalog::{Catalog, OnVertexDelete, TableDef, TableKind};
use crate::entity::{self, ValueRef};
use crate::keys::{AdjValue, Direction, EntityKey, GraphKey};
use crate::service::core::change::Change;
use crate::service::core::expiry::{Expiry, now_ms};
use crate::service::core::fields::{FROM_FIELD, TO_FIELD};
use crate::service::{Result, ServiceError};
use crate::storage::{Space, WriteTx};
use std::sync::Arc;

/// Most edges one vertex delete may cascade to (through every cascade edge table, and onward when
/// a deleted edge is itself a vertex): beyond it the delete is refused (422 `too_many_edges`) —
/// delete the edges in batches first.
pub const MAX_CASCADE: usize = 10_000;

pub(crate) use super::memory::oplog::EdgeEnds;

/// `"table/id"` split at its first `/` (table names have none; ids may).
pub fn split_vertex(vertex: &str) -> Option<(&str, &str)> {
    vertex.split_once('/').filter(|(t, id)| !t.is_empty() && !id.is_empty())
}

/// A stored field's value as a weight: a finite number >= 0.
pub(crate) fn weight_ref(v: &ValueRef<'_>) -> Option<f64> {
    let w = match v {
        ValueRef::Int(i) => *i as f64,
        ValueRef::UInt(u) => *u as f64,
        ValueRef::Float(f) => *f,
        _ => return None,
    };
    (w.is_finite() && w >= 0.0).then_some(w)
}

/// The endpoints of a stored edge blob of `table`.
pub(crate) fn stored_ends(catalog: &Catalog, table: &TableDef, blob: &[u8]) -> Result<Option<EdgeEnds>> {
    if table.kind != TableKind::Edge {
        return Ok(None);
    }
    catalog.with_dict(|dict| {
        let text = |name: &str| -> Result<Option<String>> {
            Ok(match entity::get_path(blob, dict, &[name])? {
                Some(ValueRef::Str(s)) => Some(s.to_owned()),
                _ => None,
            })
        };
        let weight = match &table.weight_field {
            Some(w) => entity::get_path(blob, dict, &[w.as_str()])?.as_ref().and_then(weight_ref),
            None => None,
        };
        Ok(text(FROM_FIELD)?.zip(text(TO_FIELD)?).map(|(from, to)| EdgeEnds { from, to, weight }))
    })
}

/// Refuses an edge whose `_from` or `_to` names no existing document, as this write sees the
/// store (its own staged writes included), so a concurrent delete cannot slip in between.
fn check_vertices(tx: &WriteTx<'_>, catalog: &Catalog, ends: &EdgeEnds) -> Result<()> {
    for (field, vertex) in [(FROM_FIELD, &ends.from), (TO_FIELD, &ends.to)] {
        let missing = |why: &str| ServiceError::InvalidDocument(format!("{field}: vertex {vertex:?} {why}"));
        let (table, id) = split_vertex(vertex).ok_or_else(|| missing("is not \"table/id\""))?;
        if catalog.table(table).is_none() {
            return Err(missing(&format!("does not exist: there is no table {table:?}")));
        }
        let key = EntityKey::new(table, id).encode();
        let dict = catalog.dict();
        // an expired vertex not yet swept is gone: an edge to it would outlive it
        let exists = match Expiry::of(catalog, &dict, table) {
            None => tx.contains(Space::Entity, &key)?,
            Some(rules) => match tx.get(Space::Entity, &key)? {
                Some(blob) => !rules.expired(&blob, &dict, now_ms())?,
                None => false,
            },
        };
        if !exists {
            return Err(missing("does not exist"));
        }
    }
    Ok(())
}

/// The graph's step of a document change: for an edge, `new_ends` (its new version's ends,
/// prepared) must name existing vertices, and its adjacency entries move from the old version's
/// ends to the new one's.
pub(crate) fn stage(
    w: &mut WriteTx<'_>,
    catalog: &Catalog,
    c: &Change<'_>,
    new_ends: Option<&EdgeEnds>,
    log: &mut Vec<EdgeOp>,
) -> Result<()> {
    if c.table.kind != TableKind::Edge {
        return Ok(());
    }
    if let Some(ends) = new_ends {
        check_vertices(w, catalog, ends)?;
    }
    let old = c.old.map(|b| stored_ends(catalog, c.table, b)).transpose()?.flatten();
    if let Some(old) = &old {
        put_entries(w, &c.table.name, c.id, old, false);
    }
    if let Some(ends) = new_ends {
        put_entries(w, &c.table.name, c.id, ends, true);
    }
    if old.is_some() || new_ends.is_some() {
        // for the in-memory adjacency, once the write commits (`graph::memory::finish`)
        log.push(EdgeOp {
            table: c.table.name.clone(),
            created_at: c.table.created_at,
            id: c.id.to_owned(),
            old,
            new: new_ends.cloned(),
        });
    }
    Ok(())
}

/// Stages (or removes) the two adjacency entries of edge `id` of `table`.
fn put_entries(tx: &mut WriteTx<'_>, table: &str, id: &str, ends: &EdgeEnds, insert: bool) {
    let out = GraphKey::new(Direction::Out, table, &ends.from, id).encode();
    let inn = GraphKey::new(Direction::In, table, &ends.to, id).encode();
    if insert {
        let value = |other: &str| AdjValue { other: other.into(), weight: ends.weight }.encode();
        tx.put(Space::Graph, out, value(&ends.to));
        tx.put(Space::Graph, inn, value(&ends.from));
    } else {
        tx.delete(Space::Graph, out);
        tx.delete(Space::Graph, inn);
    }
}

/// The edges (of cascade edge tables) to delete with `vertex`, as this write sees the store; an
/// edge of a reject edge table refuses the delete (409 `vertex_has_edges`). At most `room` edges:
/// more is 422 `too_many_edges`.
pub(crate) fn incident(
    tx: &WriteTx<'_>,
    catalog: &Catalog,
    vertex: &str,
    room: usize,
) -> Result<Vec<(Arc<TableDef>, String)>> {
    let mut found: Vec<(Arc<TableDef>, String)> = Vec::new();
    for table in catalog.tables().into_iter().filter(|t| t.kind == TableKind::Edge) {
        let cascade = table.vertex_delete() == OnVertexDelete::Cascade;
        for dir in [Direction::Out, Direction::In] {
            let prefix = GraphKey::vertex_prefix(dir, &table.name, vertex);
            let limit = if cascade { room.saturating_sub(found.len()) + 1 } else { 1 };
            let entries = tx.scan_current(Space::Graph, &prefix, limit)?;
            if !cascade {
                if let Some((key, _)) = entries.first() {
                    let edge = GraphKey::decode(key).map_err(|e| ServiceError::Internal(e.to_string()))?;
                    return Err(ServiceError::VertexHasEdges {
                        vertex: vertex.to_owned(),
                        edge: format!("{}/{}", table.name, edge.edge_id),
                    });
                }
                continue;
            }
            for (key, _) in entries {
                let edge = GraphKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?;
                let id = edge.edge_id.into_owned();
                // a self-loop is met twice, out and in
                if !found.iter().any(|(t, e)| t.name == table.name && *e == id) {
                    found.push((table.clone(), id));
                }
            }
            if found.len() > room {
                return Err(ServiceError::TooManyEdges { vertex: vertex.to_owned(), limit: MAX_CASCADE });
            }
        }
    }
    Ok(found)
}
