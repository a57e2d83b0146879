//! The filter language shared by query, search, vector search and traversals: parsing from JSON and
//! evaluation against a stored document (fields are read from the blob, nothing else is decoded).
//!
//! Semantics (MongoDB's, with mosaicdb's key order):
//! - `{"a": v}` and `{"a": {"$eq": v}}` match when `a` equals `v`, or is an array holding `v`;
//!   numbers compare numerically (`1 == 1.0`), `"10"` is a string, never a number; `{"a": null}`
//!   also matches documents without `a`.
//! - `$gt $gte $lt $lte` compare within one type class (numbers with numbers, strings with strings,
//!   in key order); any array element may satisfy them.
//! - `$ne` / `$nin` are the negations of `$eq` / `$in` (so they match documents without the field).
//! - `$exists`, `$prefix` (strings), `$contains` (array element or substring), `$near`
//!   (`{"lat", "lon", "meters"}`, exact great-circle distance), `$box`
//!   (`{"min_lat", "min_lon", "max_lat", "max_lon"}`), `$and`, `$or`, `$not`.

use crate::fields::ID_FIELD;
use crate::{Result, ServiceError};
use geo::{GeoBox, Point};
use mosaic_entity::{self as entity, FieldDict, ValueRef};
use mosaic_keys::{Component, Number};
use serde_json::Value;
use std::cmp::Ordering;

pub mod geo;
mod project;
mod values;

pub use project::{MAX_FIELDS, project};
pub use values::{component, field_values, path};

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// every condition holds (an empty list matches everything)
    And(Vec<Filter>),
    /// some condition holds
    Or(Vec<Filter>),
    /// the condition does not hold
    Not(Box<Filter>),
    /// a condition on one field
    Field {
        /// dotted path
        path: String,
        /// the condition
        op: Op,
    },
}

