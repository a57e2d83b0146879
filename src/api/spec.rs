//! Parts of the OpenAPI document that only describe: path parameters with the server's rules,
//! and request/response shapes that one Rust type cannot state (one object or an array; fields
//! allowed depending on `kind` or `op`). The handlers deserialize the service's own types; these
//! say exactly what those accept, so a spec-driven client or fuzzer can trust the document.
#![allow(dead_code)] // the types exist for their schemas; nothing constructs them

use crate::service::PutOutcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
use utoipa::openapi::{Array, Object};
use utoipa::{IntoParams, ToSchema};

/// A dotted field path: non-empty names joined by `.`.
pub const FIELD_PATH: &str = "^[^.]+(\\.[^.]+)*$";

/// `/v1/databases/{db}`
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct DatabasePath {
    /// database name (1-256 bytes, no `/`, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "shop")]
    pub db: String,
}

/// `/v1/tables/{table}`
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TablePath {
    /// table name (1-256 bytes, no `/`, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
}

/// `/v1/tables/{table}/documents/{id}`
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct DocumentPath {
    /// table name (1-256 bytes, no `/`, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
    /// document id: any UTF-8, 1-1024 bytes, percent-encoded
    #[param(min_length = 1, max_length = 1024, example = "alice")]
    pub id: String,
}

/// `/v1/tables/{table}/indexes/{name}`
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IndexPath {
    /// table name (1-256 bytes, no `/`, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
    /// index name (1-256 bytes, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", example = "by_age")]
    pub name: String,
}

/// `/v1/tables/{table}/views/{name}`
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ViewPath {
    /// table name (1-256 bytes, no `/`, no control characters), percent-encoded
    #[param(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
    /// view name (1-256 bytes, no control characters), percent-encoded
    #[param(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
        example = "adults_oslo"
    )]
    pub name: String,
}

/// The body of `POST …/documents`: one document, or an array of them (all or nothing).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum InsertBody {
    /// one document
    One(Map<String, Value>),
    /// several documents (at most 10,000)
    Many(Vec<Map<String, Value>>),
}

/// The answer to `POST …/documents`: one outcome for an object body, `documents` for an array.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum InsertAnswer {
    /// the body was one document
    One(PutOutcome),
    /// the body was an array
    Many(Inserted),
}

/// The answer to inserting several documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct Inserted {
    /// one entry per document, in order
    pub documents: Vec<PutOutcome>,
}

/// Index kinds that take 1-8 fields.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompositeKind {
    /// equality
    Hash,
    /// equality, one document per value
    Unique,
}

/// Index kinds that take exactly one field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SingleFieldKind {
    /// ordered values
    Range,
    /// geohash cells of a `{"lat", "lon"}` or `[lon, lat]` point
    Spatial,
    /// trigrams of a string, serving `$contains`
    Ngram,
}

/// `fulltext`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FulltextKind {
    /// BM25 full-text search
    Fulltext,
}

/// Stop words: the language's list (`true`), none (`false`), or these words.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StopWordsOption {
    /// the language's list, or none
    Language(bool),
    /// these words (1-128 bytes each, at most 10000)
    Custom(Vec<String>),
}

/// A fulltext index's analyzer and ranking options.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FulltextOptionsBody {
    /// default `english`; `none`: no stemming and no language stop words
    #[schema(schema_with = language_names)]
    pub language: Option<String>,
    /// stem words with the language's Snowball stemmer (default true)
    pub stemming: Option<bool>,
    /// default false
    pub stop_words: Option<StopWordsOption>,
    /// field → weight (above 0, at most 1000; default 1); fields must be the index's
    #[schema(value_type = Option<std::collections::HashMap<String, f64>>, example = json!({"title": 2.0}))]
    pub field_weights: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A fulltext index over 1-8 string (or array of string) fields.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FulltextIndex {
    /// index name, unique within the table (1-256 bytes, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", example = "body_ft")]
    pub name: String,
    /// `fulltext`
    pub kind: FulltextKind,
    /// 1-8 dotted field paths
    #[schema(schema_with = composite_fields)]
    pub fields: Vec<String>,
    /// analyzer and ranking options
    pub options: Option<FulltextOptionsBody>,
}

/// A hash or unique index over 1-8 fields.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompositeIndex {
    /// index name, unique within the table (1-256 bytes, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", example = "by_email")]
    pub name: String,
    /// `hash` or `unique`
    pub kind: CompositeKind,
    /// 1-8 dotted field paths
    #[schema(schema_with = composite_fields)]
    pub fields: Vec<String>,
}

