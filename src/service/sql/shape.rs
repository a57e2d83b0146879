//! The shape of a table as a relation: its columns, what each holds, and their Arrow types.
//!
//! - every table: `_id` (text, not null) first;
//! - edge tables: then `_from` and `_to` (text);
//! - typed tables: then their declared columns, `string` as text, `int` as bigint, `float` as
//!   double, `bool` as boolean, `timestamp` as a UTC timestamp (ms), `json` and `vector(N)` as
//!   JSON text;
//! - last, `doc`: the whole document as JSON text (what `GET …/documents/{id}` answers), for the
//!   JSON operators (`doc->>'city'`); left out of a typed table that declares a column `doc`.

use crate::catalog::{ColumnType, TableDef, TableKind};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::collections::HashMap;
use std::sync::Arc;

/// The name of the column holding the whole document.
pub const DOC: &str = "doc";

/// What a column of a relation holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    /// `_id`
    Id,
    /// an edge's `_from` or `_to` (the field's name)
    End(&'static str),
    /// a declared column of a typed table
    Typed(String, ColumnType),
    /// the whole document
    Doc,
}

/// Field metadata marking a text column that holds JSON (Arrow's canonical `arrow.json`
/// extension type): answers embed its values as JSON rather than as strings.
pub(crate) fn json_field(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable).with_metadata(HashMap::from([
        ("ARROW:extension:name".to_owned(), "arrow.json".to_owned()),
        ("ARROW:extension:metadata".to_owned(), "{}".to_owned()),
    ]))
}

/// The columns of a table's relation and its Arrow schema.
pub(crate) fn shape(def: &TableDef) -> (Vec<ColumnKind>, SchemaRef) {
    let mut kinds = vec![ColumnKind::Id];
    let mut fields = vec![Field::new("_id", DataType::Utf8, false)];
    if def.kind == TableKind::Edge {
        for end in ["_from", "_to"] {
            kinds.push(ColumnKind::End(end));
            fields.push(Field::new(end, DataType::Utf8, true));
        }
    }
    let columns = def.columns.as_deref().unwrap_or_default();
    for c in columns {
        let field = match c.ty {
            ColumnType::String => Field::new(&c.name, DataType::Utf8, true),
            ColumnType::Int => Field::new(&c.name, DataType::Int64, true),
            ColumnType::Float => Field::new(&c.name, DataType::Float64, true),
            ColumnType::Bool => Field::new(&c.name, DataType::Boolean, true),
            ColumnType::Timestamp => {
                Field::new(&c.name, DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true)
            }
            ColumnType::Json | ColumnType::Vector(_) => json_field(&c.name, true),
        };
        kinds.push(ColumnKind::Typed(c.name.clone(), c.ty));
        fields.push(field);
    }
    if !columns.iter().any(|c| c.name == DOC) {
        kinds.push(ColumnKind::Doc);
        fields.push(json_field(DOC, false));
    }
    (kinds, Arc::new(Schema::new(fields)))
}
