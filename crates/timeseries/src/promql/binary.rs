//! The arithmetic operators (`+ - * / % ^`): between scalars, between a vector and a scalar
//! (either side: each series' value at each step), and between two vectors matched one to one
//! as Prometheus matches them — on their labels but `__name__` (or only those of `on (…)`, or
//! all but those of `ignoring (…)`), each match's value where both have one; a label set
//! matched by two series of one side at one step is refused. Every result drops the name.

use super::series::{Labels, NAME, drop_name, unsupported};
use super::value::{StepSeries, Value};
use mosaic_core::{Result, ServiceError};
use promql_parser::parser::{BinModifier, LabelModifier, VectorMatchCardinality};
use std::collections::HashMap;

/// The operators answered.
pub const OPERATORS: &[&str] = &["+", "-", "*", "/", "%", "^"];

/// `lhs op rhs` for the arithmetic operators (Go's `math.Mod` and `math.Pow` are C's).
fn arithmetic(op: &str, lhs: f64, rhs: f64) -> f64 {
    match op {
        "+" => lhs + rhs,
        "-" => lhs - rhs,
        "*" => lhs * rhs,
        "/" => lhs / rhs,
        "%" => lhs % rhs,
        _ => lhs.powf(rhs),
    }
}

/// `lhs op rhs`, with the operation's modifier (`on`, `ignoring`).
pub fn binary(op: &str, modifier: Option<&BinModifier>, lhs: Value, rhs: Value) -> Result<Value> {
    fn with_scalar(series: Vec<StepSeries>, scalar: &[f64], f: impl Fn(f64, f64) -> f64) -> Vec<StepSeries> {
        series
            .into_iter()
            .map(|s| StepSeries {
                labels: drop_name(s.labels),
                values: s.values.into_iter().zip(scalar).map(|(v, k)| v.map(|v| f(v, *k))).collect(),
            })
            .collect()
    }
    match (lhs, rhs) {
        (Value::Scalar(a), Value::Scalar(b)) => {
            Ok(Value::Scalar(a.into_iter().zip(b).map(|(a, b)| arithmetic(op, a, b)).collect()))
        }
        (Value::Vector(v), Value::Scalar(k)) => Ok(Value::Vector(with_scalar(v, &k, |v, k| arithmetic(op, v, k)))),
        (Value::Scalar(k), Value::Vector(v)) => Ok(Value::Vector(with_scalar(v, &k, |v, k| arithmetic(op, k, v)))),
        (Value::Vector(l), Value::Vector(r)) => Ok(Value::Vector(one_to_one(op, modifier, l, r)?)),
        _ => Err(ServiceError::InvalidRequest(format!(
            "the operator {op} takes scalars and instant vectors, not range vectors"
        ))),
    }
}

/// How two vectors' series are matched: by these labels, or by all but these (and the name).
enum Matching {
    On(Vec<String>),
    Ignoring(Vec<String>),
}

impl Matching {
    fn key(&self, labels: &Labels) -> Labels {
        match self {
            Matching::On(names) => labels.iter().filter(|(n, _)| names.contains(n)).cloned().collect(),
            Matching::Ignoring(names) => {
                labels.iter().filter(|(n, _)| n != NAME && !names.contains(n)).cloned().collect()
            }
        }
    }

    /// A result's labels: the left side's, without the name, and as `on`/`ignoring` say.
    fn result(&self, labels: &Labels) -> Labels {
        match self {
            Matching::On(names) => labels.iter().filter(|(n, _)| names.contains(n)).cloned().collect(),
            Matching::Ignoring(names) => {
                labels.iter().filter(|(n, _)| n != NAME && !names.contains(n)).cloned().collect()
            }
        }
    }
}

fn duplicate(side: &str) -> ServiceError {
    ServiceError::InvalidRequest(format!(
        "found duplicate series for the match group on the {side} hand-side of the operation: \
         many-to-many matching not allowed (matching labels must be unique on one side)"
    ))
}

fn one_to_one(
    op: &str,
    modifier: Option<&BinModifier>,
    lhs: Vec<StepSeries>,
    rhs: Vec<StepSeries>,
) -> Result<Vec<StepSeries>> {
    let matching = match modifier {
        Some(m) if !matches!(m.card, VectorMatchCardinality::OneToOne) => {
            return Err(unsupported("group_left and group_right"));
        }
        Some(m) if m.fill_values != Default::default() => return Err(unsupported("fill modifiers")),
        Some(m) => match &m.matching {
            Some(LabelModifier::Include(l)) => Matching::On(l.labels.clone()),
            Some(LabelModifier::Exclude(l)) => Matching::Ignoring(l.labels.clone()),
            None => Matching::Ignoring(Vec::new()),
        },
        None => Matching::Ignoring(Vec::new()),
    };
    let steps = lhs.first().or(rhs.first()).map_or(0, |s| s.values.len());
    let mut right: HashMap<Labels, Vec<usize>> = HashMap::new();
    for (i, s) in rhs.iter().enumerate() {
        right.entry(matching.key(&s.labels)).or_default().push(i);
    }
    let mut out: Vec<StepSeries> = Vec::new();
    let mut by_result: HashMap<Labels, usize> = HashMap::new();
    for l in &lhs {
        let Some(candidates) = right.get(&matching.key(&l.labels)) else { continue };
        let labels = matching.result(&l.labels);
        let at = *by_result.entry(labels.clone()).or_insert_with(|| {
            out.push(StepSeries { labels, values: vec![None; steps] });
            out.len() - 1
        });
        for step in 0..steps {
            let Some(a) = l.values[step] else { continue };
            let mut found = candidates.iter().filter_map(|&i| rhs[i].values[step]);
            let Some(b) = found.next() else { continue };
            if found.next().is_some() {
                return Err(duplicate("right"));
            }
            if out[at].values[step].is_some() {
                return Err(duplicate("left"));
            }
            out[at].values[step] = Some(arithmetic(op, a, b));
        }
    }
    out.retain(|s| s.values.iter().any(Option::is_some));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(labels: &[(&str, &str)], values: &[Option<f64>]) -> StepSeries {
        StepSeries::of(labels, values)
    }

    #[test]
    fn vectors_match_one_to_one() {
        let lhs = vec![
            s(&[(NAME, "a"), ("h", "1")], &[Some(6.0), Some(8.0)]),
            s(&[(NAME, "a"), ("h", "2")], &[Some(1.0), None]),
        ];
        let rhs = vec![
            s(&[(NAME, "b"), ("h", "1")], &[Some(2.0), None]),
            s(&[(NAME, "b"), ("h", "3")], &[Some(1.0), Some(1.0)]),
        ];
        let Value::Vector(out) = binary("/", None, Value::Vector(lhs.clone()), Value::Vector(rhs.clone())).unwrap()
        else {
            panic!()
        };
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].labels, vec![("h".to_owned(), "1".to_owned())]);
        assert_eq!(out[0].values, vec![Some(3.0), None]);
        // on (): everything matches everything: two right-hand series at step 0
        let on = BinModifier {
            card: VectorMatchCardinality::OneToOne,
            matching: Some(LabelModifier::include(vec![])),
            return_bool: false,
            fill_values: Default::default(),
        };
        let err = binary("+", Some(&on), Value::Vector(lhs), Value::Vector(rhs)).unwrap_err();
        assert!(err.to_string().contains("duplicate"), "{err}");
    }
}
