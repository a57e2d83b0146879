//! Documents: get, put, patch (RFC 7396 merge patch), delete and list, with content ETags.
//!
//! Each write operation is one recipe over the write pipeline (`pipeline::write`): the document is
//! prepared outside the committer; on the committer, [`put_uncounted`] and [`remove`] read the
//! stored version, check the preconditions, stage every derived family's change
//! (`write::derived`: adjacency, TTL, views, vectors, index entries, fulltext, history,
//! changefeed), then the table's count and the entity key. [`delete_stored`] adds the cascade over a vertex's edges.

use super::patch::{PATCH_ATTEMPTS, patch_in, patch_outside, unchanged};
use super::write::{self, Change, Derived, Prepared, Write, live_table, prepare, same_schema};
use crate::catalog::TableDef;
use crate::keys::EntityKey;
use crate::service::core::Handle;
use crate::service::core::expiry::{self, Expiry, expired, now_ms};
use crate::service::graph::adjacency;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space};
use serde::Serialize;
use serde_json::{Map, Value};
use std::ops::Bound;
use std::sync::Arc;
use utoipa::ToSchema;

mod conditions;
mod restore;
mod ttl_sweep;

pub use crate::service::core::render::{Document, etag};
pub use crate::service::core::render::{DocumentPage, RawPage};
pub use conditions::{EtagMatch, Preconditions};
pub use ttl_sweep::SweepOutcome;
pub use write::{check_id, take_id};

/// Most documents one list call returns.
pub const MAX_PAGE: usize = 1000;
/// Most documents one insert takes (as many as a batch has operations).
pub const MAX_INSERT: usize = 10_000;
/// Inserts of more documents than this are encoded on the blocking pool.
const INLINE_PREPARE: usize = 16;

/// The result of a put.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct PutOutcome {
    /// the document id
    #[serde(rename = "_id")]
    pub id: String,
    /// true when the document did not exist before
    pub created: bool,
    /// the new content tag
    #[serde(skip)]
    pub etag: String,
}

/// A new time-ordered id (UUIDv7).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Stores a prepared document (create or replace) in the write.
pub(crate) fn put_encoded(
    w: &mut Write<'_, '_>,
    table: &TableDef,
    doc: Prepared,
    pre: &Preconditions,
) -> Result<PutOutcome> {
    let (out, new) = put_uncounted(w, table, doc, pre)?;
    crate::service::core::counts::add(w, &table.name, u64::from(new))?;
    Ok(out)
}

/// [`put_encoded`] but for the table's document count, and saying whether the document's key is
/// new: for a write that stores many and counts them once with [`crate::service::core::counts::add`] (an import chunk).
pub(crate) fn put_uncounted(
    w: &mut Write<'_, '_>,
    table: &TableDef,
    doc: Prepared,
    pre: &Preconditions,
) -> Result<(PutOutcome, bool)> {
    let Prepared { id, blob, mut derived } = doc;
    let catalog = w.catalog();
    let key = EntityKey::new(&table.name, &id).encode();
    let old = w.get(Space::Entity, &key)?;
    // An expired document not yet swept is replaced as if it were gone (its entries still go).
    let live = match &old {
        Some(b) if !expired(catalog, &table.name, b)? => Some(etag(b)),
        _ => None,
    };
    pre.check(live.as_deref())?;
    let change = Change { table, id: &id, old: old.as_deref(), new: Some(&blob) };
    write::derived(w, &change, &mut derived)?;
    catalog.stage_fields(w);
    let tag = etag(&blob);
    w.put(Space::Entity, key, blob);
    Ok((PutOutcome { id, created: live.is_none(), etag: tag }, old.is_none()))
}

