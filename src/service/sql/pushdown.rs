//! Which conjuncts of a statement's WHERE a scan takes over, as conditions of the filter language
//! of `POST …/query` (so the query planner picks an index for them, as `EXPLAIN` shows).
//!
//! - **Exact** (DataFusion does not check them again): comparisons (`=`, `<`, `<=`, `>`, `>=`),
//!   `IN (…)` (and an OR of `=` on one column, which is how DataFusion writes a short `IN` list),
//!   `BETWEEN` and `LIKE 'prefix%'` of `_id`, an edge's `_from`/`_to` and a typed
//!   table's `string`, `int` and `timestamp` columns against a constant of the column's type;
//!   `=` of a `bool` column (and the column alone, or under `NOT`). The filter language compares
//!   these exactly as SQL does: text by bytes, integers as integers, NULL matching nothing.
//! - **Inexact** (DataFusion checks them again, so the scan may return more): comparisons of
//!   `float` columns, and of JSON paths of `doc` with constant keys — `doc->>'k' = 'text'`,
//!   `json_get_str`, and `json_get_int`/`json_get_float`/`json_get_bool` (`(doc->'k')::int > 5`)
//!   against a constant. The filter matches a superset: an array field matches when an element
//!   does, and numbers compare by value whatever their type.
//! - Anything else (any other OR, `<>`, functions, keys holding `.`, a `->>` compared with text that reads
//!   as a JSON number …) stays with DataFusion.

use super::shape::ColumnKind;
use crate::catalog::ColumnType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Like, Operator, expr::InList};
use serde_json::{Map, Value, json};

/// Most conjuncts one scan takes over (the filter language's own limits are above).
pub const MAX_PUSHED: usize = 32;
/// Most values of an `IN (…)` taken over.
pub const MAX_IN: usize = 256;

/// A conjunct taken over: its condition, and whether it is exact.
#[derive(Debug, Clone, PartialEq)]
pub enum Pushed {
    /// the condition matches exactly the rows the conjunct keeps
    Exact(Value),
    /// the condition matches those rows and maybe more
    Inexact(Value),
}

impl Pushed {
    /// The condition.
    pub fn into_condition(self) -> Value {
        match self {
            Pushed::Exact(v) | Pushed::Inexact(v) => v,
        }
    }
}

/// How exact a comparison of a column's values is, if it can be taken over at all.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Text,
    Int,
    Float,
    Bool,
    Time,
}

fn class_of(kind: &ColumnKind) -> Option<(Class, bool)> {
    Some(match kind {
        ColumnKind::Id | ColumnKind::End(_) | ColumnKind::Typed(_, ColumnType::String) => (Class::Text, true),
        ColumnKind::Typed(_, ColumnType::Int) => (Class::Int, true),
        ColumnKind::Typed(_, ColumnType::Timestamp) => (Class::Time, true),
        ColumnKind::Typed(_, ColumnType::Bool) => (Class::Bool, true),
        ColumnKind::Typed(_, ColumnType::Float) => (Class::Float, false),
        _ => return None,
    })
}

/// The field a column's values are found at in the filter language.
fn field_of(kind: &ColumnKind) -> Option<String> {
    match kind {
        ColumnKind::Id => Some("_id".into()),
        ColumnKind::End(name) => Some((*name).into()),
        ColumnKind::Typed(name, _) => Some(name.clone()),
        ColumnKind::Doc => None,
    }
}

/// A constant as a JSON value of `class`, if it is one.
fn constant(expr: &Expr, class: Class) -> Option<Value> {
    let Expr::Literal(value, _) = strip(expr) else { return None };
    match (class, value) {
        (
            Class::Text,
            ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)),
        ) => Some(json!(s)),
        (Class::Int | Class::Float, v) if integer(v).is_some() => integer(v).map(Value::from),
        (Class::Float, ScalarValue::Float64(Some(f))) => serde_json::Number::from_f64(*f).map(Value::Number),
        (Class::Float, ScalarValue::Float32(Some(f))) => serde_json::Number::from_f64(f64::from(*f)).map(Value::Number),
        (Class::Bool, ScalarValue::Boolean(Some(b))) => Some(json!(b)),
        (Class::Time, ScalarValue::TimestampMillisecond(Some(ms), _)) => Some(json!(ms)),
        _ => None,
    }
}

fn integer(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::Int8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int64(Some(v)) => Some(*v),
        ScalarValue::UInt8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt64(Some(v)) => i64::try_from(*v).ok(),
        _ => None,
    }
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => strip(&alias.expr),
        other => other,
    }
}

