//! One write: the storage transaction, the catalog it runs against, and the typed logs of the
//! derived families whose changes are merged at the end of the write.
//!
//! A document change is a [`Change`] (table, id, old version, new version). Every family derived
//! from documents takes part in a write in the same three steps:
//!
//! 1. **prepare**, outside the committer, on the new version only: `write::prepare` checks and
//!    encodes the document and computes what each family can compute alone — the edge's ends
//!    (`adjacency`), the fulltext terms (`search::maintain::prepare`), the index entries
//!    (`indexes::entries::prepare`) and the vector inserts, planned on the cached graphs
//!    (`Pipeline::plan_vectors`, through `Prepared::plan_vectors`) — into a [`prepare::Derived`];
//! 2. **stage**, on the committer, once per document change, in this order (`stage::derived`):
//!    adjacency (the edge's vertices checked, its `graph:` entries moved), TTL (`ttlidx:`), views
//!    (`view:`), vectors (logged in [`Write::vectors`]), index entries (`idx:`/`ridx:`/`sidx:`;
//!    a unique index refuses here), fulltext (logged in [`Write::fulltext`]), history (the
//!    replaced version kept, at [`Write::history_at`]), changefeed (the event appended). Each
//!    stage takes what it needs — the transaction, the catalog, the change and its own log — not
//!    the whole write. The operation's recipe in `documents` then stages the table's count and
//!    the entity key itself;
//! 3. **finish**, once per write, after the write's function returned (`Pipeline::write`): fulltext
//!    first (every logged posting change of the write merged into blocks, `search::maintain`),
//!    then vectors (the cached graphs changed and their nodes staged, `vectors`): last, as nothing
//!    after it may refuse the write; the logged edge changes go to a commit hook that applies
//!    them to the in-memory adjacency (`graph::memory::finish`).
//!
//! The logs are typed fields, not a bag of boxes: each family reads its own. A failed
//! [`Write::attempt`] drops what the attempt logged with the keys it staged.

pub mod prepare;
mod run;
mod stage;

pub use crate::service::core::fields::check_id;
pub use prepare::take_id;
pub(crate) use prepare::{Derived, Prepared, from_blob, live_table, plan_vectors_of, prepare, same_schema};
pub(crate) use stage::derived;

use crate::catalog::Catalog;
pub(crate) use crate::service::core::change::Change;
use crate::service::graph::memory::oplog::EdgeOp;
use crate::service::search::oplog::FtOp;
use crate::service::vectors::oplog::VecOp;
use crate::storage::WriteTx;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A write in progress: its storage transaction (reached through `Deref`), its catalog and the
/// derived families' logs, merged at the end of the write.
pub(crate) struct Write<'t, 'c> {
    pub(crate) tx: &'t mut WriteTx<'c>,
    pub(crate) catalog: &'t Arc<Catalog>,
    /// the fulltext posting changes of the write, merged by `search::maintain::finish`
    pub fulltext: Vec<FtOp>,
    /// the vector node changes of the write, applied by `vectors::finish`
    pub vectors: Vec<VecOp>,
    /// the edge changes of the write, applied to the in-memory adjacency once it commits
    /// (`graph::memory::finish`)
    pub graph: Vec<EdgeOp>,
    /// the time of the write's history versions, taken at its first change of a table with
    /// history: one time for the whole write, so an as-of read sees all of it or none of it
    /// (`service::history`)
    pub history_at: Option<i64>,
}

impl<'t, 'c> Write<'t, 'c> {
    /// A write over `tx` with empty logs.
    pub fn new(tx: &'t mut WriteTx<'c>, catalog: &'t Arc<Catalog>) -> Self {
        Write { tx, catalog, fulltext: Vec::new(), vectors: Vec::new(), graph: Vec::new(), history_at: None }
    }

    /// The catalog the write runs against.
    pub fn catalog(&self) -> &'t Arc<Catalog> {
        self.catalog
    }

    /// Runs `f`; if it fails, everything it staged (keys, sequence numbers, events, commit hooks:
    /// [`WriteTx::attempt`]) and everything it logged is undone, and the rest of the write stands.
    pub fn attempt<T, E: From<crate::storage::StorageError>>(
        &mut self,
        f: impl FnOnce(&mut Write<'_, 'c>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let (ft, vec, edges) = (self.fulltext.len(), self.vectors.len(), self.graph.len());
        let catalog = self.catalog;
        let (fulltext, vectors, graph) = (&mut self.fulltext, &mut self.vectors, &mut self.graph);
        let history_at = &mut self.history_at;
        let result = self.tx.attempt(|tx| {
            let mut inner = Write {
                tx,
                catalog,
                fulltext: std::mem::take(fulltext),
                vectors: std::mem::take(vectors),
                graph: std::mem::take(graph),
                history_at: *history_at,
            };
            let result = f(&mut inner);
            (*fulltext, *vectors, *graph) = (inner.fulltext, inner.vectors, inner.graph);
            // (kept even when `f` failed: a time given out is never given again)
            *history_at = inner.history_at;
            result
        });
        if result.is_err() {
            self.fulltext.truncate(ft);
            self.vectors.truncate(vec);
            self.graph.truncate(edges);
        }
        result
    }
}

impl<'c> Deref for Write<'_, 'c> {
    type Target = WriteTx<'c>;
    fn deref(&self) -> &WriteTx<'c> {
        self.tx
    }
}

impl<'c> DerefMut for Write<'_, 'c> {
    fn deref_mut(&mut self) -> &mut WriteTx<'c> {
        self.tx
    }
}
