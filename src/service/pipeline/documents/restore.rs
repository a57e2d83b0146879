//! Restoring a document's version from its history: a read of the history model, then an
//! ordinary put.

use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use std::sync::Arc;

impl Pipeline {
    /// Writes back the version document `id` had at `at` (µs) as a new write (a replace, or a
    /// create if it is gone now), under `pre`: 404 `document_not_found` if it had none then.
    pub async fn restore_document(
        self: &Arc<Self>,
        table: String,
        id: String,
        at: i64,
        pre: crate::service::Preconditions,
    ) -> Result<crate::service::PutOutcome> {
        let version = self.history.get_document_as_of(table.clone(), id.clone(), at).await?;
        let mut doc: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&version.json)
            .map_err(|e| ServiceError::Internal(format!("a kept version does not parse: {e}")))?;
        doc.remove("_id");
        self.put_document(table, id, doc, pre).await
    }
}
