//! Record batches as JSON rows: each row a JSON array of its values, one per line. Numbers and
//! booleans are JSON numbers and booleans (a float that is not finite is `null`), text is a
//! string, a column holding JSON (`doc`, a `json` column, `doc->'k'`) is embedded as JSON; dates,
//! times, decimals, lists and structs are written as Arrow displays them, as strings (decimals as
//! numbers).

use datafusion::arrow::array::{
    Array, AsArray, BooleanArray, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array,
    UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::Result;
use serde::Serialize;
use std::io::Write;
use utoipa::ToSchema;

/// A column of an answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Column {
    /// its name (not unique: `SELECT a._id, b._id` gives two `_id`)
    pub name: String,
    /// its SQL type: `text`, `bigint`, `integer`, `smallint`, `double precision`, `real`,
    /// `boolean`, `timestamp`, `timestamptz`, `date`, `numeric`, `json`, `null`, or Arrow's name
    /// for any other
    #[serde(rename = "type")]
    pub ty: String,
}

/// Writes a statement's rows into the pieces of its answer (JSON for HTTP, the PostgreSQL
/// wire's rows for its listener). It runs on the engine's runtime, beside the statement.
pub trait RowWriter: Send + Sync + 'static {
    /// Appends rows `from..to` of `batch` to `out`, stopping after the row that takes `out`
    /// past `max_bytes`; answers the row it stopped before.
    fn write(&self, batch: &RecordBatch, from: usize, to: usize, out: &mut Vec<u8>, max_bytes: usize) -> Result<usize>;
}

/// Rows as JSON arrays, one per line ([`write_rows`]).
#[derive(Debug, Clone, Copy)]
pub struct JsonRows;

impl RowWriter for JsonRows {
    fn write(&self, batch: &RecordBatch, from: usize, to: usize, out: &mut Vec<u8>, max_bytes: usize) -> Result<usize> {
        write_rows(batch, from, to, out, max_bytes)
    }
}

/// True when a field holds JSON text (Arrow's `arrow.json` extension type).
pub fn is_json(field: &Field) -> bool {
    field.metadata().get("ARROW:extension:name").is_some_and(|n| n == "arrow.json")
}

/// The answer's column of a field.
pub fn column(field: &Field) -> Column {
    let ty = if is_json(field) {
        "json".to_owned()
    } else {
        match field.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".into(),
            DataType::Int64 | DataType::UInt32 | DataType::UInt64 => "bigint".into(),
            DataType::Int32 | DataType::UInt16 => "integer".into(),
            DataType::Int8 | DataType::Int16 | DataType::UInt8 => "smallint".into(),
            DataType::Float64 => "double precision".into(),
            DataType::Float32 | DataType::Float16 => "real".into(),
            DataType::Boolean => "boolean".into(),
            DataType::Timestamp(_, Some(_)) => "timestamptz".into(),
            DataType::Timestamp(_, None) => "timestamp".into(),
            DataType::Date32 | DataType::Date64 => "date".into(),
            DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
                "numeric".into()
            }
            DataType::Null => "null".into(),
            DataType::Union(..) => "json".into(),
            other => other.to_string(),
        }
    };
    Column { name: field.name().clone(), ty }
}

/// Appends rows `from..to` of `batch` to `out`, each a JSON array ending in `\n`, stopping after
/// the row that takes `out` past `max_bytes`; answers the row it stopped before.
pub fn write_rows(batch: &RecordBatch, from: usize, to: usize, out: &mut Vec<u8>, max_bytes: usize) -> Result<usize> {
    let options = FormatOptions::default().with_null("null");
    let schema = batch.schema();
    let formatters = batch
        .columns()
        .iter()
        .map(|a| ArrayFormatter::try_new(a.as_ref(), &options))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    for row in from..to {
        out.push(b'[');
        for (i, column) in batch.columns().iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            value(column.as_ref(), is_json(schema.field(i)), &formatters[i], row, out);
        }
        out.extend_from_slice(b"]\n");
        if out.len() >= max_bytes {
            return Ok(row + 1);
        }
    }
    Ok(to)
}

fn string(s: &str, out: &mut Vec<u8>) {
    // writing a str into a Vec cannot fail
    let _ = serde_json::to_writer(&mut *out, s);
}

