//! The in-memory recomputation of maintained views that `tests/model/views.rs` and `tests/api/views.rs`
//! compare the server with, written from the documented semantics: a group view groups by each
//! distinct scalar of each `by` field (missing, null, objects and arrays without scalars group
//! as null), `sum`/`avg` take a field's value when it is a number, `min`/`max` every non-null
//! scalar (array elements included) in key order.

use super::{cmp_scalar, get, model_match};
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn distinct(mut values: Vec<Value>) -> Vec<Value> {
    values.sort_by(cmp_scalar);
    values.dedup_by(|a, b| cmp_scalar(a, b) == Ordering::Equal);
    values
}

/// The values a document groups under for one field.
pub fn group_values(doc: &Value, field: &str) -> Vec<Value> {
    let values = match get(doc, field) {
        Some(Value::Array(items)) => items.iter().filter(|v| is_scalar(v)).cloned().collect(),
        Some(v) if is_scalar(v) => vec![v.clone()],
        _ => Vec::new(),
    };
    let values = distinct(values);
    if values.is_empty() { vec![Value::Null] } else { values }
}

/// The values min/max consider: every non-null scalar of the field.
pub fn range_values(doc: &Value, field: &str) -> Vec<Value> {
    group_values(doc, field).into_iter().filter(|v| !v.is_null()).collect()
}

/// A view as the tests define it.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub filter: Option<Value>,
    pub by: Vec<String>,
    pub aggregates: Vec<(String, String)>,
}

impl Spec {
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), self.name.clone().into());
        m.insert("kind".into(), if self.by.is_empty() { "filter" } else { "group" }.into());
        if let Some(f) = &self.filter {
            m.insert("filter".into(), f.clone());
        }
        if !self.by.is_empty() {
            m.insert("by".into(), self.by.clone().into());
            let aggs: Map<String, Value> = self.aggregates.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect();
            m.insert("aggregates".into(), Value::Object(aggs));
        }
        Value::Object(m)
    }

    fn matches(&self, doc: &Value) -> bool {
        self.filter.as_ref().is_none_or(|f| model_match(doc, f))
    }

    /// A filter view's members, in id order.
    pub fn members(&self, docs: &BTreeMap<String, Value>) -> Vec<String> {
        docs.iter().filter(|(_, d)| self.matches(d)).map(|(id, _)| id.clone()).collect()
    }

    /// A group view's groups in key order: the key's values and each aggregate's expected value.
    pub fn groups(&self, docs: &BTreeMap<String, Value>) -> Vec<(Vec<Value>, BTreeMap<String, Expected>)> {
        let mut members: Vec<(Vec<Value>, &Value)> = Vec::new();
        for doc in docs.values().filter(|d| self.matches(d)) {
            let combos = self.by.iter().fold(vec![Vec::new()], |acc, f| {
                let values = group_values(doc, f);
                acc.iter()
                    .flat_map(|p: &Vec<Value>| {
                        values.iter().map(move |v| {
                            let mut n = p.clone();
                            n.push(v.clone());
                            n
                        })
                    })
                    .collect()
            });
            members.extend(combos.into_iter().map(|k| (k, doc)));
        }
        let cmp_key = |a: &Vec<Value>, b: &Vec<Value>| {
            a.iter().zip(b).map(|(x, y)| cmp_scalar(x, y)).find(|o| *o != Ordering::Equal).unwrap_or(Ordering::Equal)
        };
        members.sort_by(|a, b| cmp_key(&a.0, &b.0));
        let mut out: Vec<(Vec<Value>, Vec<&Value>)> = Vec::new();
        for (k, d) in members {
            match out.last_mut() {
                Some((last, docs)) if cmp_key(last, &k) == Ordering::Equal => docs.push(d),
                _ => out.push((k, vec![d])),
            }
        }
        out.into_iter().map(|(k, docs)| (k, self.aggregate(&docs))).collect()
    }

    fn aggregate(&self, docs: &[&Value]) -> BTreeMap<String, Expected> {
        let mut out = BTreeMap::new();
        for (name, spec) in &self.aggregates {
            let field = spec.split_once('(').map(|(_, r)| r.trim_end_matches(')').trim());
            let e = match (spec.split('(').next().unwrap_or(""), field) {
                ("count", _) => Expected::Int(docs.len() as i128),
                (f @ ("sum" | "avg"), Some(field)) => {
                    let (mut int, mut float, mut abs, mut n, mut floats) = (0i128, 0f64, 0f64, 0u64, 0u64);
                    for d in docs {
                        if let Some(Value::Number(x)) = get(d, field) {
                            n += 1;
                            if let Some(i) = x.as_i64().map(i128::from).or(x.as_u64().map(i128::from)) {
                                int += i;
                                abs += (i as f64).abs();
                            } else {
                                let f = x.as_f64().unwrap();
                                floats += 1;
                                float += f;
                                abs += f.abs();
                            }
                        }
                    }
                    if f == "avg" {
                        if n == 0 {
                            Expected::Null
                        } else {
                            Expected::Float((int as f64 + float) / n as f64, abs / n as f64)
                        }
                    } else if floats == 0 {
                        Expected::Int(int)
                    } else {
                        Expected::Float(int as f64 + float, abs)
                    }
                }
                (f @ ("min" | "max"), Some(field)) => {
                    let all = distinct(docs.iter().flat_map(|d| range_values(d, field)).collect());
                    let v = if f == "min" { all.first() } else { all.last() };
                    v.cloned().map_or(Expected::Null, Expected::Scalar)
                }
                _ => panic!("bad aggregate {spec}"),
            };
            out.insert(name.clone(), e);
        }
        out
    }
}

/// An aggregate's expected value.
#[derive(Debug, Clone)]
pub enum Expected {
    /// exactly this integer
    Int(i128),
    /// this float, within a relative tolerance of the sum of the magnitudes added
    Float(f64, f64),
    /// this scalar (numbers compared numerically)
    Scalar(Value),
    Null,
}

impl Expected {
    /// True when the server's value agrees.
    pub fn agrees(&self, got: &Value) -> bool {
        match self {
            Expected::Null => got.is_null(),
            Expected::Scalar(v) => cmp_scalar(v, got) == Ordering::Equal && !got.is_null(),
            Expected::Int(i) => match got.as_i64().map(i128::from).or(got.as_u64().map(i128::from)) {
                Some(g) => g == *i,
                // beyond i64/u64 the sum is shown as a float
                None => got.as_f64().is_some_and(|g| (g - *i as f64).abs() <= (*i as f64).abs() * 1e-12),
            },
            Expected::Float(f, magnitude) => {
                got.as_f64().is_some_and(|g| (g - f).abs() <= 1e-9 * magnitude.max(1.0) + 1e-300)
            }
        }
    }
}
