//! Secondary indexes: definitions, maintenance inside every document write, background backfill.

pub mod entries;
pub mod geo;

use super::{Db, Result, ServiceError};
use crate::catalog::{Catalog, IndexDef, IndexKind, IndexState, TableDef};
use crate::keys::{EntityKey, IdxKey, RidxKey, SidxKey, prefix_successor};
use crate::storage::{KeyRange, Space, WriteTx};
use entries::Entry;
use serde::Deserialize;
use std::ops::Bound;
use std::sync::Arc;
use utoipa::ToSchema;

/// Documents indexed per backfill write.
const BACKFILL_CHUNK: usize = 2000;
/// Most fields of a composite index.
const MAX_FIELDS: usize = 8;

/// The body of `POST /v1/tables/{table}/indexes`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateIndex {
    /// index name, unique within the table
    #[schema(example = "by_age")]
    pub name: String,
    /// `hash`, `unique`, `range` or `spatial`
    pub kind: IndexKind,
    /// dotted field paths: 1-8 for hash and unique (composite), exactly 1 for range and spatial
    #[schema(example = json!(["age"]))]
    pub fields: Vec<String>,
}

fn check(req: &CreateIndex) -> Result<()> {
    let bad = |m: String| Err(ServiceError::InvalidRequest(m));
    if req.name.is_empty() || req.name.len() > 256 || req.name.chars().any(char::is_control) {
        return bad("index name must be 1-256 bytes without control characters".into());
    }
    if req.fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)) {
        return bad("field paths must be non-empty dotted names like `address.city`".into());
    }
    match req.kind {
        IndexKind::Hash | IndexKind::Unique if (1..=MAX_FIELDS).contains(&req.fields.len()) => Ok(()),
        IndexKind::Hash | IndexKind::Unique => bad(format!("a {:?} index takes 1 to {MAX_FIELDS} fields", req.kind)),
        IndexKind::Range | IndexKind::Spatial if req.fields.len() == 1 => Ok(()),
        IndexKind::Range | IndexKind::Spatial => bad("a range or spatial index takes exactly one field".into()),
        IndexKind::Fulltext | IndexKind::Vector | IndexKind::Ttl => Err(ServiceError::UnsupportedIndexKind(req.kind)),
    }
}

/// The key prefixes of one index's entries.
fn index_prefixes(table: &str, index: &str) -> Vec<(Space, Vec<u8>)> {
    vec![
        (Space::Idx, IdxKey::index_prefix(table, index)),
        (Space::Ridx, RidxKey::index_prefix(table, index)),
        (Space::Sidx, SidxKey::index_prefix(table, index)),
    ]
}