/// JSON text embedded as it is when it is one compact JSON value, else written again (or, when
/// it is not JSON at all, as a string).
fn embed(text: &str, out: &mut Vec<u8>) {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) if text.contains(['\n', '\r']) => {
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        Ok(_) => out.extend_from_slice(text.as_bytes()),
        Err(_) => string(text, out),
    }
}

/// One value of `array` as JSON (a JSON column embedded).
pub fn json_value(array: &dyn Array, json: bool, row: usize, out: &mut Vec<u8>) -> Result<()> {
    let formatter = ArrayFormatter::try_new(array, &FormatOptions::default().with_null("null"))?;
    value(array, json, &formatter, row, out);
    Ok(())
}

fn value(array: &dyn Array, json: bool, formatter: &ArrayFormatter<'_>, row: usize, out: &mut Vec<u8>) {
    if array.is_null(row) && !matches!(array.data_type(), DataType::Union(..)) {
        out.extend_from_slice(b"null");
        return;
    }
    macro_rules! number {
        ($t:ty) => {{
            let v = array.as_any().downcast_ref::<$t>().map(|a| a.value(row));
            let _ = write!(out, "{}", v.unwrap_or_default());
        }};
    }
    match array.data_type() {
        DataType::Boolean => {
            let v = array.as_any().downcast_ref::<BooleanArray>().is_some_and(|a| a.value(row));
            out.extend_from_slice(if v { b"true" } else { b"false" });
        }
        DataType::Int8 => number!(Int8Array),
        DataType::Int16 => number!(Int16Array),
        DataType::Int32 => number!(Int32Array),
        DataType::Int64 => number!(Int64Array),
        DataType::UInt8 => number!(UInt8Array),
        DataType::UInt16 => number!(UInt16Array),
        DataType::UInt32 => number!(UInt32Array),
        DataType::UInt64 => number!(UInt64Array),
        DataType::Float64 => {
            let v = array.as_any().downcast_ref::<Float64Array>().map_or(f64::NAN, |a| a.value(row));
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        DataType::Float32 => {
            let v = array.as_any().downcast_ref::<Float32Array>().map_or(f32::NAN, |a| a.value(row));
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = match array.data_type() {
                DataType::Utf8 => array.as_string::<i32>().value(row),
                DataType::LargeUtf8 => array.as_string::<i64>().value(row),
                _ => array.as_string_view().value(row),
            };
            if json { embed(text, out) } else { string(text, out) }
        }
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            let text = formatter.value(row).to_string();
            match serde_json::from_str::<serde_json::Number>(&text) {
                Ok(_) => out.extend_from_slice(text.as_bytes()),
                Err(_) => string(&text, out),
            }
        }
        DataType::Union(fields, _) => {
            // json_get's answer: the child of the row's type, at the row (a sparse union)
            let union = array.as_union();
            let type_id = union.type_id(row);
            let child = union.child(type_id);
            let json = fields.iter().any(|(id, f)| id == type_id && is_json(f));
            let offset = union.value_offset(row);
            match ArrayFormatter::try_new(child.as_ref(), &FormatOptions::default().with_null("null")) {
                Ok(f) => value(child.as_ref(), json, &f, offset, out),
                Err(_) => out.extend_from_slice(b"null"),
            }
        }
        _ => string(&formatter.value(row).to_string(), out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, StringArray};
    use datafusion::arrow::datatypes::Schema;
    use std::sync::Arc;

    #[test]
    fn rows_are_json_arrays_with_json_columns_embedded() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("_id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            super::super::shape::json_field("doc", true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["a\"b", "c"])),
            Arc::new(Int64Array::from(vec![Some(1), None])),
            Arc::new(Float64Array::from(vec![1.5, f64::NAN])),
            Arc::new(StringArray::from(vec![Some("{\"k\":[1,2]}"), Some("not json")])),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let mut out = Vec::new();
        assert_eq!(write_rows(&batch, 0, 2, &mut out, 1 << 20).unwrap(), 2);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[\"a\\\"b\",1,1.5,{\"k\":[1,2]}]\n[\"c\",null,null,\"not json\"]\n"
        );
        let types: Vec<String> = schema.fields().iter().map(|f| column(f).ty).collect();
        assert_eq!(types, ["text", "bigint", "double precision", "json"]);
    }
}
