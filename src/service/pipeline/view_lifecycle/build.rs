//! Building a view over the documents a table already holds, and removing a dropped or failed
//! view's keys.
//!
//! The build walks the table in `_id` order. Its position (`after`, the last id it added) is part
//! of the view's `building` state, and writes maintain the view only for documents up to it
//! ([`ViewDef::covers`]): a document after it is added by the build when the build gets there,
//! as it is then. So aggregates, which are not idempotent like index entries, count each document
//! exactly once. Each chunk is read and computed from a snapshot on the blocking pool; on the
//! committer, the chunk's range of ids is read again as committed, and a document written since
//! the snapshot (changed, added or deleted) is taken as it is now.

use crate::catalog::{ViewDef, ViewState};
use crate::keys::{EntityKey, ViewKey, prefix_successor};
use crate::service::core::Handle;
use crate::service::pipeline::Pipeline;
use crate::service::pipeline::build_lifecycle::Chunk;
use crate::service::pipeline::purge::Purge;
use crate::service::views::def::compiled;
use crate::service::views::maintain::{Delta, change};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Slice, Space, WriteTx};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// A chunk read from a snapshot: each document's key, blob, and its change to the view.
struct Prepared {
    def: Arc<ViewDef>,
    docs: HashMap<Vec<u8>, (Slice, Option<Delta>)>,
    /// the last key read, when the chunk was full (else the table's end was reached)
    last: Option<Vec<u8>>,
}

impl Pipeline {
    /// Starts (or restarts) a building view's build in the background.
    pub(crate) fn spawn_view_build(self: &Arc<Self>, def: &ViewDef) {
        let (db, table, name, created_at) = (self.clone(), def.table.clone(), def.name.clone(), def.created_at);
        drop(self.core.spawn_job(async move {
            if let Err(e) = db.build_view(&table, &name, created_at).await {
                tracing::error!(table, view = name, error = %e, "view build failed");
            }
        }));
    }

    async fn build_view(self: &Arc<Self>, table: &str, name: &str, created_at: i64) -> Result<()> {
        let chunk = self.core.backfill_chunk.max(1);
        // the position is in the view's `building` state, so each chunk starts where it says
        let step = |_: Option<()>| {
            let (db, t, n) = (self.clone(), table.to_owned(), name.to_owned());
            async move {
                match db.read(move |db| prepare(db, &t, &n, created_at, chunk)).await? {
                    Some(p) => db.write(move |tx, db| commit(tx, db, p)).await,
                    None => Ok(Chunk::Done),
                }
            }
        };
        // A document the view cannot hold: say which, stop maintaining it, remove its keys.
        let (t, n) = (table.to_owned(), name.to_owned());
        let fail = move |tx: &mut WriteTx<'_>, db: &Pipeline, error: String| {
            if let Some(def) = db.core.catalog.view(&t, &n).filter(|d| d.created_at == created_at) {
                let mut def = (*def).clone();
                def.state = ViewState::Failed { error };
                db.core.catalog.put_view(tx, def);
            }
        };
        self.run_build(step, fail, failed_purge(table, name, created_at)).await
    }

    /// Removes a dropped view's keys in a task of its own, then its drop mark.
    pub(crate) fn purge_dropped_view(
        self: &Arc<Self>,
        table: &str,
        name: &str,
        created_at: i64,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let (lt, ln, ft, fname) = (table.to_owned(), name.to_owned(), table.to_owned(), name.to_owned());
        let purge = Purge {
            prefixes: vec![(Space::View, ViewKey::view_prefix(table, name))],
            // Only while the mark is this drop's: a table drop ends it (its purge covers the keys).
            live: Box::new(move |db| db.core.catalog.view_dropping(&lt, &ln) == Some(created_at)),
            finish: Box::new(move |tx, db| {
                db.core.catalog.finish_view_drop(tx, &ft, &fname);
                Ok(())
            }),
            feed: None,
        };
        self.spawn_purge(format!("view {name:?} of table {table:?}"), purge)
    }

    /// Removes the keys a failed build left (resumed at open).
    pub(super) fn purge_failed_view(self: &Arc<Self>, def: &ViewDef) {
        let purge = failed_purge(&def.table, &def.name, def.created_at);
        drop(self.spawn_purge(format!("failed view {:?} of table {:?}", def.name, def.table), purge));
    }
}

