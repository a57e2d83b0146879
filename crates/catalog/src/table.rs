//! Table definitions: schemaless documents, typed columns, or edges.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TableKind {
    /// JSON documents (optionally with typed columns)
    #[default]
    Document,
    /// graph edges: documents with `_from` and `_to`
    Edge,
}

/// What deleting a vertex does to the edges of an edge table that touch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnVertexDelete {
    /// the delete is refused (409 `vertex_has_edges`) while the vertex has edges in this table
    #[default]
    Reject,
    /// the vertex's edges in this table are deleted in the same atomic write
    Cascade,
}

/// What a table's change events (`GET /v1/changes`) carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangefeedMode {
    /// each event carries the document's new state (`document`, on puts)
    Full,
    /// each event carries the table and id only
    #[default]
    Keys,
    /// the table's changes are not in the feed
    Off,
}

/// The type of a declared column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// UTF-8 text
    String,
    /// 64-bit integer
    Int,
    /// a number (ints are accepted and kept)
    Float,
    /// true or false
    Bool,
    /// milliseconds since the Unix epoch (integer) or an RFC 3339 string
    Timestamp,
    /// any JSON value
    Json,
    /// an array of exactly `dim` numbers, stored as f32
    Vector(u32),
}

impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnType::String => f.write_str("string"),
            ColumnType::Int => f.write_str("int"),
            ColumnType::Float => f.write_str("float"),
            ColumnType::Bool => f.write_str("bool"),
            ColumnType::Timestamp => f.write_str("timestamp"),
            ColumnType::Json => f.write_str("json"),
            ColumnType::Vector(d) => write!(f, "vector({d})"),
        }
    }
}

impl std::str::FromStr for ColumnType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "string" => ColumnType::String,
            "int" => ColumnType::Int,
            "float" => ColumnType::Float,
            "bool" => ColumnType::Bool,
            "timestamp" => ColumnType::Timestamp,
            "json" => ColumnType::Json,
            other => {
                let dim = other
                    .strip_prefix("vector(")
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|d| d.parse::<u32>().ok())
                    .filter(|d| (1..=65_536).contains(d));
                match dim {
                    Some(d) => ColumnType::Vector(d),
                    None => {
                        return Err(format!(
                            "unknown column type {other:?}: expected string, int, float, bool, timestamp, json or vector(N) with 1 <= N <= 65536"
                        ));
                    }
                }
            }
        })
    }
}

impl Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A declared column of a typed table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ColumnDef {
    /// field name: not empty, not starting with `_` (reserved for system fields), without `.` (paths are dotted)
    #[schema(min_length = 1, pattern = "^[^_.][^.]*$", example = "age")]
    pub name: String,
    /// `string`, `int`, `float`, `bool`, `timestamp`, `json` or `vector(N)` with 1 <= N <= 65536
    #[serde(rename = "type")]
    #[schema(value_type = String, example = "int", pattern = "^(string|int|float|bool|timestamp|json|vector\\(\\+?0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-6])\\))$")]
    pub ty: ColumnType,
    /// whether null (or absence, when there is no default) is allowed
    #[serde(default)]
    pub nullable: bool,
    /// value used when the field is absent
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// How long a table keeps the versions of its documents that writes replaced (or deleted):
/// either bound, or both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryPolicy {
    /// versions replaced longer ago than this are removed (`ms s m h d w`, e.g. `30d`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "30d", pattern = "^[0-9]+(ms|s|m|h|d|w)$")]
    pub max_age: Option<String>,
    /// at most this many replaced versions are kept per document (the oldest go first)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000000, example = 100)]
    pub max_versions: Option<u32>,
}

/// A table definition as stored under `meta:table:{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TableDef {
    /// table name
    pub name: String,
    /// documents or edges
    #[serde(default)]
    pub kind: TableKind,
    /// declared columns; absent for a schemaless table
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<ColumnDef>>,
    /// edge tables: what deleting a vertex does to its edges here (`reject` when absent)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_vertex_delete: Option<OnVertexDelete>,
    /// edge tables: a top-level numeric field (finite, >= 0) every edge must have; its value is
    /// kept in the adjacency entries, so weighted shortest paths never read edge documents
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_field: Option<String>,
    /// what the table's change events carry: `full`, `keys` (when absent) or `off`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changefeed: Option<ChangefeedMode>,
    /// the versions its writes replace are kept, within these bounds (absent: none are kept)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryPolicy>,
    /// creation time, milliseconds since the Unix epoch; unique across tables and indexes (one
    /// created within the same millisecond as the last, or with the clock set back, gets the
    /// last value + 1), so it tells a re-created table of the same name apart
    pub created_at: i64,
}

impl TableDef {
    /// The declared column named `name`.
    pub fn column(&self, name: &str) -> Option<&ColumnDef> {
        self.columns.as_ref()?.iter().find(|c| c.name == name)
    }

    /// What deleting a vertex does to this edge table's edges.
    pub fn vertex_delete(&self) -> OnVertexDelete {
        self.on_vertex_delete.unwrap_or_default()
    }

    /// What the table's change events carry.
    pub fn changefeed_mode(&self) -> ChangefeedMode {
        self.changefeed.unwrap_or_default()
    }

    /// Top-level fields stored as f32 vectors.
    pub fn vector_fields(&self) -> Vec<&str> {
        self.columns
            .iter()
            .flatten()
            .filter(|c| matches!(c.ty, ColumnType::Vector(_)))
            .map(|c| c.name.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_parse_and_print() {
        for t in ["string", "int", "float", "bool", "timestamp", "json", "vector(3)"] {
            assert_eq!(t.parse::<ColumnType>().unwrap().to_string(), t);
        }
        assert!("vector(0)".parse::<ColumnType>().is_err());
        assert!("vector(x)".parse::<ColumnType>().is_err());
        assert!("text".parse::<ColumnType>().is_err());
    }
}