/// A condition on one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// equals (or an array element equals)
    Eq(Value),
    /// not `Eq`
    Ne(Value),
    /// greater than, within the type class
    Gt(Component<'static>),
    /// greater or equal, within the type class
    Gte(Component<'static>),
    /// less than, within the type class
    Lt(Component<'static>),
    /// less or equal, within the type class
    Lte(Component<'static>),
    /// `Eq` one of
    In(Vec<Value>),
    /// `Eq` none of
    Nin(Vec<Value>),
    /// present (even as null) or absent
    Exists(bool),
    /// a string starting with
    Prefix(String),
    /// an array holding the value, or a string holding the substring
    Contains(Value),
    /// a point within `meters` of `center`
    Near {
        /// the center
        center: Point,
        /// the radius in meters
        meters: f64,
    },
    /// a point inside the box
    Box(GeoBox),
}

fn invalid(msg: impl Into<String>) -> ServiceError {
    ServiceError::InvalidFilter(msg.into())
}

/// A JSON scalar as a key component; `None` for arrays and objects.
pub fn scalar(v: &Value) -> Option<Component<'static>> {
    Some(match v {
        Value::Null => Component::Null,
        Value::Bool(b) => Component::Bool(*b),
        Value::Number(n) => Component::Num(if let Some(i) = n.as_i64() {
            Number::Int(i)
        } else if let Some(u) = n.as_u64() {
            Number::UInt(u)
        } else {
            Number::from_f64(n.as_f64()?).ok()?
        }),
        Value::String(s) => Component::Str(s.clone().into()),
        Value::Array(_) | Value::Object(_) => return None,
    })
}

/// Most branches of one `$or`.
pub const MAX_OR_BRANCHES: usize = 64;
/// Most conditions ANDed at one level: the operators of one object (each field's operators
/// count one each) or the items of one `$and`.
pub const MAX_CONJUNCTS: usize = 64;
/// Most field conditions in a whole filter.
pub const MAX_CONDITIONS: usize = 256;
/// Most values of one `$in` or `$nin`.
pub const MAX_IN_VALUES: usize = 1000;
/// Deepest nesting of `$and`, `$or` and `$not`.
pub const MAX_DEPTH: usize = 16;
/// Most filter objects in a whole filter (the top one, and each inside `$and`, `$or` and
/// `$not`): empty ones match everything but still cost a step per candidate document.
pub const MAX_NODES: usize = 1024;

fn too_complex(msg: String) -> ServiceError {
    ServiceError::QueryTooComplex(msg)
}

impl Filter {
    /// Parses a filter object. A filter over one of the limits above is refused
    /// (`query_too_complex`): planning and checking each candidate cost grows with its size.
    pub fn parse(v: &Value) -> Result<Filter> {
        let (mut conditions, mut nodes) = (0, 0);
        Filter::parse_at(v, 0, &mut conditions, &mut nodes)
    }

    fn parse_at(v: &Value, depth: usize, conditions: &mut usize, nodes: &mut usize) -> Result<Filter> {
        let Value::Object(map) = v else { return Err(invalid("a filter is a JSON object")) };
        if depth > MAX_DEPTH {
            return Err(too_complex(format!("filters nest at most {MAX_DEPTH} levels deep")));
        }
        *nodes += 1;
        if *nodes > MAX_NODES {
            return Err(too_complex(format!("a filter holds at most {MAX_NODES} filter objects")));
        }
        let mut all = Vec::with_capacity(map.len().min(MAX_CONJUNCTS));
        for (key, value) in map {
            if all.len() >= MAX_CONJUNCTS {
                return Err(too_complex(format!("at most {MAX_CONJUNCTS} conditions are ANDed at one level")));
            }
            match key.as_str() {
                "$and" | "$or" => {
                    let Value::Array(items) = value else {
                        return Err(invalid(format!("{key} takes an array of filters")));
                    };
                    let max = if key == "$and" { MAX_CONJUNCTS } else { MAX_OR_BRANCHES };
                    if items.len() > max {
                        return Err(too_complex(format!("{key} takes at most {max} filters")));
                    }
                    let parts = items
                        .iter()
                        .map(|f| Filter::parse_at(f, depth + 1, conditions, nodes))
                        .collect::<Result<Vec<_>>>()?;
                    all.push(if key == "$and" { Filter::And(parts) } else { Filter::Or(parts) });
                }
                "$not" => all.push(Filter::Not(Box::new(Filter::parse_at(value, depth + 1, conditions, nodes)?))),
                k if k.starts_with('$') => return Err(invalid(format!("unknown operator {k} at the top level"))),
                path => {
                    if path.is_empty() || path.split('.').any(str::is_empty) {
                        return Err(invalid(format!("invalid field path {path:?}")));
                    }
                    match value {
                        Value::Object(ops) if !ops.is_empty() && ops.keys().all(|k| k.starts_with('$')) => {
                            for (op, arg) in ops {
                                all.push(Filter::Field { path: path.to_owned(), op: parse_op(op, arg)? });
                            }
                        }
                        v => all.push(Filter::Field { path: path.to_owned(), op: Op::Eq(v.clone()) }),
                    }
                    *conditions += match value {
                        Value::Object(ops) => ops.len().max(1),
                        _ => 1,
                    };
                    if all.len() > MAX_CONJUNCTS {
                        return Err(too_complex(format!("at most {MAX_CONJUNCTS} conditions are ANDed at one level")));
                    }
                    if *conditions > MAX_CONDITIONS {
                        return Err(too_complex(format!("a filter holds at most {MAX_CONDITIONS} field conditions")));
                    }
                }
            }
        }
        Ok(if all.len() == 1 { all.remove(0) } else { Filter::And(all) })
    }

    /// True when the document `id`, stored as `blob`, matches. `_id` is a field like any other
    /// (a string, never missing, with no nested fields), though the blob does not hold it.
    pub fn matches(&self, id: &str, blob: &[u8], dict: &FieldDict) -> Result<bool> {
        Ok(match self {
            Filter::And(parts) => {
                for p in parts {
                    if !p.matches(id, blob, dict)? {
                        return Ok(false);
                    }
                }
                true
            }
            Filter::Or(parts) => {
                for p in parts {
                    if p.matches(id, blob, dict)? {
                        return Ok(true);
                    }
                }
                false
            }
            Filter::Not(f) => !f.matches(id, blob, dict)?,
            Filter::Field { path, op } if path == ID_FIELD => op.matches(Some(ValueRef::Str(id)), dict)?,
            Filter::Field { path, op } => {
                let steps: Vec<&str> = path.split('.').collect();
                if steps.first() == Some(&ID_FIELD) {
                    // a string has no fields
                    op.matches(None, dict)?
                } else {
                    op.matches(entity::get_path(blob, dict, &steps)?, dict)?
                }
            }
        })
    }

    /// The conditions that must all hold (the top-level AND), for the planner.
    pub fn conjuncts(&self) -> Vec<&Filter> {
        match self {
            Filter::And(parts) => parts.iter().flat_map(Filter::conjuncts).collect(),
            other => vec![other],
        }
    }
}

fn parse_op(op: &str, arg: &Value) -> Result<Op> {
    let cmp = |make: fn(Component<'static>) -> Op| {
        scalar(arg).map(make).ok_or_else(|| invalid(format!("{op} takes a scalar (null, boolean, number or string)")))
    };
    let list = || match arg {
        Value::Array(items) if items.len() > MAX_IN_VALUES => {
            Err(too_complex(format!("{op} takes at most {MAX_IN_VALUES} values")))
        }
        Value::Array(items) => Ok(items.clone()),
        _ => Err(invalid(format!("{op} takes an array"))),
    };
    Ok(match op {
        "$eq" => Op::Eq(arg.clone()),
        "$ne" => Op::Ne(arg.clone()),
        "$gt" => cmp(Op::Gt)?,
        "$gte" => cmp(Op::Gte)?,
        "$lt" => cmp(Op::Lt)?,
        "$lte" => cmp(Op::Lte)?,
        "$in" => Op::In(list()?),
        "$nin" => Op::Nin(list()?),
        "$exists" => Op::Exists(arg.as_bool().ok_or_else(|| invalid("$exists takes true or false"))?),
        "$prefix" => Op::Prefix(arg.as_str().ok_or_else(|| invalid("$prefix takes a string"))?.to_owned()),
        "$contains" => Op::Contains(arg.clone()),
        "$near" => {
            let center = Point::from_json(arg).ok_or_else(|| invalid("$near takes {\"lat\", \"lon\", \"meters\"}"))?;
            let meters = arg.get("meters").and_then(Value::as_f64).filter(|m| m.is_finite() && *m >= 0.0);
            Op::Near { center, meters: meters.ok_or_else(|| invalid("$near needs \"meters\" >= 0"))? }
        }
        "$box" => {
            let get = |k: &str| arg.get(k).and_then(Value::as_f64);
            match (get("min_lat"), get("min_lon"), get("max_lat"), get("max_lon")) {
                (Some(a), Some(b), Some(c), Some(d))
                    if Point::new(a, b).is_some() && Point::new(c, d).is_some() && a <= c =>
                {
                    Op::Box(GeoBox { min_lat: a, min_lon: b, max_lat: c, max_lon: d })
                }
                _ => return Err(invalid("$box takes {\"min_lat\", \"min_lon\", \"max_lat\", \"max_lon\"} in degrees")),
            }
        }
        other => return Err(invalid(format!("unknown operator {other}"))),
    })
}

/// The scalars a field offers to comparisons: itself, or the scalar elements of an array.
fn scalars<'a>(v: &ValueRef<'a>) -> Result<Vec<Component<'a>>> {
    Ok(match v {
        ValueRef::Array(a) => {
            a.iter().filter_map(|e| e.map(|e| component(&e)).transpose()).collect::<Result<_, _>>()?
        }
        ValueRef::Vector(vec) => {
            vec.iter().filter_map(|x| Number::from_f64(f64::from(x)).ok()).map(Component::Num).collect()
        }
        other => component(other).into_iter().collect(),
    })
}

