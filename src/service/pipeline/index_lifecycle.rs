//! An index's lifecycle: created (`building` on a non-empty table, backfilled chunk by chunk in
//! the background), listed, dropped with a durable mark and a purge of its keys, a vector index
//! rebuilt. It calls the fulltext, vector and TTL models' entry points, so it is the database's.

use super::purge::Purge;
use super::write::Write;
use crate::catalog::{Catalog, IndexDef, IndexKind, IndexState};
use crate::keys::{EntityKey, VecKey, prefix_successor};
use crate::service::core::Handle;
use crate::service::indexes::entries::{self, Entry};
use crate::service::indexes::stage::put_entry;
use crate::service::indexes::{CreateIndex, check, index_prefixes};
use crate::service::pipeline::Pipeline;
use crate::service::pipeline::build_lifecycle::Chunk;
use crate::service::search::maintain;
use crate::service::search::postings::{self, DocPostings};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Slice, Space, WriteTx};
use std::ops::Bound;
use std::sync::Arc;

impl Pipeline {
    /// Creates an index; on a non-empty table it is `building` until a background job has indexed
    /// every document (queries do not use it before it is `ready`).
    pub async fn create_index(self: &Arc<Self>, table: String, req: CreateIndex) -> Result<IndexDef> {
        let options = match (req.kind, check(&req)?) {
            (IndexKind::Vector, options) => crate::service::vectors::parse_options(&options)?.1,
            // with its defaults filled in
            (IndexKind::Fulltext, options) => {
                crate::service::search::options::FulltextOptions::parse(&options, &req.fields)?.to_json()
            }
            (_, options) => options,
        };
        let db = self.clone();
        self.core.detached(async move { db.create_index_now(table, req, options).await }).await
    }

