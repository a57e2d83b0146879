//! Secondary indexes: definitions and their keys, and their maintenance inside every document
//! write (`stage.rs`, entries derived from the blob in `entries.rs`). Their lifecycle (create,
//! backfill, drop, rebuild) is the database's: `service/pipeline/index_lifecycle.rs`.

pub mod entries;
pub(crate) mod stage;

use super::{Result, ServiceError};
use crate::catalog::IndexKind;
use crate::keys::{FtStatKey, FtidxKey, IdxKey, RidxKey, SidxKey};
use crate::storage::Space;
use serde::Deserialize;
use utoipa::ToSchema;

/// Most fields of a composite index.
const MAX_FIELDS: usize = 8;

/// The body of `POST /v1/tables/{table}/indexes`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateIndex {
    /// index name, unique within the table
    #[schema(example = "by_age")]
    pub name: String,
    /// `hash`, `unique`, `range`, `spatial`, `fulltext`, `ngram`, `ttl` or `vector`
    pub kind: IndexKind,
    /// dotted field paths: 1-8 for hash and unique (composite) and fulltext, exactly 1 for range,
    /// spatial, ngram, ttl (a time: RFC 3339 string or epoch milliseconds) and vector
    #[schema(example = json!(["age"]))]
    pub fields: Vec<String>,
    /// fulltext only: `language` (`english` by default, `none`, or another Snowball language),
    /// `stemming` (default true), `stop_words` (true: the language's list, false (default), or a
    /// list of words), `field_weights` (`{"title": 2.0}`, default 1); ttl only: `expire_after`
    /// (required; a duration `90s`, `1h`, `7d`, units `ms s m h d w`): a document expires that
    /// long after the indexed time; vector only: `dimension` (required), `metric`, `m`,
    /// `ef_construction` (see docs/vectors.md)
    #[serde(default)]
    #[schema(value_type = Option<Object>, example = json!({"language": "english", "stop_words": true}))]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Checks a request; returns the options to store, as given (a fulltext or vector index's are
/// then checked by its model: see `index_lifecycle`).
pub(crate) fn check(req: &CreateIndex) -> Result<serde_json::Map<String, serde_json::Value>> {
    let bad = |m: String| Err(ServiceError::InvalidRequest(m));
    if req.name.is_empty() || req.name.len() > 256 || req.name.chars().any(char::is_control) {
        return bad("index name must be 1-256 bytes without control characters".into());
    }
    if req.fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)) {
        return bad("field paths must be non-empty dotted names like `address.city`".into());
    }
    // `_id` is not in the document: queries read it from the entity keys, so an index on it
    // would hold only nulls
    if req.fields.iter().any(|f| f.split('.').next() == Some(crate::service::core::fields::ID_FIELD)) {
        return bad("`_id` needs no index: queries on it read the documents' own keys".into());
    }
    let options = req.options.clone().unwrap_or_default();
    if !matches!(req.kind, IndexKind::Fulltext | IndexKind::Ttl | IndexKind::Vector) && !options.is_empty() {
        return bad(format!("a {} index takes no options", kind_name(req.kind)));
    }
    let mut distinct = req.fields.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != req.fields.len() {
        return bad("a field is named twice".into());
    }
    match req.kind {
        IndexKind::Hash | IndexKind::Unique | IndexKind::Fulltext if (1..=MAX_FIELDS).contains(&req.fields.len()) => {}
        IndexKind::Hash | IndexKind::Unique | IndexKind::Fulltext => {
            return bad(format!("a {} index takes 1 to {MAX_FIELDS} fields", kind_name(req.kind)));
        }
        IndexKind::Range | IndexKind::Spatial | IndexKind::Ngram | IndexKind::Ttl | IndexKind::Vector
            if req.fields.len() == 1 => {}
        IndexKind::Range | IndexKind::Spatial | IndexKind::Ngram | IndexKind::Ttl | IndexKind::Vector => {
            return bad(format!("a {} index takes exactly one field", kind_name(req.kind)));
        }
    }
    if req.kind == IndexKind::Ttl {
        return ttl_options(&options);
    }
    // a fulltext or vector index's options are its model's to check (`index_lifecycle`)
    Ok(options)
}

/// A TTL index's options: exactly `expire_after`, a duration (`90s`, `1h`, `7d`).
fn ttl_options(
    options: &serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    let after = options.get("expire_after").and_then(serde_json::Value::as_str);
    if options.len() != 1 || after.and_then(crate::service::core::duration::parse_duration_ms).is_none() {
        return Err(ServiceError::InvalidRequest(
            "a ttl index takes one option, `expire_after`: a duration such as \"90s\", \"1h\" or \"7d\" (units ms, s, m, h, d, w)"
                .into(),
        ));
    }
    Ok(options.clone())
}

/// The kind as the API spells it.
pub(crate) fn kind_name(kind: IndexKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The key prefixes of one index's entries.
pub(crate) fn index_prefixes(table: &str, index: &str) -> Vec<(Space, Vec<u8>)> {
    let mut out = vec![
        (Space::Idx, IdxKey::index_prefix(table, index)),
        (Space::Ridx, RidxKey::index_prefix(table, index)),
        (Space::Sidx, SidxKey::index_prefix(table, index)),
        (Space::Ftidx, FtidxKey::index_prefix(table, index)),
        (Space::Vec, crate::keys::VecKey::index_prefix(table, index)),
    ];
    out.extend(FtStatKey::index_prefixes(table, index).into_iter().map(|p| (Space::Ftstat, p)));
    out
}
