//! What a query asks and what it answers, as the API carries them.

use super::explain::ScanExplain;
use crate::service::core::render::{DocumentPage, RawPage};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The body of a query.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// the filter (see docs/queries.md for operators); omitted = every document
    #[schema(value_type = Option<Object>, example = json!({"age": {"$gte": 18}, "city": "Oslo"}))]
    pub filter: Option<Value>,
    /// sort fields, `-` for descending, e.g. `["-age", "name"]`; ties are broken by `_id` (in the
    /// first field's direction).
    /// Without it the order is the plan's: a range scan's field order, else `_id` order
    #[serde(default)]
    pub sort: Vec<String>,
    /// fields to return (dotted paths); `_id` always comes back
    pub fields: Option<Vec<String>>,
    /// page size, 1-1000 (default 100)
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page (with the same filter and sort)
    pub cursor: Option<String>,
    /// return the plan instead of the documents
    #[serde(default)]
    pub explain: bool,
    /// false: refuse a full table scan over more documents than the server's scan threshold
    pub allow_scan: Option<bool>,
    /// read the table as it was at this time (ms since the epoch or RFC 3339, against commit
    /// times): only for a table that keeps history. Answered by one walk of the table's kept
    /// versions and documents, without indexes (see docs/documents.md)
    #[serde(default, deserialize_with = "time_text")]
    #[schema(example = "2026-11-28T10:00:00Z")]
    pub as_of: Option<String>,
}

impl QueryRequest {
    /// `as_of` in the versions' microseconds.
    pub(crate) fn as_of_us(&self) -> crate::service::Result<Option<i64>> {
        self.as_of.as_deref().map(|t| crate::service::history::parse_time("as_of", t)).transpose()
    }
}

/// A time as a request may give it: text (RFC 3339, or ms since the epoch) or a JSON integer of
/// ms.
#[derive(Deserialize)]
#[serde(untagged)]
enum Time {
    Text(String),
    Ms(i64),
}

impl Time {
    fn text(self) -> String {
        match self {
            Time::Text(text) => text,
            Time::Ms(ms) => ms.to_string(),
        }
    }
}

/// An optional time given as text or as an integer of ms (see [`Time`]): the text.
pub(crate) fn time_text<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    Ok(Option::<Time>::deserialize(d)?.map(Time::text))
}

/// A required time given as text or as an integer of ms (see [`Time`]): the text.
pub(crate) fn required_time_text<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    Ok(Time::deserialize(d)?.text())
}

/// What the planner chose and what running it cost.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Explain {
    /// `full_scan`, `index_scan`, `intersection`, `union` (an `$or` with an index per branch),
    /// `id_lookup` (point reads by `_id`), `id_range` (a range of `_id`s), `view_scan` (the
    /// members of the filter view named by `$view`) or `as_of_scan` (the table as it was at
    /// `as_of`, from its history)
    pub strategy: &'static str,
    /// the index scans, in the order they are read
    pub scans: Vec<ScanExplain>,
    /// `index` (the scan's order is the result order — the sort's, or without a sort the range
    /// index's — stopping early), `in_memory` (top-k by the sort), or `id` (`_id` order)
    pub order: &'static str,
    /// estimated candidates (index keys counted up to 1000, or the table's count for a scan)
    pub estimated_rows: u64,
    /// candidates read from storage
    pub examined_rows: u64,
    /// documents that matched the filter
    pub matched_rows: u64,
    /// documents returned
    pub returned_rows: u64,
    /// true when the scan stopped before its end because `limit` was reached
    pub stopped_early: bool,
    /// true when every result was built from the index key alone (its values and the document
    /// id) and no document was read: one exact index scan answers the filter, and the index holds
    /// every field of `fields` and `sort` (see docs/queries.md)
    pub covered: bool,
    /// documents read from storage (0 for a covered plan)
    pub documents_read: u64,
}

/// The answer to a query: documents, or the plan.
#[derive(Debug, Clone)]
pub enum QueryResult {
    /// documents
    Page(RawPage),
    /// the plan
    Explain(QueryExplain),
}

/// The answer to `explain: true`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueryExplain {
    /// the plan
    pub plan: Explain,
}

/// The shape of a query's answer, for the OpenAPI document: a page, or the plan.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum QueryResponse {
    /// documents
    Page(DocumentPage),
    /// the plan
    Explain(QueryExplain),
}