/// Replaces the index entries of document `id` (old blob → new blob) in the write, for every index
/// that is building or ready; a unique index that already maps a new value to another document
/// fails the write with `unique_violation`.
pub(crate) fn update(
    tx: &mut WriteTx<'_>,
    catalog: &Arc<Catalog>,
    table: &TableDef,
    id: &str,
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<()> {
    let defs = catalog.indexes(&table.name);
    if defs.is_empty() {
        return Ok(());
    }
    catalog.with_dict(|dict| {
        for def in defs.iter().filter(|d| d.is_maintained()) {
            // The old document's entries are never refused: one stored before the index existed
            // may be over the cap, and must still be patchable and deletable.
            let before = old.map(|b| entries::stored_entries(def, id, b, dict)).transpose()?.unwrap_or_default();
            let after = new.map(|b| entries::entries(def, id, b, dict)).transpose()?.unwrap_or_default();
            for e in before.iter().filter(|e| after.binary_search(e).is_err()) {
                tx.delete(e.space, e.key.clone());
            }
            for e in after.iter().filter(|e| before.binary_search(e).is_err()) {
                put_entry(tx, def, id, e)?;
            }
            mark_multikey(tx, catalog, def, after.len());
        }
        Ok(())
    })
}

/// Sets the index's multikey flag, in the write, the first time a document has several entries.
fn mark_multikey(tx: &mut WriteTx<'_>, catalog: &Arc<Catalog>, def: &IndexDef, entries: usize) {
    if entries > 1 && !def.multikey && matches!(def.kind, IndexKind::Hash | IndexKind::Unique | IndexKind::Range) {
        let mut next = def.clone();
        next.multikey = true;
        catalog.put_index(tx, next);
    }
}

fn put_entry(tx: &mut WriteTx<'_>, def: &IndexDef, id: &str, e: &Entry) -> Result<()> {
    if def.kind == IndexKind::Unique
        && let Some(owner) = tx.get(e.space, &e.key)?
        && owner != id.as_bytes()
    {
        let key = crate::keys::display(e.space.name(), &e.key);
        return Err(ServiceError::UniqueViolation {
            index: def.name.clone(),
            detail: format!("{key} belongs to document {:?}", String::from_utf8_lossy(&owner)),
        });
    }
    tx.put(e.space, e.key.clone(), e.value.clone());
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

enum Step {
    More(Vec<u8>),
    Done,
    Stale,
}

impl Db {
    /// Creates an index; on a non-empty table it is `building` until a background job has indexed
    /// every document (queries do not use it before it is `ready`).
    pub async fn create_index(self: &Arc<Self>, table: String, req: CreateIndex) -> Result<IndexDef> {
        check(&req)?;
        let def = self
            .write(move |tx, db| {
                db.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
                if db.catalog.index(&table, &req.name).is_some() {
                    return Err(ServiceError::IndexExists { table, index: req.name });
                }
                for (space, prefix) in index_prefixes(&table, &req.name) {
                    if tx.scan(space, KeyRange::Prefix(prefix)).next().is_some() {
                        return Err(ServiceError::IndexDropping { table, index: req.name });
                    }
                }
                let docs = super::documents::count_in(tx, &table)?;
                let state = if docs == 0 { IndexState::Ready } else { IndexState::Building { done: 0, total: docs } };
                let def = IndexDef {
                    table,
                    name: req.name,
                    kind: req.kind,
                    fields: req.fields,
                    options: Default::default(),
                    state,
                    created_at: now_ms(),
                    multikey: false,
                };
                db.catalog.put_index(tx, def.clone());
                Ok(def)
            })
            .await?;
        if !def.is_ready() {
            self.spawn_backfill(&def);
        }
        Ok(def)
    }

    /// Starts (or restarts) the backfill of a building index in the background.
    pub(crate) fn spawn_backfill(self: &Arc<Self>, def: &IndexDef) {
        let (db, table, name, created_at) = (self.clone(), def.table.clone(), def.name.clone(), def.created_at);
        tokio::spawn(async move {
            if let Err(e) = db.backfill(&table, &name, created_at).await {
                tracing::error!(table, index = name, error = %e, "index backfill failed");
            }
        });
    }

    async fn backfill(self: &Arc<Self>, table: &str, name: &str, created_at: i64) -> Result<()> {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let (t, n, from) = (table.to_owned(), name.to_owned(), after.take());
            let step = self.write(move |tx, db| backfill_chunk(tx, &db.catalog, &t, &n, created_at, from)).await;
            match step {
                Ok(Step::More(last)) => after = Some(last),
                Ok(Step::Done | Step::Stale) => return Ok(()),
                Err(e @ ServiceError::UniqueViolation { .. }) => {
                    let (t, n, error) = (table.to_owned(), name.to_owned(), e.to_string());
                    self.write(move |tx, db| {
                        if let Some(def) = db.catalog.index(&t, &n).filter(|d| d.created_at == created_at) {
                            let mut def = (*def).clone();
                            def.state = IndexState::Failed { error };
                            db.catalog.put_index(tx, def);
                        }
                        Ok(())
                    })
                    .await?;
                    return self.purge(index_prefixes(table, name)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Every index of a table.
    pub async fn list_indexes(self: &Arc<Self>, table: String) -> Result<Vec<IndexDef>> {
        self.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        Ok(self.catalog.indexes(&table).iter().map(|d| (**d).clone()).collect())
    }

    /// One index with its state and progress.
    pub async fn get_index(self: &Arc<Self>, table: String, name: String) -> Result<IndexDef> {
        self.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        self.catalog
            .index(&table, &name)
            .map(|d| (*d).clone())
            .ok_or(ServiceError::IndexNotFound { table, index: name })
    }

    /// Drops an index and removes its entries.
    pub async fn drop_index(self: &Arc<Self>, table: String, name: String) -> Result<()> {
        let (t, n) = (table.clone(), name.clone());
        self.write(move |tx, db| {
            db.catalog.table(&t).ok_or_else(|| ServiceError::TableNotFound(t.clone()))?;
            if db.catalog.index(&t, &n).is_none() {
                return Err(ServiceError::IndexNotFound { table: t, index: n });
            }
            db.catalog.remove_index(tx, &t, &n);
            Ok(())
        })
        .await?;
        let db = self.clone();
        tokio::spawn(async move { db.purge(index_prefixes(&table, &name)).await })
            .await
            .map_err(|e| ServiceError::Internal(format!("purge task failed: {e}")))?
    }
}

/// Indexes the next chunk of documents after `after`.
fn backfill_chunk(
    tx: &mut WriteTx<'_>,
    catalog: &Arc<Catalog>,
    table: &str,
    name: &str,
    created_at: i64,
    after: Option<Vec<u8>>,
) -> Result<Step> {
    let Some(def) = catalog.index(table, name).filter(|d| d.created_at == created_at && !d.is_ready()) else {
        return Ok(Step::Stale);
    };
    let prefix = crate::keys::table_prefix(table);
    let lower = after.map_or(Bound::Included(prefix.clone()), Bound::Excluded);
    let upper = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let docs =
        tx.scan(Space::Entity, KeyRange::Between(lower, upper)).take(BACKFILL_CHUNK).collect::<Result<Vec<_>, _>>()?;
    let mut multikey = def.multikey;
    catalog.with_dict(|dict| {
        for (key, blob) in &docs {
            let id = EntityKey::decode(key).map_err(|e| ServiceError::Internal(e.to_string()))?.id;
            let entries = entries::entries(&def, &id, blob, dict)?;
            multikey |= entries.len() > 1 && def.kind != IndexKind::Spatial;
            for e in entries {
                put_entry(tx, &def, &id, &e)?;
            }
        }
        Ok::<_, ServiceError>(())
    })?;
    let mut next = (*def).clone();
    next.multikey = multikey;
    let finished = docs.len() < BACKFILL_CHUNK;
    next.state = match (finished, &def.state) {
        (true, _) => IndexState::Ready,
        (false, IndexState::Building { done, total }) => {
            IndexState::Building { done: done + docs.len() as u64, total: (*total).max(done + docs.len() as u64) }
        }
        (false, other) => other.clone(),
    };
    catalog.put_index(tx, next);
    Ok(match docs.last() {
        Some((key, _)) if !finished => Step::More(key.to_vec()),
        _ => Step::Done,
    })
}
