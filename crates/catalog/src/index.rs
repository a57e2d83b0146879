//! Index definitions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The kinds of secondary index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// equality (`idx:`)
    Hash,
    /// equality with uniqueness enforced (`idx:`)
    Unique,
    /// ordered values (`ridx:`)
    Range,
    /// geohash cells (`sidx:`)
    Spatial,
    /// BM25 full text (`ftidx:`, `ftstat:`)
    Fulltext,
    /// trigrams of a string field, serving `$contains` (`idx:`)
    Ngram,
    /// nearest neighbours (`vec:`)
    Vector,
    /// expiry (`ttlidx:`)
    Ttl,
}

/// Whether an index serves queries yet.
/// (Its OpenAPI schema is one flat object: see `state_schema`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum IndexState {
    /// backfilling existing documents; queries do not use it yet
    Building {
        /// documents indexed so far
        done: u64,
        /// documents to index (an estimate taken when the build started)
        total: u64,
    },
    /// complete and maintained with every write
    Ready,
    /// the build stopped (e.g. duplicate values for a unique index); not used, not maintained:
    /// drop it and fix the data
    Failed {
        /// why
        error: String,
    },
}

impl utoipa::PartialSchema for IndexState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        super::state_schema::flat_state("an index", &[])
    }
}

impl ToSchema for IndexState {}

/// An index definition as stored under `meta:index:{table}:{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct IndexDef {
    /// the indexed table
    pub table: String,
    /// index name, unique within the table
    pub name: String,
    /// index kind
    pub kind: IndexKind,
    /// indexed field paths (dotted), in order
    pub fields: Vec<String>,
    /// kind-specific options
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schema(value_type = Object)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// building, ready or failed
    #[serde(flatten)]
    pub state: IndexState,
    /// creation time, milliseconds since the Unix epoch; unique across tables and indexes (one
    /// created within the same millisecond as the last, or with the clock set back, gets the
    /// last value + 1), so it tells a re-created index of the same name apart
    pub created_at: i64,
    /// true once some document had several entries (an array value): range scans then
    /// deduplicate, and sorted scans start at the index's first key (as MongoDB's multikey flag)
    #[serde(default)]
    pub multikey: bool,
}

impl IndexDef {
    /// True when writes must keep the index up to date (building or ready).
    pub fn is_maintained(&self) -> bool {
        !matches!(self.state, IndexState::Failed { .. })
    }

    /// True when queries may use it.
    pub fn is_ready(&self) -> bool {
        self.state == IndexState::Ready
    }
}

impl IndexDef {
    /// A ready index of table `t` named `i`, for unit tests (the server's too: compiled always).
    #[doc(hidden)]
    pub fn ready_for_test(kind: IndexKind, fields: &[&str]) -> IndexDef {
        IndexDef {
            table: "t".into(),
            name: "i".into(),
            kind,
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
            options: Default::default(),
            state: IndexState::Ready,
            created_at: 0,
            multikey: false,
        }
    }
}
