//! Typed tables: every write is checked against the declared columns, defaults are filled in, and
//! timestamps are normalized to milliseconds since the Unix epoch (so they sort as numbers).

use super::{Result, ServiceError};
use crate::catalog::{ColumnDef, ColumnType, TableDef, TableKind};
use serde_json::{Map, Value};

// The system fields and their value rules live in `fields.rs`, a leaf the write path, TTL and
// graph code all use; re-exported here, where they have always been named.
pub use crate::service::core::fields::{EXPIRES_FIELD, FROM_FIELD, ID_FIELD, TO_FIELD, parse_rfc3339_millis};

/// Checks a column name: non-empty, not starting with `_` (reserved for system fields), and
/// without `.`: filters, sorts and indexes address nested fields by dotted paths, so a column
/// `a.b` could never be queried.
pub fn check_column_name(name: &str) -> Result<()> {
    let bad = |why: &str| Err(ServiceError::InvalidRequest(format!("column name {name:?}: {why}")));
    if name.is_empty() || name.starts_with('_') {
        return bad("must be non-empty and not start with '_' (reserved for system fields)");
    }
    if name.contains('.') {
        return bad("must not contain '.' (paths are dotted: a.b means field b inside field a)");
    }
    Ok(())
}

fn violation(field: &str, reason: impl Into<String>) -> ServiceError {
    ServiceError::SchemaViolation { field: field.to_owned(), reason: reason.into() }
}

/// Checks an edge's endpoints: both present, each `"table/id"` with non-empty parts.
pub fn check_edge(doc: &Map<String, Value>) -> Result<()> {
    for field in [FROM_FIELD, TO_FIELD] {
        match doc.get(field) {
            Some(Value::String(s)) if s.split_once('/').is_some_and(|(t, id)| !t.is_empty() && !id.is_empty()) => {}
            Some(_) => return Err(violation(field, "must be a vertex reference \"table/id\"")),
            None => return Err(violation(field, "an edge needs _from and _to")),
        }
    }
    Ok(())
}

/// Makes `doc` conform to `table`: checks kinds and types, fills defaults, normalizes timestamps.
/// Schemaless document tables accept any object.
pub fn conform(table: &TableDef, doc: &mut Map<String, Value>) -> Result<()> {
    if table.kind == TableKind::Edge {
        check_edge(doc)?;
        if let Some(w) = &table.weight_field
            && doc.get(w).and_then(crate::service::core::fields::weight_of).is_none()
        {
            return Err(violation(w, "is the table's weight field: every edge needs it as a number >= 0"));
        }
    }
    let Some(columns) = &table.columns else { return Ok(()) };
    if let Some(unknown) = doc.keys().find(|k| !is_system_field(table, k) && !columns.iter().any(|c| &c.name == *k)) {
        return Err(violation(unknown, "is not a column of this table"));
    }
    for column in columns {
        match doc.get_mut(&column.name) {
            None => match &column.default {
                Some(default) => {
                    let mut value = default.clone();
                    check_value(column, &mut value)?;
                    doc.insert(column.name.clone(), value);
                }
                None if column.nullable => {}
                None => return Err(violation(&column.name, "is required")),
            },
            Some(value) => check_value(column, value)?,
        }
    }
    Ok(())
}

fn is_system_field(table: &TableDef, name: &str) -> bool {
    name == ID_FIELD
        || name == EXPIRES_FIELD
        || (table.kind == TableKind::Edge && (name == FROM_FIELD || name == TO_FIELD))
}

/// Checks one value against its column (and normalizes timestamps in place).
pub fn check_value(column: &ColumnDef, value: &mut Value) -> Result<()> {
    let name = column.name.as_str();
    if value.is_null() {
        return if column.nullable { Ok(()) } else { Err(violation(name, "must not be null")) };
    }
    let ok = match column.ty {
        ColumnType::String => value.is_string(),
        ColumnType::Int => value.is_i64(),
        ColumnType::Float => value.is_number(),
        ColumnType::Bool => value.is_boolean(),
        ColumnType::Json => true,
        ColumnType::Timestamp => {
            let millis = match &*value {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => Some(parse_rfc3339_millis(s).ok_or_else(|| {
                    violation(name, "must be milliseconds since the Unix epoch or an RFC 3339 timestamp")
                })?),
                _ => None,
            };
            if let Some(ms) = millis {
                *value = Value::from(ms);
            }
            millis.is_some()
        }
        ColumnType::Vector(dim) => match &*value {
            Value::Array(items) => {
                if items.len() != dim as usize {
                    return Err(violation(name, format!("must have exactly {dim} numbers, not {}", items.len())));
                }
                items.iter().all(|x| x.as_f64().is_some_and(|f| (f as f32).is_finite()))
            }
            _ => false,
        },
    };
    if ok { Ok(()) } else { Err(violation(name, format!("must be of type {}", column.ty))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn typed() -> TableDef {
        serde_json::from_value(json!({
            "name": "people", "created_at": 0,
            "columns": [
                {"name": "name", "type": "string"},
                {"name": "age", "type": "int", "nullable": true},
                {"name": "score", "type": "float", "default": 0.5},
                {"name": "born", "type": "timestamp", "nullable": true},
                {"name": "emb", "type": "vector(2)", "nullable": true}
            ]
        }))
        .unwrap()
    }

    fn check(doc: Value) -> Result<Value> {
        let Value::Object(mut m) = doc else { unreachable!() };
        conform(&typed(), &mut m).map(|()| Value::Object(m))
    }

    #[test]
    fn typed_tables_check_fill_and_normalize() {
        let ok = check(json!({"name": "Ada", "born": "1970-01-01T00:00:01.5Z", "emb": [1, 2.5]})).unwrap();
        assert_eq!(ok, json!({"name": "Ada", "score": 0.5, "born": 1500, "emb": [1, 2.5]}));
        let field = |v: Value| match check(v).unwrap_err() {
            ServiceError::SchemaViolation { field, .. } => field,
            e => panic!("{e}"),
        };
        assert_eq!(field(json!({"age": 3})), "name");
        assert_eq!(field(json!({"name": 1})), "name");
        assert_eq!(field(json!({"name": "x", "age": 1.5})), "age");
        assert_eq!(field(json!({"name": "x", "age": 18446744073709551615u64})), "age");
        assert_eq!(field(json!({"name": "x", "extra": 1})), "extra");
        assert_eq!(field(json!({"name": "x", "born": "yesterday"})), "born");
        assert_eq!(field(json!({"name": "x", "emb": [1]})), "emb");
        assert_eq!(field(json!({"name": "x", "emb": [1, "a"]})), "emb");
        assert_eq!(field(json!({"name": null})), "name");
        assert!(check(json!({"name": "x", "age": null, "_id": "a"})).is_ok());
    }

    #[test]
    fn edges_need_vertex_references() {
        let edge: TableDef = serde_json::from_value(json!({"name": "knows", "kind": "edge", "created_at": 0})).unwrap();
        let run = |v: Value| {
            let Value::Object(mut m) = v else { unreachable!() };
            conform(&edge, &mut m)
        };
        assert!(run(json!({"_from": "users/a", "_to": "users/b", "since": 2020})).is_ok());
        assert!(run(json!({"_from": "users/a"})).is_err());
        assert!(run(json!({"_from": "users", "_to": "users/b"})).is_err());
        assert!(run(json!({"_from": "/a", "_to": "users/b"})).is_err());
    }
}
