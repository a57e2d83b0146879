//! View definitions: the request, its checks, and the compiled form the write path uses (the
//! filter parsed, the aggregates resolved to the fields they read).

use crate::catalog::{ViewDef, ViewKind};
use crate::service::core::fields::ID_FIELD;
use crate::service::core::filter::{Filter, Op};
use crate::service::{Result, ServiceError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// Most views of one table.
pub const MAX_VIEWS_PER_TABLE: usize = 32;
/// Most `by` fields of a group view.
pub const MAX_BY: usize = 4;
/// Most aggregates of a group view.
pub const MAX_AGGREGATES: usize = 32;
/// Most view keys one document may touch in one group view: its groups (the product of the
/// distinct values of the `by` fields) times one plus its distinct min/max values.
pub const MAX_KEYS_PER_DOC: usize = 1000;

/// The body of `POST /v1/tables/{table}/views`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateView {
    /// view name, unique within the table (1-256 bytes, no control characters)
    #[schema(example = "adults_oslo")]
    pub name: String,
    /// `filter` (a saved filter's members) or `group` (aggregates per group)
    pub kind: ViewKind,
    /// a filter of the query language (not `$near`, `$box` or `$view`); required for a filter
    /// view, optional for a group view (which then groups every document)
    #[serde(default)]
    #[schema(value_type = Option<Object>, example = json!({"age": {"$gte": 18}, "city": "Oslo"}))]
    pub filter: Option<serde_json::Value>,
    /// group views: 1-4 dotted field paths; an array value puts the document in one group per
    /// distinct element (several fields: every combination); a missing field groups as null
    #[serde(default)]
    #[schema(example = json!(["city"]))]
    pub by: Vec<String>,
    /// group views: output name → `count`, `sum(field)`, `avg(field)`, `min(field)` or
    /// `max(field)` (dotted paths)
    #[serde(default)]
    #[schema(example = json!({"n": "count", "total": "sum(amount)", "oldest": "max(age)"}))]
    pub aggregates: BTreeMap<String, String>,
}

/// One aggregate, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    /// documents in the group
    Count,
    /// exact sum of a numeric field (index into [`Compiled::sum_fields`])
    Sum(usize),
    /// the sum divided by the count of numeric values
    Avg(usize),
    /// the least value (index into [`Compiled::range_fields`])
    Min(usize),
    /// the greatest value
    Max(usize),
}

/// A view definition ready for the write path and reads.
#[derive(Debug)]
pub struct Compiled {
    /// the filter (`None`: every document)
    pub filter: Option<Filter>,
    /// the grouping fields (empty for a filter view)
    pub by: Vec<String>,
    /// the distinct fields summed (by `sum` and `avg`), in order
    pub sum_fields: Vec<String>,
    /// the distinct fields of `min` and `max`, in order
    pub range_fields: Vec<String>,
    /// output name → aggregate
    pub aggs: Vec<(String, Agg)>,
}

fn invalid(msg: impl Into<String>) -> ServiceError {
    ServiceError::InvalidView(msg.into())
}

/// Checks a view name like an index name.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 256 || name.chars().any(char::is_control) {
        return Err(invalid("view name must be 1-256 bytes without control characters"));
    }
    Ok(())
}

fn check_path(path: &str) -> Result<()> {
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(invalid(format!("{path:?} is not a dotted field path like `address.city`")));
    }
    if path.split('.').next() == Some(ID_FIELD) {
        return Err(invalid("`_id` cannot be grouped or aggregated: every document has its own"));
    }
    Ok(())
}

/// Refuses the operators a view filter cannot hold.
fn check_filter(f: &Filter) -> Result<()> {
    match f {
        Filter::And(parts) | Filter::Or(parts) => parts.iter().try_for_each(check_filter),
        Filter::Not(inner) => check_filter(inner),
        Filter::Field { op: Op::Near { .. } | Op::Box(_), .. } => {
            Err(invalid("a view filter cannot use $near or $box: a view holds what a write alone decides"))
        }
        Filter::Field { .. } => Ok(()),
    }
}

/// Parses a view's filter; `$view` is refused (a view of a view), as are `$near` and `$box`.
pub fn parse_filter(v: &serde_json::Value) -> Result<Filter> {
    if v.as_object().is_some_and(|m| m.contains_key("$view")) {
        return Err(invalid("a view filter cannot use $view"));
    }
    let f = Filter::parse(v).map_err(|e| match e {
        ServiceError::InvalidFilter(m) | ServiceError::QueryTooComplex(m) => invalid(format!("filter: {m}")),
        other => other,
    })?;
    check_filter(&f)?;
    Ok(f)
}

/// Parses `count`, `sum(f)`, … into the function name and its field.
fn parse_aggregate(spec: &str) -> Result<(&str, Option<&str>)> {
    let spec = spec.trim();
    if spec == "count" {
        return Ok(("count", None));
    }
    let bad =
        || invalid(format!("aggregate {spec:?}: expected count, sum(field), avg(field), min(field) or max(field)"));
    let (func, rest) = spec.split_once('(').ok_or_else(bad)?;
    let field = rest.strip_suffix(')').ok_or_else(bad)?.trim();
    match func.trim() {
        f @ ("sum" | "avg" | "min" | "max") => {
            check_path(field)?;
            Ok((f, Some(field)))
        }
        _ => Err(bad()),
    }
}