/// Deletes a document in the write; `Ok(false)` when it does not exist or has expired (and no
/// precondition demanded it). See [`delete_stored`].
pub(crate) fn delete_in(w: &mut Write<'_, '_>, table: &TableDef, id: &str, pre: &Preconditions) -> Result<bool> {
    let key = EntityKey::new(&table.name, id).encode();
    let mut old = w.get(Space::Entity, &key)?;
    // an expired document is gone for its clients; the sweep deletes it
    if let Some(b) = &old
        && expired(w.catalog(), &table.name, b)?
    {
        old = None;
    }
    pre.check(old.as_deref().map(etag).as_deref())?;
    let Some(old) = old else { return Ok(false) };
    delete_stored(w, table, id, key, &old)?;
    Ok(true)
}

/// Deletes stored document `id` (stored as `old` under `key`) in the write: the user delete's
/// and the TTL sweep's one path. As a vertex, its edges in cascade edge tables go with it (and
/// theirs, when an edge is itself a vertex); an edge in a reject edge table refuses the delete.
pub(crate) fn delete_stored(w: &mut Write<'_, '_>, table: &TableDef, id: &str, key: Vec<u8>, old: &[u8]) -> Result<()> {
    remove(w, table, id, key, old)?;
    let mut vertices = vec![format!("{}/{id}", table.name)];
    let mut cascaded = 0;
    while let Some(vertex) = vertices.pop() {
        for (edge_table, edge_id) in adjacency::incident(w, w.catalog(), &vertex, adjacency::MAX_CASCADE - cascaded)? {
            let key = EntityKey::new(&edge_table.name, &edge_id).encode();
            let Some(old) = w.get(Space::Entity, &key)? else { continue };
            remove(w, &edge_table, &edge_id, key, &old)?;
            cascaded += 1;
            vertices.push(format!("{}/{edge_id}", edge_table.name));
        }
    }
    Ok(())
}

/// Removes a stored document: every derived family's part of it, its count and its entity.
fn remove(w: &mut Write<'_, '_>, table: &TableDef, id: &str, key: Vec<u8>, old: &[u8]) -> Result<()> {
    let change = Change { table, id, old: Some(old), new: None };
    write::derived(w, &change, &mut Derived::default())?;
    crate::service::core::counts::bump(w, &table.name, -1)?;
    w.delete(Space::Entity, key);
    Ok(())
}

/// A listing cursor is bound to its table (see [`crate::service::core::cursor`]).
fn listing_binding(table: &TableDef) -> crate::service::core::cursor::Binding {
    crate::service::core::cursor::Binding::table(&table.name, table.created_at, &[b"list"])
}

/// The body to prepare: a typed table may change under the write (a column added), so a copy is
/// kept to prepare again; a schemaless one cannot (it never gets columns), so the body moves.
fn body_for<T: Clone>(def: &TableDef, kept: &mut Option<T>) -> Result<T> {
    let body = if def.columns.is_some() { kept.clone() } else { kept.take() };
    body.ok_or_else(|| ServiceError::Internal("a schemaless table's definition changed under a write".into()))
}

fn encode_cursor(table: &TableDef, id: &str) -> String {
    crate::service::core::cursor::seal(listing_binding(table), id.as_bytes())
}

fn decode_cursor(table: &TableDef, cursor: &str) -> Result<String> {
    String::from_utf8(crate::service::core::cursor::open(listing_binding(table), cursor)?)
        .map_err(|_| crate::service::core::cursor::invalid("it is not one this server handed out"))
}

impl Pipeline {
    /// Reads one document.
    pub async fn get_document(self: &Arc<Self>, table: String, id: String) -> Result<Document> {
        check_id(&id)?;
        self.read_point(move |db| {
            db.core.table_or_404(&table)?;
            let key = EntityKey::new(&table, &id).encode();
            let gone = || ServiceError::DocumentNotFound { table: table.clone(), id: id.clone() };
            let blob = db.core.store.get(Space::Entity, &key)?.ok_or_else(gone)?;
            let json = db.core.catalog.with_dict(|dict| {
                if expiry::is_expired(&db.core.catalog, dict, &table, &blob, now_ms())? {
                    return Err(gone());
                }
                crate::service::core::render::json_with_id(dict, &id, &blob)
            })?;
            Ok(Document { json, etag: etag(&blob) })
        })
    }