/// A range or spatial index over one field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SingleFieldIndex {
    /// index name, unique within the table (1-256 bytes, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", example = "by_age")]
    pub name: String,
    /// `range` or `spatial`
    pub kind: SingleFieldKind,
    /// exactly one dotted field path
    #[schema(schema_with = single_field)]
    pub fields: Vec<String>,
}

/// `vector`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VectorKind {
    /// nearest neighbours (HNSW)
    Vector,
}

/// How a vector index measures distance.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VectorMetric {
    /// 1 − cosine similarity
    Cosine,
    /// Euclidean distance
    L2,
    /// negative dot product
    Dot,
}

/// A vector index's options.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VectorOptionsBody {
    /// the vectors' length (required)
    #[schema(minimum = 1, maximum = 4096)]
    pub dimension: u32,
    /// default `cosine`
    pub metric: Option<VectorMetric>,
    /// links per node (2m at the bottom layer), default 16
    #[schema(minimum = 2, maximum = 64)]
    pub m: Option<u32>,
    /// candidate list length while inserting, default 200
    #[schema(minimum = 8, maximum = 2000)]
    pub ef_construction: Option<u32>,
}

/// A vector index (HNSW) over one field holding an array of `dimension` numbers (or a
/// `vector(N)` column).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VectorIndex {
    /// index name, unique within the table (1-256 bytes, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", example = "emb")]
    pub name: String,
    /// `vector`
    pub kind: VectorKind,
    /// exactly one dotted field path
    #[schema(schema_with = single_field)]
    pub fields: Vec<String>,
    /// dimension, metric and graph parameters
    pub options: VectorOptionsBody,
}

/// The body of `POST …/indexes`. TTL indexes are described in docs/ttl.md.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CreateIndexBody {
    /// hash or unique
    Composite(CompositeIndex),
    /// range, spatial or ngram
    SingleField(SingleFieldIndex),
    /// fulltext
    Fulltext(FulltextIndex),
    /// vector
    Vector(VectorIndex),
}

/// `put`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PutOp {
    /// create or replace
    Put,
}

/// `patch`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PatchOp {
    /// merge patch
    Patch,
}

/// `delete`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeleteOp {
    /// delete (the document must exist)
    Delete,
}

/// Creates or replaces `id` with `document`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchPut {
    /// `put`
    pub op: PutOp,
    /// the table (1-256 bytes, no `/`, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
    /// the document id (1-1024 bytes)
    #[schema(min_length = 1, max_length = 1024, example = "dave")]
    pub id: String,
    /// the document (`_id`, if given, must equal `id`; an edge needs `_from` and `_to`)
    pub document: Map<String, Value>,
}

/// Merge-patches the existing document `id` with `document` (RFC 7396).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchPatch {
    /// `patch`
    pub op: PatchOp,
    /// the table (1-256 bytes, no `/`, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
    /// the document id (1-1024 bytes)
    #[schema(min_length = 1, max_length = 1024, example = "carol")]
    pub id: String,
    /// the merge patch: an object (anything else would replace the document with a non-object)
    pub document: Map<String, Value>,
}

/// Deletes the existing document `id`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchDelete {
    /// `delete`
    pub op: DeleteOp,
    /// the table (1-256 bytes, no `/`, no control characters)
    #[schema(min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", example = "users")]
    pub table: String,
    /// the document id (1-1024 bytes)
    #[schema(min_length = 1, max_length = 1024, example = "u1")]
    pub id: String,
    /// a delete takes no document (null is the same as absent)
    #[serde(default)]
    #[schema(schema_with = null_only)]
    pub document: Option<()>,
}

/// One operation of a batch.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum BatchOpBody {
    /// put
    Put(BatchPut),
    /// patch
    Patch(BatchPatch),
    /// delete
    Delete(BatchDelete),
}

/// The body of `POST /v1/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    /// 1 to 10 000 operations, applied in order in one atomic write
    #[schema(min_items = 1, max_items = 10_000)]
    pub operations: Vec<BatchOpBody>,
}

/// A sort entry: a dotted field path, `-` first for descending (`+` for ascending is allowed).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(pattern = "^(-[^.]+|\\+[^.]+|[^-+.][^.]*)(\\.[^.]+)*$", example = "-age")]
pub struct SortField(String);

/// A dotted field path: non-empty names joined by `.`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(pattern = "^[^.]+(\\.[^.]+)*$", example = "address.city")]
pub struct FieldPath(String);