/// The operator of the filter language for a comparison (`None` for `=`).
fn operator(op: Operator) -> Option<Option<&'static str>> {
    Some(match op {
        Operator::Eq => None,
        Operator::Lt => Some("$lt"),
        Operator::LtEq => Some("$lte"),
        Operator::Gt => Some("$gt"),
        Operator::GtEq => Some("$gte"),
        _ => return None,
    })
}

fn flip(op: Operator) -> Operator {
    match op {
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        other => other,
    }
}

fn condition(field: String, op: Option<&str>, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(
        field,
        match op {
            None => value,
            Some(op) => json!({ op: value }),
        },
    );
    Value::Object(map)
}

/// What a scan can do with one conjunct; `kind_of` names the relation's columns.
pub fn translate<'a>(expr: &Expr, kind_of: &dyn Fn(&str) -> Option<&'a ColumnKind>) -> Option<Pushed> {
    let column = |e: &Expr| match strip(e) {
        Expr::Column(c) => kind_of(&c.name),
        _ => None,
    };
    let exactness = |exact: bool, v: Value| if exact { Pushed::Exact(v) } else { Pushed::Inexact(v) };
    match strip(expr) {
        Expr::BinaryExpr(BinaryExpr { op: Operator::Or, .. }) => or_of_equalities(expr, kind_of),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            // the column (or JSON path) on the left, the constant on the right
            let (subject, op, value) = if column(left).is_some() || json_path(left).is_some() {
                (&**left, *op, &**right)
            } else {
                (&**right, flip(*op), &**left)
            };
            let filter_op = operator(op)?;
            if let Some(kind) = column(subject) {
                let (class, exact) = class_of(kind)?;
                if class == Class::Bool && filter_op.is_some() {
                    return None;
                }
                let value = constant(value, class)?;
                return Some(exactness(exact, condition(field_of(kind)?, filter_op, value)));
            }
            let (path, accessor) = json_path(subject)?;
            if !matches!(kind_of(&path.column), Some(ColumnKind::Doc)) {
                return None;
            }
            let value = match accessor {
                "json_as_text" | "json_get_str" if filter_op.is_none() => {
                    let text = constant(value, Class::Text)?;
                    // `->>` gives a number, boolean, object or array as its JSON text: text that
                    // reads as one of those could match a non-string, which the filter would miss
                    let reads_as_other = text
                        .as_str()
                        .and_then(|t| serde_json::from_str::<Value>(t).ok())
                        .is_some_and(|v| !v.is_string());
                    if accessor == "json_as_text" && reads_as_other {
                        return None;
                    }
                    text
                }
                "json_get_int" | "json_get_float" | "json_get_bool" => {
                    let value = match accessor {
                        "json_get_int" => json!(integer(literal(value)?)?),
                        "json_get_float" => constant(value, Class::Float)?,
                        _ if filter_op.is_none() => constant(value, Class::Bool)?,
                        _ => return None,
                    };
                    // these accessors also read a string that parses (`"7"` is 7 to `::int`),
                    // which the filter's comparison would miss: any string is let through too
                    let field = path.keys.join(".");
                    let any_string = condition(field.clone(), Some("$gte"), json!(""));
                    return Some(Pushed::Inexact(json!({"$or": [condition(field, filter_op, value), any_string]})));
                }
                _ => return None,
            };
            Some(Pushed::Inexact(condition(path.keys.join("."), filter_op, value)))
        }
        Expr::InList(InList { expr, list, negated: false }) => {
            let kind = column(expr)?;
            let (class, exact) = class_of(kind)?;
            if list.is_empty() || list.len() > MAX_IN || class == Class::Bool {
                return None;
            }
            let values = list.iter().map(|v| constant(v, class)).collect::<Option<Vec<_>>>()?;
            Some(exactness(exact, condition(field_of(kind)?, Some("$in"), Value::Array(values))))
        }
        Expr::Between(Between { expr, negated: false, low, high }) => {
            let kind = column(expr)?;
            let (class, exact) = class_of(kind)?;
            if class == Class::Bool {
                return None;
            }
            let (low, high) = (constant(low, class)?, constant(high, class)?);
            let mut map = Map::new();
            map.insert(field_of(kind)?, json!({"$gte": low, "$lte": high}));
            Some(exactness(exact, Value::Object(map)))
        }
        Expr::Like(Like { negated: false, expr, pattern, escape_char: None, case_insensitive: false }) => {
            let kind = column(expr)?;
            if class_of(kind)? != (Class::Text, true) {
                return None;
            }
            let pattern = constant(pattern, Class::Text)?;
            let prefix = pattern.as_str()?.strip_suffix('%')?;
            if prefix.is_empty() || prefix.contains(['%', '_', '\\']) {
                return None;
            }
            Some(Pushed::Exact(condition(field_of(kind)?, Some("$prefix"), json!(prefix))))
        }
        Expr::Column(_) => {
            let kind = column(expr)?;
            let field = field_of(kind)?;
            (class_of(kind)? == (Class::Bool, true)).then(|| Pushed::Exact(condition(field, None, json!(true))))
        }
        Expr::Not(inner) => {
            let kind = column(inner)?;
            let field = field_of(kind)?;
            (class_of(kind)? == (Class::Bool, true)).then(|| Pushed::Exact(condition(field, None, json!(false))))
        }
        _ => None,
    }
}