/// Checks a request; returns the definition to store (state and `created_at` set by the caller).
pub fn check(req: &CreateView) -> Result<()> {
    check_name(&req.name)?;
    match req.kind {
        ViewKind::Filter => {
            let Some(f) = &req.filter else { return Err(invalid("a filter view needs a filter")) };
            if !req.by.is_empty() || !req.aggregates.is_empty() {
                return Err(invalid("a filter view takes no `by` or `aggregates`"));
            }
            parse_filter(f)?;
        }
        ViewKind::Group => {
            if !(1..=MAX_BY).contains(&req.by.len()) {
                return Err(invalid(format!("a group view takes 1 to {MAX_BY} `by` fields")));
            }
            req.by.iter().try_for_each(|p| check_path(p))?;
            let mut distinct = req.by.clone();
            distinct.sort();
            distinct.dedup();
            if distinct.len() != req.by.len() {
                return Err(invalid("a `by` field is named twice"));
            }
            if req.aggregates.len() > MAX_AGGREGATES {
                return Err(invalid(format!("a group view takes at most {MAX_AGGREGATES} aggregates")));
            }
            for (name, spec) in &req.aggregates {
                if name.is_empty() || name.len() > 256 || name.chars().any(char::is_control) {
                    return Err(invalid("aggregate names must be 1-256 bytes without control characters"));
                }
                if name == "key" {
                    return Err(invalid("`key` names a group's key: choose another aggregate name"));
                }
                parse_aggregate(spec)?;
            }
            if let Some(f) = &req.filter {
                parse_filter(f)?;
            }
        }
    }
    Ok(())
}

/// Compiles a stored definition.
pub fn compile(def: &ViewDef) -> Result<Compiled> {
    let filter = def.filter.as_ref().map(parse_filter).transpose()?;
    let (mut sum_fields, mut range_fields) = (Vec::<String>::new(), Vec::<String>::new());
    let index_of = |fields: &mut Vec<String>, f: &str| match fields.iter().position(|x| x == f) {
        Some(i) => i,
        None => {
            fields.push(f.to_owned());
            fields.len() - 1
        }
    };
    let mut aggs = Vec::with_capacity(def.aggregates.len());
    for (name, spec) in &def.aggregates {
        let agg = match parse_aggregate(spec)? {
            ("count", _) => Agg::Count,
            ("sum", Some(f)) => Agg::Sum(index_of(&mut sum_fields, f)),
            ("avg", Some(f)) => Agg::Avg(index_of(&mut sum_fields, f)),
            ("min", Some(f)) => Agg::Min(index_of(&mut range_fields, f)),
            (_, Some(f)) => Agg::Max(index_of(&mut range_fields, f)),
            (_, None) => Agg::Count,
        };
        aggs.push((name.clone(), agg));
    }
    Ok(Compiled { filter, by: def.by.clone(), sum_fields, range_fields, aggs })
}

/// The compiled form of `def`, made once per definition version and kept beside it in the
/// catalog.
pub fn compiled(def: &ViewDef) -> Result<Arc<Compiled>> {
    if let Some(c) = def.compiled.get().and_then(|c| c.clone().downcast::<Compiled>().ok()) {
        return Ok(c);
    }
    let c = Arc::new(compile(def)?);
    let _ = def.compiled.set(c.clone());
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: serde_json::Value) -> CreateView {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn definitions_are_checked() {
        let ok = [
            json!({"name": "a", "kind": "filter", "filter": {"age": {"$gte": 18}}}),
            json!({"name": "b", "kind": "group", "by": ["city", "tags"], "aggregates": {"n": "count", "s": "sum( amount )"}}),
            json!({"name": "c", "kind": "group", "by": ["a.b"], "filter": {"x": 1}}),
        ];
        for v in ok {
            check(&req(v.clone())).unwrap_or_else(|e| panic!("{v}: {e}"));
        }
        let bad = [
            json!({"name": "", "kind": "filter", "filter": {}}),
            json!({"name": "a", "kind": "filter"}),
            json!({"name": "a", "kind": "filter", "filter": {"p": {"$near": {"lat": 1, "lon": 2, "meters": 3}}}}),
            json!({"name": "a", "kind": "filter", "filter": {"$or": [{"p": {"$box": {"min_lat": 0, "min_lon": 0, "max_lat": 1, "max_lon": 1}}}]}}),
            json!({"name": "a", "kind": "filter", "filter": {"$view": "b"}}),
            json!({"name": "a", "kind": "filter", "filter": {"x": 1}, "by": ["y"]}),
            json!({"name": "a", "kind": "group", "by": []}),
            json!({"name": "a", "kind": "group", "by": ["a", "b", "c", "d", "e"]}),
            json!({"name": "a", "kind": "group", "by": ["a", "a"]}),
            json!({"name": "a", "kind": "group", "by": ["_id"]}),
            json!({"name": "a", "kind": "group", "by": ["a"], "aggregates": {"x": "median(a)"}}),
            json!({"name": "a", "kind": "group", "by": ["a"], "aggregates": {"x": "sum(a"}}),
            json!({"name": "a", "kind": "group", "by": ["a"], "aggregates": {"x": "sum(.a)"}}),
            json!({"name": "a", "kind": "group", "by": ["a"], "aggregates": {"key": "count"}}),
        ];
        for v in bad {
            assert!(matches!(check(&req(v.clone())), Err(ServiceError::InvalidView(_))), "{v}");
        }
    }
}