    async fn create_index_now(
        self: &Arc<Self>,
        table: String,
        req: CreateIndex,
        options: serde_json::Map<String, serde_json::Value>,
    ) -> Result<IndexDef> {
        let def = self
            .write(move |tx, db| {
                db.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
                if db.core.catalog.index(&table, &req.name).is_some() {
                    return Err(ServiceError::IndexExists { table, index: req.name });
                }
                // The old index's purge would remove the new one's entries.
                if db.core.catalog.index_dropping(&table, &req.name).is_some() {
                    return Err(ServiceError::IndexDropping { table, index: req.name });
                }
                let docs = crate::service::core::counts::count_in(tx, &table)?;
                let state = if docs == 0 { IndexState::Ready } else { IndexState::Building { done: 0, total: docs } };
                let created_at = db.core.catalog.next_created_at(tx)?;
                let def = IndexDef {
                    table,
                    name: req.name,
                    kind: req.kind,
                    fields: req.fields,
                    options,
                    state,
                    created_at,
                    multikey: false,
                };
                db.core.catalog.put_index(tx, def.clone());
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
        let vector = def.kind == IndexKind::Vector;
        drop(self.core.spawn_job(async move {
            if let Err(e) = db.backfill(&table, &name, created_at).await {
                tracing::error!(table, index = name, error = %e, "index backfill failed");
                return;
            }
            // A vector build rewrote each node's links many times: the versions it left would be
            // stepped over by every later open's scan, so the family is compacted once now.
            if vector && db.core.catalog.index(&table, &name).is_some_and(|d| d.created_at == created_at && d.is_ready()) {
                let started = std::time::Instant::now();
                match db.read(|db| Ok(db.core.store.compact(Space::Vec)?)).await {
                    Ok(()) => tracing::info!(table, index = name, ms = started.elapsed().as_millis() as u64, "vector keys compacted after the build"),
                    Err(e) => tracing::warn!(table, index = name, error = %e, "compacting the vector keys after a build failed"),
                }
            }
        }));
    }

    /// Indexes the table's documents chunk by chunk. Each chunk is read from a snapshot and its
    /// entries computed on the blocking pool ([`prepare_chunk`]); the committer only checks that
    /// each document is still the version read and stages its entries ([`commit_chunk`]), so
    /// other writes wait for no reading, decoding or entry computation.
    async fn backfill(self: &Arc<Self>, table: &str, name: &str, created_at: i64) -> Result<()> {
        let chunk = self.core.backfill_chunk.max(1);
        let step = |from: Option<Vec<u8>>| {
            let (db, t, n) = (self.clone(), table.to_owned(), name.to_owned());
            async move {
                match db.read(move |db| prepare_chunk(db, &t, &n, created_at, from, chunk)).await? {
                    Some(prepared) => db.write(move |tx, db| commit_chunk(tx, &db.core.catalog, prepared)).await,
                    None => Ok(Chunk::Done),
                }
            }
        };
        let (t, n) = (table.to_owned(), name.to_owned());
        let fail = move |tx: &mut WriteTx<'_>, db: &Pipeline, error: String| {
            if let Some(def) = db.core.catalog.index(&t, &n).filter(|d| d.created_at == created_at) {
                let mut def = (*def).clone();
                def.state = IndexState::Failed { error };
                db.core.catalog.put_index(tx, def);
            }
        };
        self.run_build(step, fail, failed_purge(table, name, created_at)).await
    }

    /// Every index of a table.
    pub async fn list_indexes(self: &Arc<Self>, table: String) -> Result<Vec<IndexDef>> {
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let view = self.core.store.snapshot();
        let mut out = Vec::new();
        // as reads see them (see `catalog::stored_index`)
        for def in self.core.catalog.indexes(&table).iter() {
            out.extend(crate::catalog::stored_index(&view, &table, &def.name)?);
        }
        Ok(out)
    }

    /// One index with its state and progress.
    pub async fn get_index(self: &Arc<Self>, table: String, name: String) -> Result<IndexDef> {
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        // as reads see it (see `catalog::stored_index`), if the catalog still has it
        let stored = match self.core.catalog.index(&table, &name) {
            Some(_) => crate::catalog::stored_index(&self.core.store.snapshot(), &table, &name)?,
            None => None,
        };
        stored.ok_or(ServiceError::IndexNotFound { table, index: name })
    }

    /// Drops an index and removes its entries. The definition goes at once with a durable drop
    /// mark; the name stays taken (`index_dropping`) until the entries are gone, also across a
    /// restart, which resumes the purge.
    pub async fn drop_index(self: &Arc<Self>, table: String, name: String) -> Result<()> {
        let db = self.clone();
        self.core.detached(async move { db.drop_index_now(table, name).await }).await
    }

    async fn drop_index_now(self: &Arc<Self>, table: String, name: String) -> Result<()> {
        let (t, n) = (table.clone(), name.clone());
        let created_at = self
            .write(move |tx, db| {
                db.core.catalog.table(&t).ok_or_else(|| ServiceError::TableNotFound(t.clone()))?;
                let def = db.core.catalog.index(&t, &n).ok_or(ServiceError::IndexNotFound { table: t, index: n })?;
                db.core.catalog.drop_index(tx, &def);
                Ok(def.created_at)
            })
            .await?;
        self.vectors.graphs.forget(&table, &name);
        self.purge_dropped_index(&table, &name, created_at)
            .await
            .map_err(|e| ServiceError::Internal(format!("purge task failed: {e}")))?
    }

    /// Removes a dropped index's entries in a task of its own, then its drop mark.
    pub(crate) fn purge_dropped_index(
        self: &Arc<Self>,
        table: &str,
        name: &str,
        created_at: i64,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let (lt, ln, ft, fname) = (table.to_owned(), name.to_owned(), table.to_owned(), name.to_owned());
        let (db, rt, rn) = (self.clone(), table.to_owned(), name.to_owned());
        let purge = Purge {
            prefixes: index_prefixes(table, name),
            // Only while the mark is this drop's: a table drop ends the index drop (its purge
            // covers the entries), after which the name may be created and dropped again.
            live: Box::new(move |db| db.core.catalog.index_dropping(&lt, &ln) == Some(created_at)),
            finish: Box::new(move |tx, db| {
                db.core.catalog.finish_index_drop(tx, &ft, &fname);
                Ok(())
            }),
            feed: None,
        };
        // A TTL index leaves no keys of its own, but expiry entries at times it computed: they
        // move first, before the mark goes (so a drop resumed at open moves them again). For
        // other kinds this is one scan of the table's expiry entries (none, or all still right).
        self.core.spawn_job(async move {
            let repaired = match db.core.catalog.table(&rt) {
                Some(_) if db.core.catalog.index_dropping(&rt, &rn) == Some(created_at) => db.ttl.repair_ttl(&rt).await,
                _ => Ok(()),
            };
            let r = match repaired {
                Ok(()) => db.purge(purge).await,
                Err(e) => Err(e),
            };
            if let Err(e) = &r {
                tracing::error!(table = rt, index = rn, error = %e, "index drop stopped; it resumes at the next start");
            }
            r
        })
    }

    /// Removes the entries a failed build left (resumed at open).
    pub(crate) fn purge_failed_index(self: &Arc<Self>, def: &IndexDef) {
        let purge = failed_purge(&def.table, &def.name, def.created_at);
        drop(self.spawn_purge(format!("failed index {:?} of table {:?}", def.name, def.table), purge));
    }
}

/// The purge of a failed build's entries: it stops as soon as that index is dropped (the drop
/// purges them, and the name may then be reused).
fn failed_purge(table: &str, name: &str, created_at: i64) -> Purge {
    let (t, n) = (table.to_owned(), name.to_owned());
    Purge {
        prefixes: index_prefixes(table, name),
        live: Box::new(move |db| {
            db.core.catalog.index(&t, &n).is_some_and(|d| d.created_at == created_at && !d.is_maintained())
        }),
        finish: Box::new(|_, _| Ok(())),
        feed: None,
    }
}

/// One document of a backfill chunk, as read from a snapshot outside the committer.
struct PreparedDoc {
    key: Slice,
    id: String,
    blob: Slice,
    /// its entries, or why the index cannot hold it (naming the document)
    entries: Result<Vec<Entry>>,
    /// a fulltext index's terms
    terms: Option<DocPostings>,
    /// a vector index's vector
    vector: Option<Vec<f32>>,
    /// and its insert's plan (see `vectors::bulk`)
    plan: Option<crate::service::vectors::hnsw::InsertPlan>,
}

/// A backfill chunk read and computed outside the committer, for [`commit_chunk`].
struct PreparedChunk {
    def: Arc<IndexDef>,
    docs: Vec<PreparedDoc>,
    /// the chunk size asked for: fewer documents means the end of the table
    chunk: usize,
    /// the first chunk of this run of the build (from the table's start: a build resumed at open
    /// starts over, so its progress does too)
    first: bool,
}

/// On the blocking pool: reads the next `chunk` documents after `after` from a snapshot and
/// computes each one's entries. `None` when the index is no longer this building index.
fn prepare_chunk(
    db: &Pipeline,
    table: &str,
    name: &str,
    created_at: i64,
    after: Option<Vec<u8>>,
    chunk: usize,
) -> Result<Option<PreparedChunk>> {
    let Some(def) = db.core.catalog.index(table, name).filter(|d| d.created_at == created_at && !d.is_ready()) else {
        return Ok(None);
    };
    // as committed: the committer checks the chunk against what it holds then
    let view = db.core.store.committed();
    // Taken after the snapshot, so it holds every field name the snapshot's blobs use.
    let dict = db.core.catalog.dict();
    // a vector index takes what its graph can plan together (see `vectors::bulk`)
    let chunk = match def.kind {
        IndexKind::Vector => crate::service::vectors::bulk_chunk(db.vectors.vector_nodes(&def), chunk),
        _ => chunk,
    };
    let prefix = crate::keys::table_prefix(table);
    let first = after.is_none();
    let lower = after.map_or(Bound::Included(prefix.clone()), Bound::Excluded);
    let upper = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let mut docs = Vec::new();
    for item in view.scan(Space::Entity, KeyRange::Between(lower, upper), false).take(chunk) {
        let (key, blob) = item?;
        let id = EntityKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?.id.into_owned();
        // What the index fails with names the document to fix.
        let vector = match def.kind {
            IndexKind::Vector => crate::service::vectors::params_of(&def)
                .and_then(|p| crate::service::vectors::doc_vector(&def, &p, &blob, &dict))
                .map_err(|e| ServiceError::InvalidDocument(format!("document {id:?}: {e}"))),
            _ => Ok(None),
        };
        let (vector, vector_error) = match vector {
            Ok(v) => (v, None),
            Err(e) => (None, Some(e)),
        };
        let entries = entries::entries(&def, &id, &blob, &dict).map_err(|e| match e {
            e @ ServiceError::Unavailable(_) => e,
            ServiceError::InvalidDocument(why) => ServiceError::InvalidDocument(format!("document {id:?}: {why}")),
            other => ServiceError::InvalidDocument(format!("document {id:?}: {other}")),
        });
        let entries = match vector_error {
            Some(e) => Err(e),
            None => entries,
        };
        let terms = if def.kind == IndexKind::Fulltext {
            Some(DocPostings::encode(postings::analyze(&def, &maintain::analyzer(&def), &blob, &dict)?))
        } else {
            None
        };
        docs.push(PreparedDoc { key, id, blob, entries, terms, vector, plan: None });
    }
    if def.kind == IndexKind::Vector {
        let items: Vec<(&str, &[f32])> =
            docs.iter().filter_map(|d| Some((d.id.as_str(), d.vector.as_deref()?))).collect();
        let mut plans = db.vectors.plan_inserts(&def, &items).into_iter();
        for doc in docs.iter_mut().filter(|d| d.vector.is_some()) {
            doc.plan = plans.next().flatten();
        }
    }
    #[cfg(test)]
    db.backfill_prepared(docs.len());
    Ok(Some(PreparedChunk { def, docs, chunk, first }))
}

/// On the committer: stages a prepared chunk's entries, if the index is still the building index
/// they were computed for. A document changed or deleted since it was read is skipped: the write
/// that changed it already replaced its entries (writes maintain a building index), and entries
/// of the old version would be stale. So is its entry error, if it had one: the new version is
/// the one that counts, and its write was checked against the index.
fn commit_chunk(tx: &mut Write<'_, '_>, catalog: &Arc<Catalog>, prepared: PreparedChunk) -> Result<Chunk<Vec<u8>>> {
    let PreparedChunk { def: read_def, docs, chunk, first } = prepared;
    let Some(def) = catalog.index(&read_def.table, &read_def.name).filter(|d| {
        d.created_at == read_def.created_at && d.kind == read_def.kind && d.fields == read_def.fields && !d.is_ready()
    }) else {
        return Ok(Chunk::Done);
    };
    let (read, last) = (docs.len(), docs.last().map(|d| d.key.to_vec()));
    let mut multikey = def.multikey;
    for doc in docs {
        if tx.get(Space::Entity, &doc.key)?.as_deref() != Some(&*doc.blob) {
            continue;
        }
        if let Some(terms) = doc.terms {
            maintain::backfill(tx.tx, &mut tx.fulltext, &def, &doc.id, terms)?;
            continue;
        }
        // the document's one expiry entry moves to the earliest time, this index's included
        if def.kind == IndexKind::Ttl {
            crate::service::ttl::move_entry(tx, catalog, &def.table, &doc.id, Some(&doc.blob), Some(&doc.blob))?;
            continue;
        }
        let entries = doc.entries?;
        if def.kind == IndexKind::Vector {
            if let Some(v) = doc.vector {
                crate::service::vectors::log(&mut tx.vectors, &def, &doc.id, Some(v), doc.plan);
            }
            continue;
        }
        multikey |= entries.len() > 1 && def.kind != IndexKind::Spatial;
        for e in entries {
            put_entry(tx, &def, &doc.id, e)?;
        }
    }
    let mut next = (*def).clone();
    next.multikey = multikey;
    // Documents deleted since the read count as done: `total` was only a count at creation.
    let finished = read < chunk;
    next.state = match (finished, &def.state) {
        (true, _) => IndexState::Ready,
        (false, IndexState::Building { done, total }) => {
            let done = if first { 0 } else { *done } + read as u64;
            IndexState::Building { done, total: (*total).max(done) }
        }
        (false, other) => other.clone(),
    };
    catalog.put_index(tx, next);
    Ok(match last {
        Some(key) if !finished => Chunk::More(key),
        _ => Chunk::Done,
    })
}

impl Pipeline {
    /// Rebuilds a vector index from the documents: its keys and cache are removed and a backfill
    /// indexes every document again (the index is `building` meanwhile; searches refuse it until
    /// it is ready).
    pub async fn rebuild_index(self: &Arc<Self>, table: String, name: String) -> Result<IndexDef> {
        let db = self.clone();
        self.core
            .detached(async move {
                let (t, n) = (table.clone(), name.clone());
                let def = db
                    .write(move |tx, db| {
                        db.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
                        let def = db
                            .core
                            .catalog
                            .index(&table, &name)
                            .ok_or(ServiceError::IndexNotFound { table: table.clone(), index: name.clone() })?;
                        if def.kind != IndexKind::Vector {
                            return Err(ServiceError::InvalidRequest(
                                "only vector indexes are rebuilt (the others are kept exact by every write)".into(),
                            ));
                        }
                        if !def.is_ready() {
                            return Err(ServiceError::InvalidRequest(
                                "the index is not ready: a build is under way, or it failed (drop it)".into(),
                            ));
                        }
                        // as this write sees them: a node an earlier write of the same group staged too
                        let keys = tx.scan_current(Space::Vec, &VecKey::index_prefix(&table, &name), usize::MAX)?;
                        for (k, _) in keys {
                            tx.delete(Space::Vec, k);
                        }
                        let docs = crate::service::core::counts::count_in(tx, &table)?;
                        let mut next = (*def).clone();
                        next.state = crate::catalog::IndexState::Building { done: 0, total: docs };
                        db.core.catalog.put_index(tx, next.clone());
                        // the cache empties with the keys (nothing after this can refuse the write)
                        db.vectors.graphs.reset(&next)?;
                        Ok(next)
                    })
                    .await
                    // not committed: the keys are still there, and the emptied cache must go
                    .inspect_err(|_| db.vectors.graphs.forget(&t, &n))?;
                db.spawn_backfill(&def);
                Ok(def)
            })
            .await
    }
}