/// The purge of a failed build's keys: it stops once that view is dropped.
fn failed_purge(table: &str, name: &str, created_at: i64) -> Purge {
    let (t, n) = (table.to_owned(), name.to_owned());
    Purge {
        prefixes: vec![(Space::View, ViewKey::view_prefix(table, name))],
        live: Box::new(move |db| {
            db.core.catalog.view(&t, &n).is_some_and(|d| d.created_at == created_at && !d.is_maintained())
        }),
        finish: Box::new(|_, _| Ok(())),
        feed: None,
    }
}

fn after_of(def: &ViewDef) -> Option<String> {
    match &def.state {
        ViewState::Building { after, .. } => after.clone(),
        _ => None,
    }
}

/// The entity key range after the build's position: up to `last` included, or to the table's end.
fn range(table: &str, after: Option<&str>, last: Option<Vec<u8>>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let prefix = crate::keys::table_prefix(table);
    let lo = after.map_or(Bound::Included(prefix.clone()), |id| Bound::Excluded(EntityKey::new(table, id).encode()));
    let hi = match last {
        Some(k) => Bound::Included(k),
        None => prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
    };
    (lo, hi)
}

/// On the blocking pool: the next `chunk` documents after the build's position, from a
/// snapshot, with their changes to the view. `None` when the view is no longer this build's.
fn prepare(db: &Pipeline, table: &str, name: &str, created_at: i64, chunk: usize) -> Result<Option<Prepared>> {
    let Some(def) = db.core.catalog.view(table, name).filter(|d| d.created_at == created_at && !d.is_ready()) else {
        return Ok(None);
    };
    if !def.is_maintained() {
        return Ok(None);
    }
    let c = compiled(&def)?;
    // as committed: the committer checks the chunk against what it holds then
    let view = db.core.store.committed();
    // Taken after the snapshot, so it holds every field name the snapshot's blobs use.
    let dict = db.core.catalog.dict();
    let (lo, hi) = range(table, after_of(&def).as_deref(), None);
    let mut docs = HashMap::new();
    let mut last = None;
    for item in view.scan(Space::Entity, KeyRange::Between(lo, hi), false).take(chunk) {
        let (key, blob) = item?;
        let id = EntityKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?.id.into_owned();
        let delta = change(&def, &c, &id, None, Some(&blob), &dict).map_err(|e| name_document(&id, e))?;
        last = Some(key.to_vec());
        docs.insert(key.to_vec(), (blob, delta));
    }
    let last = if docs.len() == chunk { last } else { None };
    Ok(Some(Prepared { def, docs, last }))
}

fn name_document(id: &str, e: ServiceError) -> ServiceError {
    match e {
        e @ (ServiceError::Unavailable(_) | ServiceError::Damaged { .. } | ServiceError::Internal(_)) => e,
        other => ServiceError::InvalidDocument(format!("document {id:?}: {other}")),
    }
}

/// On the committer: adds the chunk's range of documents as committed now (the prepared change
/// where the document is still the version read), and moves the build's position past it.
fn commit(tx: &mut WriteTx<'_>, db: &Pipeline, prepared: Prepared) -> Result<Chunk<()>> {
    let Prepared { def: read_def, mut docs, last } = prepared;
    let Some(def) = db.core.catalog.view(&read_def.table, &read_def.name).filter(|d| {
        d.created_at == read_def.created_at && d.is_maintained() && !d.is_ready() && after_of(d) == after_of(&read_def)
    }) else {
        return Ok(Chunk::Done);
    };
    let c = compiled(&def)?;
    let dict = db.core.catalog.dict();
    let (table, name) = (def.table.as_str(), def.name.as_str());
    let finished = last.is_none();
    let mut total = Delta::default();
    let (mut added, mut position) = (0u64, None);
    let (lo, hi) = range(table, after_of(&def).as_deref(), last);
    for item in tx.scan(Space::Entity, KeyRange::Between(lo, hi)) {
        let (key, blob) = item?;
        let id = EntityKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?.id.into_owned();
        let delta = match docs.remove(&key[..]) {
            Some((read, delta)) if *read == *blob => delta,
            _ => change(&def, &c, &id, None, Some(&blob), &dict).map_err(|e| name_document(&id, e))?,
        };
        if let Some(d) = delta {
            total.merge(d);
        }
        added += 1;
        position = Some(id);
    }
    total.stage(tx, &c, table, name)?;
    let mut next = (*def).clone();
    next.state = match (&def.state, finished) {
        (_, true) => ViewState::Ready,
        (ViewState::Building { done, total, after }, false) => {
            let done = done + added;
            ViewState::Building { done, total: (*total).max(done), after: position.or_else(|| after.clone()) }
        }
        (other, false) => other.clone(),
    };
    db.core.catalog.put_view(tx, next);
    Ok(if finished { Chunk::Done } else { Chunk::More(()) })
}
