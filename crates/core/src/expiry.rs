//! When a document expires: the earliest of its own `_expires_at` and, for each TTL index of its
//! table, the indexed time plus the index's `expire_after`. Computed from the blob alone, so the
//! write path (which keeps the one `ttlidx:` entry), every read (which hides expired documents)
//! and the sweep all agree on it.

use crate::cancel::Stop;
use crate::duration::parse_duration_ms;
use crate::fields::{EXPIRES_FIELD, parse_rfc3339_millis};
use crate::{Result, ServiceError};
use mosaic_catalog::{Catalog, IndexDef, IndexKind, IndexState};
use mosaic_entity::{self as entity, FieldDict, ValueRef};
use mosaic_keys::{TtlKey, table_prefix};
use mosaic_storage::{KeyRange, ReadView, Space};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

pub use super::clock::now_ms;

/// Refuses a document whose `_expires_at` is not a time (an RFC 3339 string or integer epoch
/// milliseconds): it would never expire, silently. Called on every write path before encoding.
pub fn check_document(doc: &Map<String, Value>) -> Result<()> {
    match doc.get(EXPIRES_FIELD) {
        None => Ok(()),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(()),
        Some(Value::String(s)) if parse_rfc3339_millis(s).is_some() => Ok(()),
        Some(Value::String(s)) => {
            Err(ServiceError::InvalidExpiry(format!("{EXPIRES_FIELD} {s:?} is not an RFC 3339 timestamp")))
        }
        Some(other) => Err(ServiceError::InvalidExpiry(format!(
            "{EXPIRES_FIELD} must be an RFC 3339 string or integer milliseconds since the Unix epoch, not {other}"
        ))),
    }
}

/// [`check_document`] on an encoded blob (the import's fast path encodes without a `Map`).
pub fn check_blob(blob: &[u8], dict: &FieldDict) -> Result<()> {
    if dict.id_of(EXPIRES_FIELD).is_none() {
        return Ok(());
    }
    match entity::get_path(blob, dict, &[EXPIRES_FIELD])? {
        None => Ok(()),
        Some(v @ (ValueRef::Int(_) | ValueRef::UInt(_) | ValueRef::Str(_))) if time_of(&v).is_some() => Ok(()),
        Some(ValueRef::Str(s)) => {
            Err(ServiceError::InvalidExpiry(format!("{EXPIRES_FIELD} {s:?} is not an RFC 3339 timestamp")))
        }
        Some(_) => Err(ServiceError::InvalidExpiry(format!(
            "{EXPIRES_FIELD} must be an RFC 3339 string or integer milliseconds since the Unix epoch"
        ))),
    }
}

/// A stored value as a time in epoch milliseconds: an integer, or an RFC 3339 string.
pub fn time_of(v: &ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Int(i) => Some(*i),
        ValueRef::UInt(u) => i64::try_from(*u).ok(),
        ValueRef::Str(s) => parse_rfc3339_millis(s),
        _ => None,
    }
}

/// The `expire_after` of a TTL index definition, in milliseconds (`None` if it has none).
pub fn expire_after(def: &IndexDef) -> Option<i64> {
    def.options.get("expire_after").and_then(Value::as_str).and_then(parse_duration_ms)
}

/// One TTL index: the field holding a time, and how long after it the document expires.
#[derive(Debug, Clone)]
struct Rule {
    path: Vec<String>,
    after: i64,
}

/// What decides the expiry of one table's documents, taken once per read or write.
#[derive(Debug, Clone)]
pub struct Expiry {
    /// the field dictionary holds `_expires_at`, so documents may
    explicit: bool,
    rules: Vec<Rule>,
    /// a TTL index is still building: a document it has not reached has its entry from before
    building: bool,
}

