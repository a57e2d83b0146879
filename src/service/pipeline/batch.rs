//! `POST /v1/batch`: several writes, all or nothing, in one atomic write.

use super::documents::{Preconditions, PutOutcome, check_id, delete_in, put_encoded};
use super::patch::{PATCH_ATTEMPTS, Patched, patch_in, patch_outside, unchanged};
use super::write::{Prepared, Write, live_table, prepare, same_schema, take_id};
use crate::catalog::TableDef;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most operations one batch may hold.
pub const MAX_BATCH_OPS: usize = super::documents::MAX_INSERT;
/// Most operations of one batch on the same document.
pub const MAX_OPS_PER_DOCUMENT: usize = 64;

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// create or replace `document`
    Put,
    /// merge-patch the document with `document`
    Patch,
    /// delete the document (it must exist)
    Delete,
}

/// One operation of a batch.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchOp {
    /// put, patch or delete
    pub op: OpKind,
    /// the table
    pub table: String,
    /// the document id
    pub id: String,
    /// the document (put) or the merge patch (patch)
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub document: Option<Value>,
}

/// What each operation did, in order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchOutcome {
    /// one entry per operation
    pub results: Vec<BatchResult>,
}

/// The outcome of one operation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchResult {
    /// the operation
    pub op: OpKind,
    /// the table
    pub table: String,
    /// the document id
    #[serde(rename = "_id")]
    pub id: String,
    /// for put: whether the document was created
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
}

fn at(index: usize) -> impl Fn(ServiceError) -> ServiceError {
    move |e| ServiceError::BatchFailed { index, source: Box::new(e) }
}

/// An operation with its work done outside the committer where it can be.
enum Work {
    /// the document, checked and encoded
    Put(Prepared),
    /// the merge patch applied to the document as read before the write (and the patch, to apply
    /// again on the committer should an earlier operation's cascade have deleted the document)
    Patch(Patched, Value),
    /// a patch applied on the committer (the document is touched twice in the batch, was
    /// missing when read, or kept changing)
    PatchInWrite(Value),
    Delete,
    /// the operation is invalid: reported when the write reaches it, so the first failing
    /// operation is the one reported
    Invalid(ServiceError),
}

struct Planned {
    op: OpKind,
    table: String,
    id: String,
    /// the definition the work was prepared for; None when the table does not exist
    def: Option<Arc<TableDef>>,
    work: Work,
}

impl Pipeline {
    /// Checks, encodes and patches what it can, outside the committer.
    fn plan(self: &Arc<Self>, ops: &[BatchOp], patch_outside_write: bool) -> Result<Vec<Planned>> {
        let mut touched = std::collections::HashMap::<(&str, &str), usize>::new();
        for op in ops {
            let n = touched.entry((op.table.as_str(), op.id.as_str())).or_default();
            *n += 1;
            // Repeated operations on one document are applied on the committer, each one a
            // decode, merge and encode of the whole document: bounded, so no batch pins it.
            if *n > MAX_OPS_PER_DOCUMENT {
                return Err(ServiceError::InvalidRequest(format!(
                    "a batch touches one document at most {MAX_OPS_PER_DOCUMENT} times ({}/{})",
                    op.table, op.id
                )));
            }
        }
        let mut planned = Vec::with_capacity(ops.len());
        for op in ops {
            let def = self.core.catalog.table(&op.table);
            let work = match (&def, op.op, &op.document) {
                _ if let Err(e) = check_id(&op.id) => Work::Invalid(e),
                (None, _, _) => Work::Invalid(ServiceError::TableNotFound(op.table.clone())),
                (Some(def), OpKind::Put, Some(Value::Object(doc))) => {
                    let mut doc = doc.clone();
                    match take_id(&mut doc, Some(&op.id))
                        .and_then(|_| prepare(&self.core.catalog, def, op.id.clone(), doc))
                    {
                        Ok(mut p) => {
                            p.plan_vectors(self, def);
                            Work::Put(p)
                        }
                        Err(e) => Work::Invalid(e),
                    }
                }
                // as PATCH answers: anything but an object would replace the document with a non-object
                (Some(_), OpKind::Patch, Some(patch)) if !patch.is_object() => {
                    Work::Invalid(ServiceError::InvalidDocument("a merge patch must be a JSON object".into()))
                }
                (Some(def), OpKind::Patch, Some(patch)) => {
                    let once = touched.get(&(op.table.as_str(), op.id.as_str())) == Some(&1);
                    match once && patch_outside_write {
                        true => match patch_outside(self, def, &op.id, patch, |_| true) {
                            Ok(Some(p)) => Work::Patch(p, patch.clone()),
                            Ok(None) => Work::PatchInWrite(patch.clone()),
                            Err(e) => Work::Invalid(e),
                        },
                        false => Work::PatchInWrite(patch.clone()),
                    }
                }
                (Some(_), OpKind::Delete, None) => Work::Delete,
                (Some(_), OpKind::Delete, Some(_)) => {
                    Work::Invalid(ServiceError::InvalidRequest("delete takes no document".into()))
                }
                (Some(_), _, _) => Work::Invalid(ServiceError::InvalidDocument(
                    "put needs an object `document`, patch a `document` merge patch".into(),
                )),
            };
            planned.push(Planned { op: op.op, table: op.table.clone(), id: op.id.clone(), def, work });
        }
        Ok(planned)
    }