fn same_class(a: &Component<'_>, b: &Component<'_>) -> bool {
    a.class_tags() == b.class_tags()
}

/// `field == v` with array and null semantics.
fn equals(field: Option<&ValueRef<'_>>, v: &Value, dict: &FieldDict) -> Result<bool> {
    let Some(field) = field else { return Ok(v.is_null()) };
    if let Some(c) = scalar(v) {
        return Ok(scalars(field)?.contains(&c));
    }
    // arrays and objects: the whole value, or an element of an array field
    if field.to_json(dict)? == *v {
        return Ok(true);
    }
    if let ValueRef::Array(a) = field {
        for e in a.iter() {
            if e?.to_json(dict)? == *v {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

impl Op {
    fn matches(&self, field: Option<ValueRef<'_>>, dict: &FieldDict) -> Result<bool> {
        let compare = |bound: &Component<'_>, ok: fn(Ordering) -> bool| -> Result<bool> {
            let Some(f) = &field else { return Ok(false) };
            Ok(scalars(f)?.iter().any(|c| same_class(c, bound) && ok(c.cmp(bound))))
        };
        Ok(match self {
            Op::Eq(v) => equals(field.as_ref(), v, dict)?,
            Op::Ne(v) => !equals(field.as_ref(), v, dict)?,
            Op::In(vs) => {
                for v in vs {
                    if equals(field.as_ref(), v, dict)? {
                        return Ok(true);
                    }
                }
                false
            }
            Op::Nin(vs) => {
                for v in vs {
                    if equals(field.as_ref(), v, dict)? {
                        return Ok(false);
                    }
                }
                true
            }
            Op::Gt(b) => compare(b, Ordering::is_gt)?,
            Op::Gte(b) => compare(b, Ordering::is_ge)?,
            Op::Lt(b) => compare(b, Ordering::is_lt)?,
            Op::Lte(b) => compare(b, Ordering::is_le)?,
            Op::Exists(want) => field.is_some() == *want,
            Op::Prefix(p) => match &field {
                Some(f) => scalars(f)?.iter().any(|c| matches!(c, Component::Str(s) if s.starts_with(p.as_str()))),
                None => false,
            },
            Op::Contains(v) => match &field {
                Some(ValueRef::Str(s)) => v.as_str().is_some_and(|sub| s.contains(sub)),
                Some(f @ (ValueRef::Array(_) | ValueRef::Vector(_))) => {
                    if let Some(c) = scalar(v) {
                        scalars(f)?.contains(&c)
                    } else {
                        equals(Some(f), v, dict)? && f.to_json(dict)? != *v
                    }
                }
                _ => false,
            },
            Op::Near { center, meters } => match &field {
                Some(f) => Point::from_value(f, dict)?.is_some_and(|p| center.distance_m(p) <= *meters),
                None => false,
            },
            Op::Box(b) => match &field {
                Some(f) => Point::from_value(f, dict)?.is_some_and(|p| b.contains(p)),
                None => false,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_entity::EncodeOptions;
    use serde_json::json;

    fn check(filter: Value, doc: Value) -> bool {
        let mut dict = FieldDict::new();
        let blob = entity::encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        Filter::parse(&filter).unwrap().matches("doc1", &blob, &dict).unwrap()
    }

    #[test]
    fn semantics() {
        let doc = json!({"a": 1, "s": "10", "arr": [1, "x", 5], "n": null, "o": {"p": 2.5},
                         "loc": {"lat": 59.91, "lon": 10.75}, "t": "hello world"});
        let yes = [
            json!({"a": 1.0}),
            json!({"a": {"$gte": 1, "$lt": 2}}),
            json!({"s": "10"}),
            json!({"arr": 5}),
            json!({"arr": {"$gt": 4}}),
            json!({"arr": {"$contains": "x"}}),
            json!({"t": {"$contains": "lo wo"}}),
            json!({"n": null}),
            json!({"missing": null}),
            json!({"missing": {"$exists": false}}),
            json!({"n": {"$exists": true}}),
            json!({"o.p": {"$lte": 2.5}}),
            json!({"s": {"$prefix": "1"}}),
            json!({"a": {"$in": [7, 1]}}),
            json!({"a": {"$nin": [7, 8]}}),
            json!({"missing": {"$ne": 3}}),
            json!({"$or": [{"a": 2}, {"s": "10"}]}),
            json!({"$not": {"a": 2}}),
            json!({"arr": [1, "x", 5]}),
            json!({"loc": {"$near": {"lat": 59.9, "lon": 10.75, "meters": 2000}}}),
            json!({"loc": {"$box": {"min_lat": 59, "min_lon": 10, "max_lat": 60, "max_lon": 11}}}),
            json!({}),
            json!({"_id": "doc1"}),
            json!({"_id": {"$in": ["x", "doc1"]}}),
            json!({"_id": {"$gt": "doc", "$lte": "doc1"}}),
            json!({"_id": {"$prefix": "do"}}),
            json!({"_id": {"$ne": null}}),
            json!({"_id.x": null}),
        ];
        for f in yes {
            assert!(check(f.clone(), doc.clone()), "{f} should match");
        }
        let no = [
            json!({"a": "1"}),
            json!({"s": 10}),
            json!({"a": {"$gt": "0"}}),
            json!({"s": {"$lt": 100}}),
            json!({"arr": {"$gt": 5}}),
            json!({"n": {"$gte": 0}}),
            json!({"missing": {"$exists": true}}),
            json!({"a": {"$ne": 1}}),
            json!({"a": {"$nin": [1]}}),
            json!({"$and": [{"a": 1}, {"s": "x"}]}),
            json!({"loc": {"$near": {"lat": 59.9, "lon": 10.75, "meters": 100}}}),
            json!({"t": {"$prefix": "world"}}),
            json!({"_id": null}),
            json!({"_id": "doc2"}),
            json!({"_id": {"$exists": false}}),
            json!({"_id": {"$gt": "doc1"}}),
            json!({"_id": {"$gt": 1}}),
        ];
        for f in no {
            assert!(!check(f.clone(), doc.clone()), "{f} should not match");
        }
    }

    #[test]
    fn bad_filters_are_rejected() {
        for f in [
            json!([1]),
            json!({"$and": {}}),
            json!({"$foo": 1}),
            json!({"a": {"$gt": [1]}}),
            json!({"a": {"$in": 1}}),
            json!({"a": {"$bogus": 1}}),
            json!({"a..b": 1}),
            json!({"loc": {"$near": {"lat": 1}}}),
        ] {
            assert!(Filter::parse(&f).is_err(), "{f}");
        }
    }
}
