//! Full-text search: the `fulltext` index kind (analyzer, postings kept exact in every write) and
//! `POST /v1/tables/{table}/search` (BM25 over whole-table statistics).

pub mod analyzer;
mod bitpack;
pub mod block;
pub mod cache;
pub(crate) mod check;
mod cursor;
mod daat;
mod exhaustive;
mod expand;
mod highlight;
pub mod ids;
mod known;
pub mod maintain;
pub(crate) mod oplog;
pub mod options;
pub mod parse;
pub mod postings;
mod ranked;
mod run;
mod score;
pub(crate) mod upgrade;

use crate::service::core::{Core, Handle};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use utoipa::ToSchema;

/// The search model: fulltext indexes' postings (`ftidx:`) read and ranked, over the shared
/// [`Core`], with what it keeps in memory between searches and writes.
pub struct Search {
    core: Arc<Core>,
    /// fulltext terms known to be in the committed dictionary (see [`maintain`])
    pub(crate) known_terms: maintain::KnownTerms,
    /// the ids of numbered fulltext documents a search has named
    pub(crate) doc_ids: ids::DocIds,
    /// the posting blocks of the terms searched in the latest state
    pub(crate) term_blocks: cache::TermBlocks,
}

impl Handle for Search {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Search {
    /// The model over `core`, with nothing remembered yet.
    pub(crate) fn new(core: Arc<Core>) -> Search {
        Search { core, known_terms: Default::default(), doc_ids: Default::default(), term_blocks: Default::default() }
    }
}

/// Most hits one search returns.
pub const MAX_LIMIT: usize = 1000;
/// How deep `offset + limit` may page.
pub const MAX_DEPTH: usize = 10_000;
/// Longest highlight fragment, in characters.
pub const MAX_FRAGMENT_CHARS: usize = 10_000;

/// Whether a hit matches any or all of the query's clauses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// at least one clause (the default)
    #[default]
    Any,
    /// every clause
    All,
}

/// How hits show where they matched.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HighlightRequest {
    /// put before each matched word (default `<em>`)
    #[serde(default = "default_pre")]
    pub pre: String,
    /// put after each matched word (default `</em>`)
    #[serde(default = "default_post")]
    pub post: String,
    /// fragment length in characters, 1-10000 (default 160)
    #[serde(default = "default_fragment")]
    #[schema(minimum = 1, maximum = 10000)]
    pub fragment_chars: usize,
}

fn default_pre() -> String {
    "<em>".into()
}
fn default_post() -> String {
    "</em>".into()
}
fn default_fragment() -> usize {
    160
}

/// The body of `POST /v1/tables/{table}/search`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// terms, `"phrases"`, `prefix*`, `-excluded`, `typo~1` / `typo~2`
    #[schema(example = "graph \"query planner\" data* -slow", max_length = 4096)]
    pub query: String,
    /// the fulltext index; optional when the table has exactly one
    pub index: Option<String>,
    /// `any` (default) or `all` clauses must match
    #[serde(default)]
    pub mode: Mode,
    /// a query filter (the query language) the hits must also match
    #[schema(value_type = Option<Object>, example = json!({"year": {"$gte": 2020}}))]
    pub filter: Option<Value>,
    /// hits to return, 1-1000 (default 10)
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// hits to skip first (default 0; `offset + limit` at most 10000)
    #[schema(maximum = 9999)]
    pub offset: Option<usize>,
    /// fields of each document to return (dotted paths); all when omitted
    pub fields: Option<Vec<String>>,
    /// mark the matched words in fragments of the indexed fields
    pub highlight: Option<HighlightRequest>,
    /// hybrid search: also rank by distance to this vector, and fuse both rankings (`fusion`);
    /// `limit` and `offset` then page the fused list (`offset + limit` at most 1000)
    pub vector: Option<HybridVector>,
    /// how a hybrid search fuses its rankings (default reciprocal rank fusion, k = 60)
    pub fusion: Option<Fusion>,
    /// how far `total` counts exactly: `"exact"` (every match), or a number of matches (default
    /// 10000, as Elasticsearch's `track_total_hits`); past it `total` is
    /// `{"value": <that number>, "relation": "gte"}`, which lets a term query skip postings that
    /// cannot enter the page
    pub total: Option<TotalMode>,
}

