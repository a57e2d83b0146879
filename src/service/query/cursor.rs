//! Query cursors: the last result's position and the order of the pages, bound (see
//! [`crate::service::core::cursor`]) to the table, the filter and the requested sort.

use super::plan::{self, SortKey};
use crate::keys::Component;
use crate::service::Result;
use crate::service::core::cursor::{self, Binding, invalid};
use serde_json::Value;
use std::cmp::Ordering;

/// A result's position: its sort values (direction applied) and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OrderKey {
    /// the sort values, each with its direction (true: descending)
    pub values: Vec<(Component<'static>, bool)>,
    /// the document id
    pub id: String,
}

impl Ord for OrderKey {
    fn cmp(&self, other: &Self) -> Ordering {
        for ((a, desc), (b, _)) in self.values.iter().zip(&other.values) {
            let o = a.cmp(b);
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        // Ties go by `_id` in the first sort key's direction: the order an index scan of that
        // key yields them in, so a scan serving a one-key sort is already in result order.
        match self.values.first() {
            Some((_, true)) => other.id.cmp(&self.id),
            _ => self.id.cmp(&other.id),
        }
    }
}
impl PartialOrd for OrderKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The order of a query's pages, fixed by its first page: a later page keeps it even when the
/// plan changes in between (an index becomes ready, estimates shift).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Order {
    /// `_id` order (no sort, and the first page's plan had no natural order)
    Id,
    /// by these keys: the requested sort, or the natural order of the first page's range scan
    Sort(Vec<SortKey>),
}

impl Order {
    /// The order of a page sorted by `sort` (empty: `_id` order).
    pub(super) fn of(sort: &[SortKey]) -> Order {
        if sort.is_empty() { Order::Id } else { Order::Sort(sort.to_vec()) }
    }

    /// The sort keys (none for `_id` order).
    pub(super) fn keys(&self) -> &[SortKey] {
        match self {
            Order::Id => &[],
            Order::Sort(keys) => keys,
        }
    }
}

/// A decoded cursor: the pages' order and the last result's position.
#[derive(Debug, Clone)]
pub(super) struct Cursor {
    /// the order of every page
    pub order: Order,
    /// the last result returned
    pub after: OrderKey,
}

/// What a query's cursors are bound to: the table (and its incarnation), the filter (with its
/// keys in canonical order) and the requested sort.
pub(super) fn binding(
    table: &str,
    created_at: i64,
    filter: Option<&Value>,
    sort: &[SortKey],
    as_of: Option<i64>,
) -> Binding {
    let mut f = Vec::new();
    cursor::canonical_json(filter.unwrap_or(&Value::Object(Default::default())), &mut f);
    let s: Vec<Value> = sort.iter().map(|k| serde_json::json!([k.field, k.desc])).collect();
    let s = Value::Array(s).to_string();
    match as_of {
        // a page of the table as of a time continues only that time's pages
        Some(at) => Binding::table(table, created_at, &[b"query", &f, s.as_bytes(), &at.to_be_bytes()]),
        None => Binding::table(table, created_at, &[b"query", &f, s.as_bytes()]),
    }
}

/// The cursor after `k`, for pages in `order`.
pub(super) fn encode(binding: Binding, order: &Order, k: &OrderKey) -> String {
    let (mode, keys) = match order {
        Order::Id => ("id", &[][..]),
        Order::Sort(keys) => ("sort", keys.as_slice()),
    };
    let keys: Vec<Value> = keys.iter().map(|s| serde_json::json!([s.field, s.desc])).collect();
    let values: Vec<Value> = k.values.iter().map(|(c, _)| c.to_json()).collect();
    let v = serde_json::json!({"m": mode, "o": keys, "s": values, "id": k.id});
    cursor::seal(binding, v.to_string().as_bytes())
}

/// Reads a cursor handed out under `binding` for a query that requested `requested`: its order
/// must be that sort, or for a query without one, `_id` order or one key (a range index's
/// natural order).
pub(super) fn decode(binding: Binding, text: &str, requested: &[SortKey]) -> Result<Cursor> {
    let bytes = cursor::open(binding, text)?;
    let bad = || invalid("it is not one this query handed out");
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let id = v.get("id").and_then(Value::as_str).ok_or_else(bad)?.to_owned();
    let keys = v
        .get("o")
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|o| {
            let field = o.get(0).and_then(Value::as_str).ok_or_else(bad)?.to_owned();
            let desc = o.get(1).and_then(Value::as_bool).ok_or_else(bad)?;
            Ok(SortKey { field, desc })
        })
        .collect::<Result<Vec<_>>>()?;
    // The payload is the client's to alter behind an unchanged hash: its sort keys are held to
    // the same rules as a request's, so a forged cursor cannot ask for more work than a query.
    if keys.len() > plan::MAX_SORT_KEYS
        || keys.iter().any(|k| k.field.is_empty() || k.field.split('.').any(str::is_empty))
    {
        return Err(bad());
    }
    let order = match (v.get("m").and_then(Value::as_str), keys.is_empty()) {
        (Some("id"), true) => Order::Id,
        (Some("sort"), false) => Order::Sort(keys),
        _ => return Err(bad()),
    };
    let values = v.get("s").and_then(Value::as_array).ok_or_else(bad)?;
    if values.len() != order.keys().len() {
        return Err(bad());
    }
    let values = values
        .iter()
        .zip(order.keys())
        .map(|(v, k)| plan::component_of(v).map(|c| (c, k.desc)).ok_or_else(bad))
        .collect::<Result<_>>()?;
    let fits = match &order {
        Order::Id => requested.is_empty(),
        Order::Sort(keys) if requested.is_empty() => keys.len() == 1,
        Order::Sort(keys) => keys == requested,
    };
    if !fits {
        return Err(bad());
    }
    Ok(Cursor { order, after: OrderKey { values, id } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(field: &str) -> SortKey {
        SortKey { field: field.into(), desc: false }
    }

    /// A cursor's payload can be altered behind its hash: what it asks for is checked anyway.
    #[test]
    fn altered_cursors_are_refused() {
        let b = binding("t", 0, None, &[], None);
        let after = |n: usize| OrderKey { values: vec![(Component::Null, false); n], id: "x".into() };
        let ok = encode(b, &Order::Sort(vec![key("a")]), &after(1));
        assert!(decode(b, &ok, &[]).is_ok());
        assert!(decode(b, &encode(b, &Order::Id, &after(0)), &[]).is_ok());
        let many: Vec<SortKey> = (0..=plan::MAX_SORT_KEYS).map(|i| key(&format!("f{i}"))).collect();
        for (order, n) in [
            (Order::Sort(many.clone()), many.len()),
            (Order::Sort(vec![key("a"), key("b")]), 2),
            (Order::Sort(vec![key("a..b")]), 1),
            (Order::Sort(vec![key("a")]), 2),
        ] {
            let c = encode(b, &order, &after(n));
            assert!(matches!(decode(b, &c, &[]), Err(crate::service::ServiceError::InvalidCursor(_))), "{order:?}");
        }
        // under a requested sort, only that order
        let sorted = binding("t", 0, None, &[key("a")], None);
        let c = encode(sorted, &Order::Id, &after(0));
        assert!(decode(sorted, &c, &[key("a")]).is_err());
        let c = encode(sorted, &Order::Sort(vec![key("b")]), &after(1));
        assert!(decode(sorted, &c, &[key("a")]).is_err());
    }
}