    /// Creates or replaces a document.
    pub async fn put_document(
        self: &Arc<Self>,
        table: String,
        id: String,
        mut doc: Map<String, Value>,
        pre: Preconditions,
    ) -> Result<PutOutcome> {
        take_id(&mut doc, Some(&id))?;
        let mut kept = Some(doc);
        // Prepared again only when a column was added meanwhile: each retry follows a commit.
        loop {
            let def = self.core.table_or_404(&table)?;
            let mut prepared = prepare(&self.core.catalog, &def, id.clone(), body_for(&def, &mut kept)?)?;
            // planning may wait on a graph's lock (held by a write): on the blocking pool
            if self.core.catalog.indexes(&table).iter().any(|d| d.kind == crate::catalog::IndexKind::Vector) {
                let (db, d) = (self.clone(), def.clone());
                prepared = tokio::task::spawn_blocking(move || {
                    prepared.plan_vectors(&db, &d);
                    prepared
                })
                .await
                .map_err(|e| ServiceError::Internal(format!("planning task failed: {e}")))?;
            }
            let (t, pre) = (table.clone(), pre.clone());
            let done = self
                .write(move |tx, db| {
                    let live = live_table(&db.core.catalog, &t, Some(&def))?;
                    if !same_schema(&live, &def) {
                        return Ok(None);
                    }
                    put_encoded(tx, &live, prepared, &pre).map(Some)
                })
                .await?;
            if let Some(outcome) = done {
                return Ok(outcome);
            }
        }
    }

    /// Inserts one or more documents (ids generated where `_id` is absent); all or nothing.
    pub async fn insert_documents(self: &Arc<Self>, table: String, docs: Vec<Value>) -> Result<Vec<PutOutcome>> {
        if docs.len() > MAX_INSERT {
            return Err(ServiceError::InvalidRequest(format!("an insert holds at most {MAX_INSERT} documents")));
        }
        let docs = docs
            .into_iter()
            .enumerate()
            .map(|(i, doc)| {
                let Value::Object(mut doc) = doc else {
                    return Err(ServiceError::InvalidDocument(format!("item {i} is not an object")));
                };
                let id = take_id(&mut doc, None)?.unwrap_or_else(new_id);
                Ok((id, doc))
            })
            .collect::<Result<Vec<_>>>()?;
        let count = docs.len();
        let mut kept = Some(docs);
        loop {
            let def = self.core.table_or_404(&table)?;
            let body = body_for(&def, &mut kept)?;
            let prepare_all = {
                let (db, def) = (self.clone(), def.clone());
                move || {
                    let prepare_one = |(id, doc)| {
                        let mut p = prepare(&db.core.catalog, &def, id, doc)?;
                        p.plan_vectors(&db, &def);
                        Ok(p)
                    };
                    body.into_iter().map(prepare_one).collect::<Result<Vec<_>>>()
                }
            };
            // Many documents are encoded on the blocking pool, not on a runtime worker.
            let prepared = if count > INLINE_PREPARE {
                tokio::task::spawn_blocking(prepare_all)
                    .await
                    .map_err(|e| ServiceError::Internal(format!("prepare task failed: {e}")))??
            } else {
                prepare_all()?
            };
            let t = table.clone();
            let done = self
                .write(move |tx, db| {
                    let live = live_table(&db.core.catalog, &t, Some(&def))?;
                    if !same_schema(&live, &def) {
                        return Ok(None);
                    }
                    let none = Preconditions::default();
                    prepared.into_iter().map(|p| put_encoded(tx, &live, p, &none)).collect::<Result<_>>().map(Some)
                })
                .await?;
            if let Some(outcomes) = done {
                return Ok(outcomes);
            }
        }
    }

