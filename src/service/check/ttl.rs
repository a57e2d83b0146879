//! The expiry entries (`ttlidx:`): each document that expires has exactly one, at its expiry,
//! and each entry is that of a live document. The expiry is derived here from the blob on its
//! own (the document's `_expires_at`, each TTL index's field plus `expire_after`), not with the
//! write path's `ttl::expiry`, so a wrong computation there is reported rather than agreed with.

use super::derive;
use crate::catalog::{IndexDef, IndexKind, IndexState};
use crate::entity::{self, FieldDict, ValueRef};
use crate::keys::{EntityKey, TtlKey, table_prefix};
use crate::service::Result;
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::{CheckReport, internal, show};
use crate::service::core::duration::parse_duration_ms;
use crate::service::core::fields::{EXPIRES_FIELD, parse_rfc3339_millis};
use crate::storage::{KeyRange, ReadView, Space};

/// How one table's documents expire, as its stored TTL index definitions say.
pub(super) struct Rules {
    /// (field, expire_after in ms) per ready TTL index
    indexes: Vec<(String, i64)>,
}

impl Rules {
    /// `None` while a TTL index of the table is building: until its build reaches a document,
    /// that document's entry rightly ignores the index, so entries cannot be judged.
    pub fn of(defs: &[IndexDef]) -> Option<Rules> {
        let ttl = defs.iter().filter(|d| d.kind == IndexKind::Ttl);
        if ttl.clone().any(|d| matches!(d.state, IndexState::Building { .. })) {
            return None;
        }
        let indexes = ttl
            .filter(|d| d.is_ready())
            .filter_map(|d| {
                let after = d.options.get("expire_after")?.as_str().and_then(parse_duration_ms)?;
                Some((d.fields.first()?.clone(), after))
            })
            .collect();
        Some(Rules { indexes })
    }

    fn expiry(&self, blob: &[u8], dict: &FieldDict) -> Result<Option<i64>> {
        let time = |v: Option<ValueRef<'_>>| match v {
            Some(ValueRef::Int(i)) => Some(i),
            Some(ValueRef::UInt(u)) => i64::try_from(u).ok(),
            Some(ValueRef::Str(s)) => parse_rfc3339_millis(s),
            _ => None,
        };
        let mut at = match entity::root(blob)? {
            ValueRef::Object(o) => time(o.get(dict, EXPIRES_FIELD)?),
            _ => None,
        };
        for (field, after) in &self.indexes {
            if let Some(t) = time(derive::lookup(blob, dict, field)?) {
                let t = t.saturating_add(*after);
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        }
        Ok(at)
    }

    /// The document's entry is there, if it expires.
    pub fn check_document(
        &self,
        view: &ReadView,
        dict: &FieldDict,
        table: &str,
        id: &str,
        blob: &[u8],
        report: &mut CheckReport,
    ) -> Result<()> {
        if let Some(at) = self.expiry(blob, dict)? {
            let key = TtlKey::new(table, at, id).encode();
            if view.get(Space::Ttlidx, &key)?.is_none() {
                report.problem("missing_entry", show(Space::Ttlidx, &key), format!("document {id:?} lacks it"));
            }
        }
        Ok(())
    }

    /// Every entry of the table names a document that expires at its time.
    pub fn check_entries(
        &self,
        view: &ReadView,
        dict: &FieldDict,
        table: &str,
        report: &mut CheckReport,
        stop: &Stop,
    ) -> Result<()> {
        let entries = view.scan(Space::Ttlidx, KeyRange::Prefix(table_prefix(table)), false);
        for item in Watched::new(entries.map(|i| i.map_err(crate::service::ServiceError::from)), stop) {
            let (key, value) = item?;
            report.checked.ttl_entries += 1;
            let entry = match TtlKey::decode(&key) {
                Ok(k) => k,
                Err(e) => {
                    report.problem("stale_entry", show(Space::Ttlidx, &key), format!("the key does not decode: {e}"));
                    continue;
                }
            };
            let Some(blob) = view.get(Space::Entity, &EntityKey::new(table, &entry.id).encode())? else {
                let why = format!("document {:?} does not exist", entry.id);
                report.problem("orphan_entry", show(Space::Ttlidx, &key), why);
                continue;
            };
            match self.expiry(&blob, dict) {
                Ok(Some(at)) if at == entry.expire_at && value.is_empty() => {}
                Ok(Some(at)) if at == entry.expire_at => {
                    report.problem("stale_entry", show(Space::Ttlidx, &key), "an expiry entry has no value")
                }
                Ok(Some(at)) => report.problem(
                    "stale_entry",
                    show(Space::Ttlidx, &key),
                    format!("document {:?} expires at {at}", entry.id),
                ),
                Ok(None) => report.problem(
                    "stale_entry",
                    show(Space::Ttlidx, &key),
                    format!("document {:?} does not expire", entry.id),
                ),
                Err(e) => report.problem(
                    "stale_entry",
                    show(Space::Ttlidx, &key),
                    format!("cannot judge it: {}", internal(e)),
                ),
            }
        }
        Ok(())
    }
}
