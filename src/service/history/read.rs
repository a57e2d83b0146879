//! Reading history: a document's versions newest first, and a document as of a time.

use super::History;
use super::{How, decode_head, decode_version, no_history};
use crate::keys::{EntityKey, HistKey};
use crate::service::core::Handle;
use crate::service::core::render::etag;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space};
use serde::Serialize;
use std::ops::Bound;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most versions one page of a history lists.
pub const MAX_PAGE: usize = 1000;

/// One version of a document.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Version {
    /// when it started (the commit time of the write that made it), µs since the Unix epoch (0:
    /// written before the table kept history, time unknown)
    pub at_us: i64,
    /// how: `create`, `update`, `delete` (no document) or `unknown`
    pub op: String,
    /// its ETag (none for a deletion)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// true for the version the document has now
    pub current: bool,
    /// the document as it was (absent for a deletion)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub document: Option<Box<serde_json::value::RawValue>>,
}

/// A page of a document's versions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryPage {
    /// the versions, newest first
    pub versions: Vec<Version>,
    /// where the next page starts (absent: no more)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl History {
    /// Document `id`'s versions that started in `from..to` (µs), newest first, at most `limit`,
    /// before the cursor `before` (a start) when given. 404 if the table keeps no history; a
    /// document it kept nothing of has an empty list.
    pub async fn history(
        self: &Arc<Self>,
        table: String,
        id: String,
        (from, to): (i64, i64),
        limit: usize,
        before: Option<i64>,
    ) -> Result<HistoryPage> {
        crate::service::core::fields::check_id(&id)?;
        let limit = limit.clamp(1, MAX_PAGE);
        self.read(move |history| {
            let def = history.core.table_or_404(&table)?;
            if def.history.is_none() {
                return Err(no_history(&table));
            }
            let to = before.map_or(to, |b| b.min(to));
            let view = history.core.store.snapshot();
            let mut versions = Vec::new();
            // the current version first, from its head and the document itself
            // (no head but a document: written before the table kept history and never replaced
            // since, so its start is unknown)
            let (how, start) = match view.get(Space::Hist, &HistKey::head(&table, &id).encode())? {
                Some(head) => decode_head(&head).ok_or_else(|| damaged(&table, &id))?,
                None => (How::Unknown, 0),
            };
            if (from..to).contains(&start)
                && let Some(blob) = view.get(Space::Entity, &EntityKey::new(&table, &id).encode())?
            {
                versions.push(history.version(&id, start, how, Some(&blob), true)?);
            }
            let lower = HistKey::version(&table, &id, from).encode();
            let upper = HistKey::version(&table, &id, to).encode();
            let range = KeyRange::Between(Bound::Included(lower), Bound::Excluded(upper));
            for item in view.scan(Space::Hist, range, true) {
                if versions.len() > limit {
                    break;
                }
                let (key, value) = item?;
                let start = HistKey::decode(&key).ok().and_then(|k| k.start).ok_or_else(|| damaged(&table, &id))?;
                let (how, blob) = decode_version(&value).ok_or_else(|| damaged(&table, &id))?;
                versions.push(history.version(&id, start, how, blob, false)?);
            }
            let cursor = (versions.len() > limit).then(|| {
                versions.truncate(limit);
                versions.last().map(|v| v.at_us.to_string()).unwrap_or_default()
            });
            Ok(HistoryPage { versions, cursor })
        })
        .await
    }

    /// Document `id` as it was at `at` (µs): 404 `document_not_found` if it did not exist then
    /// (or the table kept nothing that old), 404 if the table keeps no history.
    pub async fn get_document_as_of(
        self: &Arc<Self>,
        table: String,
        id: String,
        at: i64,
    ) -> Result<crate::service::Document> {
        crate::service::core::fields::check_id(&id)?;
        self.read(move |history| {
            let def = history.core.table_or_404(&table)?;
            if def.history.is_none() {
                return Err(no_history(&table));
            }
            let gone = || ServiceError::DocumentNotFound { table: table.clone(), id: id.clone() };
            let view = history.core.store.snapshot();
            // the current version, if it started by then (no head but a document: written before
            // the table kept history and never replaced since, so current at any time)
            let start = match view.get(Space::Hist, &HistKey::head(&table, &id).encode())? {
                Some(head) => decode_head(&head).ok_or_else(|| damaged(&table, &id))?.1,
                None => i64::MIN,
            };
            // (a version whose TTL had passed by then was hidden then)
            let expired = |blob: &[u8]| {
                history.core.catalog.with_dict(|dict| {
                    crate::service::core::expiry::is_expired(
                        &history.core.catalog,
                        dict,
                        &table,
                        blob,
                        at.div_euclid(1000),
                    )
                })
            };
            if start <= at
                && let Some(blob) = view.get(Space::Entity, &EntityKey::new(&table, &id).encode())?
            {
                return if expired(&blob)? { Err(gone()) } else { history.as_document(&id, &blob) };
            }
            // the last version that started at or before `at`
            let lower = HistKey::version(&table, &id, i64::MIN).encode();
            let upper = HistKey::version(&table, &id, at).encode();
            let range = KeyRange::Between(Bound::Included(lower), Bound::Included(upper));
            let Some(item) = view.scan(Space::Hist, range, true).next() else { return Err(gone()) };
            let (_, value) = item?;
            match decode_version(&value).ok_or_else(|| damaged(&table, &id))? {
                (_, Some(blob)) if !expired(blob)? => history.as_document(&id, blob),
                _ => Err(gone()),
            }
        })
        .await
    }

    fn as_document(&self, id: &str, blob: &[u8]) -> Result<crate::service::Document> {
        let json = self.core.catalog.with_dict(|dict| crate::service::core::render::json_with_id(dict, id, blob))?;
        Ok(crate::service::Document { json, etag: etag(blob) })
    }

    fn version(&self, id: &str, start: i64, how: How, blob: Option<&[u8]>, current: bool) -> Result<Version> {
        let document = match blob {
            Some(blob) => Some(self.as_document(id, blob)?),
            None => None,
        };
        Ok(Version {
            at_us: start,
            op: how.as_str().to_owned(),
            etag: document.as_ref().map(|d| d.etag.clone()),
            current,
            document: match document {
                Some(d) => Some(
                    String::from_utf8(d.json)
                        .ok()
                        .and_then(|text| serde_json::value::RawValue::from_string(text).ok())
                        .ok_or_else(|| ServiceError::Internal("a kept version does not render as JSON".into()))?,
                ),
                None => None,
            },
        })
    }
}

fn damaged(table: &str, id: &str) -> ServiceError {
    ServiceError::damaged("hist", format!("the history of {table}/{id}"))
}
