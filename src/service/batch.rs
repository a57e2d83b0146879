//! `POST /v1/batch`: several writes, all or nothing, in one atomic write.

use super::documents::{Preconditions, PutOutcome, delete_in, live_table, patch_in, prepare, put_encoded, take_id};
use super::{Db, Result, ServiceError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most operations one batch may hold.
pub const MAX_BATCH_OPS: usize = 10_000;

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

impl Db {
    /// Applies every operation in one atomic write; the first failing one aborts them all.
    pub async fn batch(self: &Arc<Self>, ops: Vec<BatchOp>) -> Result<BatchOutcome> {
        if ops.is_empty() || ops.len() > MAX_BATCH_OPS {
            return Err(ServiceError::InvalidRequest(format!("a batch holds 1 to {MAX_BATCH_OPS} operations")));
        }
        self.write(move |tx, db| {
            let mut results = Vec::with_capacity(ops.len());
            for (i, op) in ops.into_iter().enumerate() {
                let fail = at(i);
                super::documents::check_id(&op.id).map_err(&fail)?;
                let table = live_table(&db.catalog, &op.table, None).map_err(&fail)?;
                let none = Preconditions::default();
                let created = match (op.op, op.document) {
                    (OpKind::Put, Some(Value::Object(mut doc))) => {
                        take_id(&mut doc, Some(&op.id)).map_err(&fail)?;
                        let p = prepare(&db.catalog, &table, op.id.clone(), doc).map_err(&fail)?;
                        let PutOutcome { created, .. } =
                            put_encoded(tx, &db.catalog, &table, p, &none).map_err(&fail)?;
                        Some(created)
                    }
                    (OpKind::Patch, Some(patch)) => {
                        let p = patch_in(tx, &db.catalog, &table, &op.id, &patch, &none).map_err(&fail)?;
                        put_encoded(tx, &db.catalog, &table, p, &none).map_err(&fail)?;
                        None
                    }
                    (OpKind::Delete, None) => {
                        if !delete_in(tx, &db.catalog, &table, &op.id, &none).map_err(&fail)? {
                            return Err(fail(ServiceError::DocumentNotFound { table: op.table, id: op.id }));
                        }
                        None
                    }
                    (OpKind::Delete, Some(_)) => {
                        return Err(fail(ServiceError::InvalidRequest("delete takes no document".into())));
                    }
                    (_, _) => {
                        return Err(fail(ServiceError::InvalidDocument(
                            "put needs an object `document`, patch a `document` merge patch".into(),
                        )));
                    }
                };
                results.push(BatchResult { op: op.op, table: op.table, id: op.id, created });
            }
            Ok(BatchOutcome { results })
        })
        .await
    }
}