/// How far a search counts its matches exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TotalMode {
    /// `"exact"`: every match, however many
    Every(Exact),
    /// up to this many matches
    UpTo(u64),
}

/// The keyword `exact`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Exact {
    /// every match
    Exact,
}

/// Whether `total` is every match or a lower bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Relation {
    /// `value` is the number of matches
    Eq,
    /// there are at least `value` matches
    Gte,
}

/// How many documents match (Elasticsearch's `hits.total`).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct Total {
    /// the matches counted
    pub value: u64,
    /// `eq`: every match; `gte`: at least this many (the count stopped at the threshold)
    pub relation: Relation,
}

/// The vector half of a hybrid search.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HybridVector {
    /// the field of a ready `vector` index
    #[schema(min_length = 1, max_length = 4096)]
    pub field: String,
    /// the query vector (the index's dimension, at most 4096 numbers)
    #[schema(min_items = 1, max_items = 4096)]
    pub vector: Vec<f64>,
    /// the length of the vector ranking, 1-1000 (default `offset + limit`, at least 10)
    #[schema(minimum = 1, maximum = 1000)]
    pub k: Option<usize>,
    /// the vector search's list length, 1-10000 (default 64)
    #[schema(minimum = 1, maximum = 10000)]
    pub ef: Option<usize>,
}

/// `rrf`: reciprocal rank fusion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FusionMethod {
    /// each list adds 1 / (k + rank)
    #[default]
    Rrf,
}

/// How a hybrid search fuses its rankings.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Fusion {
    /// `rrf`
    #[serde(default)]
    pub method: FusionMethod,
    /// the RRF constant, 1-10000 (default 60)
    #[schema(minimum = 1, maximum = 10000)]
    pub k: Option<usize>,
}

/// A hybrid hit's rank (from 1) in each list; null where the list does not hold it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HybridRanks {
    /// in the full-text ranking
    pub text: Option<usize>,
    /// in the vector ranking
    pub vector: Option<usize>,
}

/// One hit (schema for the OpenAPI document).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchHit {
    /// the document id
    #[serde(rename = "_id")]
    pub id: String,
    /// its BM25 score; in a hybrid search, the fused score
    pub score: f64,
    /// the document (or the requested fields)
    #[schema(value_type = Object)]
    pub document: Map<String, Value>,
    /// per indexed field with a match: a fragment with the matched words marked
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highlights: Option<Map<String, Value>>,
    /// hybrid search only: the hit's rank in each list
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<HybridRanks>,
    /// hybrid search only: the distance to the query vector, where the vector list holds the hit
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distance: Option<f32>,
}

/// The answer of a search (schema for the OpenAPI document).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchResponse {
    /// the hits, best first (ties by `_id`)
    pub hits: Vec<SearchHit>,
    /// how many documents match, not only this page: exact up to 10000 (or with
    /// `"total": "exact"`), else a lower bound
    pub total: Total,
}

/// The body of `POST /v1/tables/{table}/indexes/{name}/analyze`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeRequest {
    /// the text to analyze as the index would (at most 64 KiB)
    #[schema(example = "The Graphs of Cafés", max_length = 65536)]
    pub text: String,
}

/// One token of an analyzed text.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AnalyzedToken {
    /// the indexed term
    pub token: String,
    /// its position (stop words take positions too)
    pub position: u32,
    /// byte offset of the word in the text
    pub start: usize,
    /// byte offset after the word
    pub end: usize,
}

/// The answer of `analyze`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AnalyzeResponse {
    /// the tokens in text order
    pub tokens: Vec<AnalyzedToken>,
}