/// `c = a OR c = b OR …` of one column, as `c IN (a, b, …)`: DataFusion's simplifier writes a
/// short `IN (…)` list that way, and a scan should still use the column's index for it.
fn or_of_equalities<'a>(expr: &Expr, kind_of: &dyn Fn(&str) -> Option<&'a ColumnKind>) -> Option<Pushed> {
    let mut disjuncts = Vec::new();
    split_or(expr, &mut disjuncts)?;
    let mut subject: Option<&Expr> = None;
    let mut values = Vec::with_capacity(disjuncts.len());
    for disjunct in disjuncts {
        let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) = strip(disjunct) else { return None };
        let (column, value) = match (strip(left), strip(right)) {
            (c @ Expr::Column(_), v) | (v, c @ Expr::Column(_)) => (c, v),
            _ => return None,
        };
        if subject.is_some_and(|s| s != column) {
            return None;
        }
        subject = Some(column);
        values.push(value.clone());
    }
    let subject = subject?.clone();
    translate(&Expr::InList(InList::new(Box::new(subject), values, false)), kind_of)
}

/// The disjuncts of an OR chain, or `None` past [`MAX_IN`] of them.
fn split_or<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) -> Option<()> {
    match strip(expr) {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
            split_or(left, out)?;
            split_or(right, out)
        }
        other => {
            out.push(other);
            (out.len() <= MAX_IN).then_some(())
        }
    }
}