    /// Applies every operation in one atomic write; the first failing one aborts them all.
    pub async fn batch(self: &Arc<Self>, ops: Vec<BatchOp>) -> Result<BatchOutcome> {
        if ops.is_empty() || ops.len() > MAX_BATCH_OPS {
            return Err(ServiceError::InvalidRequest(format!("a batch holds 1 to {MAX_BATCH_OPS} operations")));
        }
        let ops = Arc::new(ops);
        let mut attempt = 0;
        loop {
            attempt += 1;
            // on the blocking pool: planning a vector insert may wait on a graph's lock
            let (db, o) = (self.clone(), ops.clone());
            let planned = tokio::task::spawn_blocking(move || db.plan(&o, attempt <= PATCH_ATTEMPTS))
                .await
                .map_err(|e| ServiceError::Internal(format!("planning task failed: {e}")))??;
            if let Some(outcome) = self.write(move |tx, db| apply(tx, db, planned)).await? {
                return Ok(outcome);
            }
        }
    }
}

/// Runs a planned batch on the committer; `None` (nothing staged) when something it was
/// prepared from changed: a table's columns, or a patched document.
fn apply(tx: &mut Write<'_, '_>, db: &Pipeline, planned: Vec<Planned>) -> Result<Option<BatchOutcome>> {
    for p in &planned {
        let Some(def) = &p.def else { continue };
        let live = db.core.catalog.table(&p.table);
        if live.as_deref().is_some_and(|live| live.created_at == def.created_at && !same_schema(live, def)) {
            return Ok(None);
        }
        if let Work::Patch(patched, _) = &p.work
            && !unchanged(tx, &p.table, &p.id, &patched.base)?
        {
            return Ok(None);
        }
    }
    let mut results = Vec::with_capacity(planned.len());
    let none = Preconditions::default();
    for (i, p) in planned.into_iter().enumerate() {
        let fail = at(i);
        let work = match p.work {
            Work::Invalid(e) => return Err(fail(e)),
            work => work,
        };
        let table = live_table(&db.core.catalog, &p.table, p.def.as_deref()).map_err(&fail)?;
        let created = match work {
            Work::Invalid(e) => return Err(fail(e)),
            Work::Put(prepared) => {
                let PutOutcome { created, .. } = put_encoded(tx, &table, prepared, &none).map_err(&fail)?;
                Some(created)
            }
            Work::Patch(patched, patch) => {
                // touched once by the batch's operations, but a vertex delete earlier in the batch
                // may have cascaded to it
                let prepared = if unchanged(tx, &p.table, &p.id, &patched.base).map_err(&fail)? {
                    patched.prepared
                } else {
                    patch_in(tx, &db.core.catalog, &table, &p.id, &patch, &none).map_err(&fail)?
                };
                put_encoded(tx, &table, prepared, &none).map_err(&fail)?;
                None
            }
            Work::PatchInWrite(patch) => {
                let prepared = patch_in(tx, &db.core.catalog, &table, &p.id, &patch, &none).map_err(&fail)?;
                put_encoded(tx, &table, prepared, &none).map_err(&fail)?;
                None
            }
            Work::Delete => {
                if !delete_in(tx, &table, &p.id, &none).map_err(&fail)? {
                    return Err(fail(ServiceError::DocumentNotFound { table: p.table, id: p.id }));
                }
                None
            }
        };
        results.push(BatchResult { op: p.op, table: p.table, id: p.id, created });
    }
    Ok(Some(BatchOutcome { results }))
}