impl Expiry {
    /// The expiry rules of `table`; `None` when none of its documents can expire (no TTL index,
    /// and no document anywhere ever held `_expires_at`): then reads and writes skip expiry
    /// entirely. `dict` must be a snapshot taken after the blobs it will judge were read.
    pub fn of(catalog: &Catalog, dict: &FieldDict, table: &str) -> Option<Expiry> {
        let explicit = dict.id_of(EXPIRES_FIELD).is_some();
        let defs = catalog.ttl_indexes(table);
        if !explicit && defs.is_empty() {
            return None;
        }
        Some(Expiry::from_defs(explicit, defs.iter().map(|d| &**d)))
    }

    /// The rules of these TTL index definitions (those that are maintained count).
    pub fn from_defs<'a>(explicit: bool, defs: impl IntoIterator<Item = &'a IndexDef>) -> Expiry {
        let mut rules = Vec::new();
        let mut building = false;
        for def in defs.into_iter().filter(|d| d.kind == IndexKind::Ttl && d.is_maintained()) {
            building |= matches!(def.state, IndexState::Building { .. });
            if let (Some(field), Some(after)) = (def.fields.first(), expire_after(def)) {
                rules.push(Rule { path: field.split('.').map(str::to_owned).collect(), after });
            }
        }
        Expiry { explicit, rules, building }
    }

    /// True while a TTL index of the table is building.
    pub fn building(&self) -> bool {
        self.building
    }

    /// Every time the document could expire at: its `_expires_at`, and each TTL index's time.
    /// Its expiry is the earliest; its stored entry is always at one of them.
    pub fn candidates(&self, blob: &[u8], dict: &FieldDict) -> Result<Vec<i64>> {
        let mut out = Vec::new();
        if self.explicit
            && let Some(t) = entity::get_path(blob, dict, &[EXPIRES_FIELD])?.as_ref().and_then(time_of)
        {
            out.push(t);
        }
        for rule in &self.rules {
            let path: Vec<&str> = rule.path.iter().map(String::as_str).collect();
            if let Some(t) = entity::get_path(blob, dict, &path)?.as_ref().and_then(time_of) {
                out.push(t.saturating_add(rule.after));
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// When the document expires, if it does.
    pub fn at(&self, blob: &[u8], dict: &FieldDict) -> Result<Option<i64>> {
        Ok(self.candidates(blob, dict)?.first().copied())
    }

    /// True when the document has expired by `now` (`now >= expire_at`).
    pub fn expired(&self, blob: &[u8], dict: &FieldDict, now: i64) -> Result<bool> {
        Ok(self.at(blob, dict)?.is_some_and(|t| now >= t))
    }
}

/// True when the document `blob` of `table` has expired by `now`; costs a dictionary lookup and a
/// catalog lookup for a table whose documents cannot expire.
pub fn is_expired(catalog: &Catalog, dict: &FieldDict, table: &str, blob: &[u8], now: i64) -> Result<bool> {
    match Expiry::of(catalog, dict, table) {
        Some(e) => e.expired(blob, dict, now),
        None => Ok(false),
    }
}

/// True when a stored document of `table` has expired now: the write path treats it as gone.
pub fn expired(catalog: &Catalog, table: &str, blob: &[u8]) -> Result<bool> {
    is_expired(catalog, &catalog.dict(), table, blob, now_ms())
}

/// The ids of `table`'s documents that expired by `now` and are not swept yet, from their expiry
/// entries (for reads that do not read every document, such as a search's `total`).
pub fn expired_ids(view: &ReadView, table: &str, now: i64, stop: &Stop) -> Result<HashSet<String>> {
    Ok(expired_ids_at_most(view, table, now, stop, usize::MAX)?.unwrap_or_default())
}

/// [`expired_ids`], or `None` when there are more than `max` of them (a backlog the sweep has not
/// caught up with), so that a caller with bounded memory can read the documents instead.
pub fn expired_ids_at_most(
    view: &ReadView,
    table: &str,
    now: i64,
    stop: &Stop,
    max: usize,
) -> Result<Option<HashSet<String>>> {
    let range =
        KeyRange::Between(Bound::Included(table_prefix(table)), Bound::Excluded(TtlKey::expired_until(table, now)));
    let mut out = HashSet::new();
    for (i, item) in view.scan(Space::Ttlidx, range, false).enumerate() {
        if i % 64 == 0 {
            stop.check()?;
        }
        if out.len() >= max {
            return Ok(None);
        }
        let (key, _) = item?;
        out.insert(TtlKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?.id.into_owned());
    }
    Ok(Some(out))
}

/// The documents a walk must treat as absent because they expired, per table, read once from
/// the expiry entries of the walk's snapshot (tables whose documents cannot expire cost one
/// catalog lookup): a graph walk meets many documents it never reads.
pub struct Expired<'a> {
    view: &'a ReadView,
    catalog: &'a Catalog,
    dict: Arc<mosaic_entity::FieldDict>,
    now: i64,
    tables: HashMap<String, HashSet<String>>,
}

impl<'a> Expired<'a> {
    /// Expired as of now, on `view`.
    pub fn new(view: &'a ReadView, catalog: &'a Catalog) -> Self {
        Expired { view, catalog, dict: catalog.dict(), now: now_ms(), tables: HashMap::new() }
    }

    /// True when document `id` of `table` has expired.
    pub fn contains(&mut self, table: &str, id: &str, stop: &Stop) -> Result<bool> {
        if !self.tables.contains_key(table) {
            let ids = match Expiry::of(self.catalog, &self.dict, table) {
                Some(_) => expired_ids(self.view, table, self.now, stop)?,
                None => HashSet::new(),
            };
            self.tables.insert(table.to_owned(), ids);
        }
        Ok(self.tables.get(table).is_some_and(|ids| ids.contains(id)))
    }

    /// True when vertex `"table/id"` has expired (a malformed one has not: it is no document).
    pub fn vertex(&mut self, vertex: &str, stop: &Stop) -> Result<bool> {
        match vertex.split_once('/') {
            Some((table, id)) => self.contains(table, id, stop),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_entity::EncodeOptions;
    use serde_json::json;

    fn ttl_def(field: &str, after: &str) -> IndexDef {
        let mut d = IndexDef::ready_for_test(IndexKind::Ttl, &[field]);
        d.options.insert("expire_after".into(), json!(after));
        d
    }

    #[test]
    fn earliest_of_the_field_and_every_index() {
        let mut dict = FieldDict::new();
        let doc = json!({"_expires_at": "1970-01-01T00:00:10Z", "c": 1000, "d": {"t": "bad"}, "e": 2000});
        let blob = entity::encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        let defs = [ttl_def("c", "5s"), ttl_def("d.t", "1s"), ttl_def("e", "1s")];
        let e = Expiry::from_defs(true, &defs);
        assert_eq!(e.candidates(&blob, &dict).unwrap(), [3000, 6000, 10_000]);
        assert_eq!(e.at(&blob, &dict).unwrap(), Some(3000));
        assert!(e.expired(&blob, &dict, 3000).unwrap());
        assert!(!e.expired(&blob, &dict, 2999).unwrap());
        assert_eq!(Expiry::from_defs(true, []).at(&blob, &dict).unwrap(), Some(10_000));
        assert_eq!(Expiry::from_defs(false, []).at(&blob, &dict).unwrap(), None);
    }

    #[test]
    fn only_times_are_accepted() {
        let doc = |v: Value| json!({ "_expires_at": v }).as_object().unwrap().clone();
        assert!(check_document(&doc(json!(1_700_000_000_000i64))).is_ok());
        assert!(check_document(&doc(json!(-5))).is_ok());
        assert!(check_document(&doc(json!("2030-01-01T00:00:00Z"))).is_ok());
        for bad in [json!("tomorrow"), json!(1.5), json!(true), json!(null), json!({}), json!(u64::MAX)] {
            assert!(matches!(check_document(&doc(bad.clone())), Err(ServiceError::InvalidExpiry(_))), "{bad}");
        }
    }
}