fn literal(expr: &Expr) -> Option<&ScalarValue> {
    match strip(expr) {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

/// A path into a JSON column: the column and its constant keys.
struct JsonPath {
    column: String,
    keys: Vec<String>,
}

/// `accessor(column, 'k1', 'k2', …)` (or such a call under a cast to a number), with keys the
/// filter language can name as a dotted path: non-empty, without `.`, not starting with `$`.
fn json_path(expr: &Expr) -> Option<(JsonPath, &'static str)> {
    let call = match strip(expr) {
        Expr::ScalarFunction(call) => call,
        Expr::Cast(cast) if cast.field.data_type().is_numeric() => match strip(&cast.expr) {
            Expr::ScalarFunction(call) if matches!(call.func.name(), "json_get_int" | "json_get_float") => call,
            _ => return None,
        },
        _ => return None,
    };
    let accessor = match call.func.name() {
        "json_as_text" => "json_as_text",
        "json_get_str" => "json_get_str",
        "json_get_int" => "json_get_int",
        "json_get_float" => "json_get_float",
        "json_get_bool" => "json_get_bool",
        _ => return None,
    };
    let (first, keys) = call.args.split_first()?;
    let Expr::Column(column) = strip(first) else { return None };
    let keys = keys
        .iter()
        .map(|k| match literal(k)? {
            ScalarValue::Utf8(Some(k)) | ScalarValue::Utf8View(Some(k)) | ScalarValue::LargeUtf8(Some(k))
                if !k.is_empty() && !k.contains('.') && !k.starts_with('$') =>
            {
                Some(k.clone())
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    if keys.is_empty() {
        return None;
    }
    Some((JsonPath { column: column.name.clone(), keys }, accessor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn kinds(name: &str) -> Option<&'static ColumnKind> {
        static KINDS: std::sync::LazyLock<Vec<(&str, ColumnKind)>> = std::sync::LazyLock::new(|| {
            vec![
                ("_id", ColumnKind::Id),
                ("age", ColumnKind::Typed("age".into(), ColumnType::Int)),
                ("score", ColumnKind::Typed("score".into(), ColumnType::Float)),
                ("active", ColumnKind::Typed("active".into(), ColumnType::Bool)),
                ("doc", ColumnKind::Doc),
            ]
        });
        KINDS.iter().find(|(n, _)| *n == name).map(|(_, k)| k)
    }

    fn run(expr: Expr) -> Option<Pushed> {
        translate(&expr, &kinds)
    }

    fn json_call(name: &str, args: Vec<Expr>) -> Expr {
        let udf = match name {
            "json_as_text" => datafusion_functions_json::udfs::json_as_text_udf(),
            _ => datafusion_functions_json::udfs::json_get_int_udf(),
        };
        Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(udf, args))
    }

    #[test]
    fn ids_and_typed_columns_are_taken_over_exactly() {
        assert_eq!(run(col("_id").eq(lit("a"))), Some(Pushed::Exact(json!({"_id": "a"}))));
        assert_eq!(run(lit("a").lt(col("_id"))), Some(Pushed::Exact(json!({"_id": {"$gt": "a"}}))));
        assert_eq!(run(col("age").gt_eq(lit(18i64))), Some(Pushed::Exact(json!({"age": {"$gte": 18}}))));
        assert_eq!(
            run(col("age").in_list(vec![lit(1i64), lit(2i64)], false)),
            Some(Pushed::Exact(json!({"age": {"$in": [1, 2]}})))
        );
        assert_eq!(
            run(col("age").between(lit(1i64), lit(9i64))),
            Some(Pushed::Exact(json!({"age": {"$gte": 1, "$lte": 9}})))
        );
        assert_eq!(run(col("_id").like(lit("ab%"))), Some(Pushed::Exact(json!({"_id": {"$prefix": "ab"}}))));
        assert_eq!(run(col("active")), Some(Pushed::Exact(json!({"active": true}))));
        // a short IN list, as DataFusion's simplifier leaves it
        assert_eq!(
            run(col("_id").eq(lit("a")).or(lit("b").eq(col("_id"))).or(col("_id").eq(lit("c")))),
            Some(Pushed::Exact(json!({"_id": {"$in": ["a", "b", "c"]}})))
        );
        assert_eq!(run(col("score").lt(lit(1.5))), Some(Pushed::Inexact(json!({"score": {"$lt": 1.5}}))));
    }

    #[test]
    fn what_the_filter_language_cannot_say_stays_with_datafusion() {
        assert_eq!(run(col("_id").not_eq(lit("a"))), None);
        assert_eq!(run(col("age").eq(lit("18"))), None, "a constant of another type");
        assert_eq!(run(col("_id").like(lit("a_%"))), None, "_ is a wildcard");
        assert_eq!(run(col("age").in_list(vec![lit(1i64)], true)), None, "NOT IN");
        assert_eq!(run(col("_id").eq(lit("a")).or(col("age").eq(lit(1i64)))), None, "an OR of two columns");
        assert_eq!(run(col("_id").eq(lit("a")).or(col("_id").gt(lit("b")))), None, "an OR of other comparisons");
        assert_eq!(run(col("doc").eq(lit("{}"))), None);
        assert_eq!(run(col("active").gt(lit(true))), None);
    }

    #[test]
    fn json_paths_are_taken_over_inexactly() {
        let text = |key: &str| json_call("json_as_text", vec![col("doc"), lit(key)]);
        assert_eq!(run(text("city").eq(lit("Oslo"))), Some(Pushed::Inexact(json!({"city": "Oslo"}))));
        assert_eq!(run(text("age").eq(lit("30"))), None, "'30' is also the text of the number 30");
        assert_eq!(run(text("a.b").eq(lit("x"))), None, "a key with a dot is not a dotted path");
        assert_eq!(run(text("city").gt(lit("O"))), None);
        let int = json_call("json_get_int", vec![col("doc"), lit("a"), lit("b")]);
        // a string that parses is a number to `::int`: every string passes the scan
        let any_string = json!({"a.b": {"$gte": ""}});
        assert_eq!(run(int.gt(lit(5i64))), Some(Pushed::Inexact(json!({"$or": [{"a.b": {"$gt": 5}}, any_string]}))));
        let on_id = json_call("json_as_text", vec![col("_id"), lit("k")]);
        assert_eq!(run(on_id.eq(lit("x"))), None, "only the document column holds JSON");
    }
}
