//! The document history (`hist:`) of the tables that keep one: every key and value decodes (a
//! version is a blob that decodes, or a deletion), a head's document exists and starts after the
//! document's last kept version, and a document's history agrees with whether it exists — one
//! that exists and has kept versions has a head; one whose last kept version is a deletion, and
//! that has no head, does not exist. The bounds (`max_age`, `max_versions`) are not checked:
//! retention applies them at its next run, so a history may exceed them until then. Tables
//! without history are skipped (what they kept is removed by that run too).

use crate::catalog::TableDef;
use crate::entity::{self, FieldDict};
use crate::keys::{EntityKey, HistKey, table_prefix};
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::{CheckReport, internal, show};
use crate::service::history::{How, decode_head, decode_version};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};

/// One document's history as walked: the head's start, and the last kept version's start and
/// whether it is a deletion.
#[derive(Default)]
struct Walked {
    id: Option<String>,
    head: Option<(Vec<u8>, i64)>,
    last: Option<(i64, bool)>,
}

/// Checks the history of `table`, if it keeps one.
pub(crate) fn check_history(
    view: &ReadView,
    dict: &FieldDict,
    table: &TableDef,
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<()> {
    if table.history.is_none() {
        return Ok(());
    }
    let name = table.name.as_str();
    let keys = view.scan(Space::Hist, KeyRange::Prefix(table_prefix(name)), false);
    let mut doc = Walked::default();
    for item in Watched::new(keys.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        let Ok(parsed) = HistKey::decode(&key) else {
            report.problem("undecodable_history", show(Space::Hist, &key), "the key does not decode");
            continue;
        };
        if doc.id.as_deref() != Some(parsed.id.as_ref()) {
            finish(view, name, std::mem::take(&mut doc), report)?;
            doc.id = Some(parsed.id.to_string());
        }
        report.checked.history_versions += u64::from(parsed.start.is_some());
        match parsed.start {
            None => match decode_head(&value) {
                Some((_, start)) => doc.head = Some((key.to_vec(), start)),
                None => report.problem("undecodable_history", show(Space::Hist, &key), "the head does not decode"),
            },
            Some(start) => match decode_version(&value) {
                Some((how, blob)) => {
                    if let Some(blob) = blob
                        && let Err(e) = entity::decode(blob, dict)
                    {
                        report.problem("undecodable_history", show(Space::Hist, &key), e.to_string());
                    }
                    doc.last = Some((start, how == How::Deleted));
                }
                None => report.problem("undecodable_history", show(Space::Hist, &key), "the version does not decode"),
            },
        }
    }
    finish(view, name, doc, report)
}

/// The checks of one document's whole history.
fn finish(view: &ReadView, table: &str, doc: Walked, report: &mut CheckReport) -> Result<()> {
    let Some(id) = doc.id else { return Ok(()) };
    let exists = view.get(Space::Entity, &EntityKey::new(table, &id).encode()).map_err(internal)?.is_some();
    let head_key = || HistKey::head(table, &id).encode();
    match (doc.head, doc.last) {
        (Some((key, _)), _) if !exists => {
            report.problem(
                "orphan_entry",
                show(Space::Hist, &key),
                format!("a history head of document {id:?}, which does not exist"),
            );
        }
        (Some((key, start)), Some((last, _))) if start <= last => {
            report.problem(
                "history_order",
                show(Space::Hist, &key),
                format!("the current version starts at {start}, not after the last kept one ({last})"),
            );
        }
        (None, Some((_, deleted))) if exists => {
            let why = if deleted {
                "the document exists after its last kept version, a deletion"
            } else {
                "the document has kept versions"
            };
            report.problem(
                "missing_entry",
                show(Space::Hist, &head_key()),
                format!("no head for document {id:?}: {why}"),
            );
        }
        (None, Some((_, false))) => {
            report.problem(
                "missing_entry",
                show(Space::Hist, &head_key()),
                format!("document {id:?} is gone, and its history ends in no deletion"),
            );
        }
        _ => {}
    }
    Ok(())
}