    /// Applies a JSON merge patch to a document.
    pub async fn patch_document(
        self: &Arc<Self>,
        table: String,
        id: String,
        patch: Value,
        pre: Preconditions,
    ) -> Result<PutOutcome> {
        check_id(&id)?;
        // Anything but an object replaces the whole document with a non-object: refused whatever
        // the stored document or the preconditions are, so before the committer.
        if !patch.is_object() {
            return Err(ServiceError::InvalidDocument("a merge patch must be a JSON object".into()));
        }
        // Merged and encoded outside the committer from the document as read; the write checks
        // it is still that version (and the table's columns unchanged).
        for _ in 0..PATCH_ATTEMPTS {
            let def = self.core.table_or_404(&table)?;
            let Some(patched) = patch_outside(self, &def, &id, &patch, |tag| pre.check(Some(tag)).is_ok())? else {
                break;
            };
            let (t, i, pre) = (table.clone(), id.clone(), pre.clone());
            let done = self
                .write(move |tx, db| {
                    let live = live_table(&db.core.catalog, &t, Some(&def))?;
                    if !same_schema(&live, &def) || !unchanged(tx, &t, &i, &patched.base)? {
                        return Ok(None);
                    }
                    put_encoded(tx, &live, patched.prepared, &pre).map(Some)
                })
                .await?;
            if let Some(outcome) = done {
                return Ok(outcome);
            }
        }
        self.core.table_or_404(&table)?;
        self.write(move |tx, db| {
            let live = live_table(&db.core.catalog, &table, None)?;
            let prepared = patch_in(tx, &db.core.catalog, &live, &id, &patch, &pre)?;
            put_encoded(tx, &live, prepared, &Preconditions::default())
        })
        .await
    }

    /// Deletes a document.
    pub async fn delete_document(self: &Arc<Self>, table: String, id: String, pre: Preconditions) -> Result<()> {
        // an id no document can have is a bad request, whatever the preconditions say
        check_id(&id)?;
        self.core.table_or_404(&table)?;
        self.write(move |tx, db| {
            let live = live_table(&db.core.catalog, &table, None)?;
            if delete_in(tx, &live, &id, &pre)? { Ok(()) } else { Err(ServiceError::DocumentNotFound { table, id }) }
        })
        .await
    }

    /// One page of documents in id order, after `cursor`.
    pub async fn list_documents(
        self: &Arc<Self>,
        table: String,
        limit: usize,
        cursor: Option<String>,
    ) -> Result<RawPage> {
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_PAGE}")));
        }
        self.read(move |db| {
            let def = db.core.table_or_404(&table)?;
            let after = cursor.as_deref().map(|c| decode_cursor(&def, c)).transpose()?;
            let prefix = crate::keys::table_prefix(&table);
            let lower = match &after {
                Some(id) => Bound::Excluded(EntityKey::new(&table, id).encode()),
                None => Bound::Included(prefix.clone()),
            };
            let upper = crate::keys::prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
            let view = db.core.store.snapshot();
            let mut documents = Vec::with_capacity(limit.min(64));
            let mut last_id = None;
            let mut cursor = None;
            db.core.catalog.with_dict(|dict| -> Result<()> {
                let (rules, now) = (Expiry::of(&db.core.catalog, dict, &table), now_ms());
                for item in view.scan(Space::Entity, KeyRange::Between(lower, upper), false) {
                    let (key, blob) = item?;
                    if rules.as_ref().map(|r| r.expired(&blob, dict, now)).transpose()? == Some(true) {
                        continue;
                    }
                    if documents.len() == limit {
                        cursor = last_id.as_deref().map(|id| encode_cursor(&def, id));
                        break;
                    }
                    let id =
                        EntityKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?.id.into_owned();
                    documents.push(crate::service::core::render::json_with_id(dict, &id, &blob)?);
                    last_id = Some(id);
                }
                Ok(())
            })?;
            Ok(RawPage { documents, cursor })
        })
        .await
    }
}