/// The body of a query (the service's `QueryRequest`, with the rules it checks).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryBody {
    /// the filter (see docs/queries.md for operators); omitted or null = every document
    #[schema(value_type = Option<Object>, example = json!({"age": {"$gte": 18}, "city": "Oslo"}))]
    pub filter: Option<Map<String, Value>>,
    /// sort fields, `-` for descending, e.g. `["-age", "name"]`; ties are broken by `_id` (in the
    /// first field's direction). Without it the order is the plan's: a range scan's field order,
    /// else `_id` order
    #[serde(default)]
    pub sort: Vec<SortField>,
    /// fields to return (dotted paths); `_id` always comes back
    pub fields: Option<Vec<FieldPath>>,
    /// page size, 1-1000 (default 100)
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// the `cursor` of the previous page (opaque; with the same filter and sort)
    pub cursor: Option<String>,
    /// return the plan instead of the documents
    #[serde(default)]
    pub explain: bool,
    /// false: refuse a full table scan over more documents than the server's scan threshold
    pub allow_scan: Option<bool>,
    /// read the table as it was at this time: ms since the epoch (a number or its text) or RFC
    /// 3339, against commit times; only for a table that keeps history. Answered by one walk of
    /// the table's kept versions and documents, without indexes (see docs/documents.md)
    #[schema(example = "2026-11-28T10:00:00Z")]
    pub as_of: Option<String>,
}

fn null_only() -> Object {
    ObjectBuilder::new().schema_type(Type::Null).build()
}

fn field_path() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(FIELD_PATH))
        .description(Some("a dotted field path, e.g. `address.city`"))
        .build()
}

fn composite_fields() -> Array {
    ArrayBuilder::new()
        .items(field_path())
        .min_items(Some(1))
        .max_items(Some(8))
        .examples([serde_json::json!(["email"])])
        .build()
}

fn single_field() -> Array {
    ArrayBuilder::new()
        .items(field_path())
        .min_items(Some(1))
        .max_items(Some(1))
        .examples([serde_json::json!(["age"])])
        .build()
}

/// `none` and the Snowball languages, as the service knows them.
fn language_names() -> Object {
    let names = std::iter::once("none").chain(crate::service::search::options::language_names());
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .description(Some("the analyzer's language: `none` or a Snowball language"))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_fields::properties;

    /// The described bodies name exactly the fields the service's types read (which refuse
    /// unknown fields): a field added to one and not the other fails here.
    #[test]
    fn described_bodies_have_the_fields_the_service_reads() {
        use crate::service::{BatchOp, CreateIndex, QueryRequest};
        assert_eq!(properties::<QueryBody>(), properties::<QueryRequest>());
        // each kind's body names the fields of the service's type; only fulltext takes options
        let mut shared = properties::<CreateIndex>();
        assert_eq!(properties::<FulltextIndex>(), shared);
        assert_eq!(properties::<VectorIndex>(), shared);
        shared.remove("options");
        assert_eq!(properties::<CompositeIndex>(), shared);
        assert_eq!(properties::<SingleFieldIndex>(), shared);
        assert_eq!(properties::<BatchPut>(), properties::<BatchOp>());
        assert_eq!(properties::<BatchPatch>(), properties::<BatchOp>());
        assert_eq!(properties::<BatchDelete>(), properties::<BatchOp>());
    }

    /// Bodies the description allows are bodies the service's types accept.
    #[test]
    fn described_examples_deserialize_into_the_service_types() {
        use crate::service::{BatchOp, CreateIndex, QueryRequest};
        use serde_json::json;
        let query = json!({"filter": {"a.b": 1}, "sort": ["-a", "+b", "c.d"], "fields": ["a"], "limit": 1000,
            "cursor": "x", "explain": false, "allow_scan": null});
        serde_json::from_value::<QueryBody>(query.clone()).unwrap();
        serde_json::from_value::<QueryRequest>(query).unwrap();
        for index in [
            json!({"name": "i", "kind": "unique", "fields": ["a", "b.c"]}),
            json!({"name": "i", "kind": "spatial", "fields": ["loc"]}),
            json!({"name": "i", "kind": "ngram", "fields": ["s"]}),
            json!({"name": "i", "kind": "vector", "fields": ["e"], "options": {"dimension": 3, "metric": "l2", "m": 8,
                "ef_construction": 50}}),
            json!({"name": "i", "kind": "fulltext", "fields": ["a", "b"], "options": {"language": "german",
                "stemming": false, "stop_words": ["der"], "field_weights": {"a": 2.5}}}),
        ] {
            serde_json::from_value::<CreateIndexBody>(index.clone()).unwrap();
            serde_json::from_value::<CreateIndex>(index).unwrap();
        }
        for op in [
            json!({"op": "put", "table": "t", "id": "1", "document": {}}),
            json!({"op": "patch", "table": "t", "id": "1", "document": {"a": null}}),
            json!({"op": "delete", "table": "t", "id": "1"}),
            json!({"op": "delete", "table": "t", "id": "1", "document": null}),
        ] {
            serde_json::from_value::<BatchOpBody>(op.clone()).unwrap();
            serde_json::from_value::<BatchOp>(op).unwrap();
        }
    }
}
