//! Appending change events: the one helper every document change calls, inside its write.
//!
//! [`stage`] is the changefeed's step of every document write (`write::derived`: every put,
//! patch, delete, batch, import, TTL expiry and cascade goes through there), and a table drop's
//! purge calls [`record_as`] for each document it removes; so no path that changes a document can
//! leave the feed behind. The storage layer numbers the events when the write commits.

use crate::catalog::{Catalog, ChangefeedMode};

use crate::service::Result;
use crate::service::core::change::Change;
use crate::storage::WriteTx;

/// What happened to the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// created or replaced
    Put,
    /// deleted
    Delete,
}

/// The changefeed's step of a document change: its event is appended to the write, as the
/// table's mode says — nothing when it is `off`; with the new document (on puts) when `full`.
pub(crate) fn stage(tx: &mut WriteTx<'_>, catalog: &Catalog, c: &Change<'_>) -> Result<()> {
    let op = if c.new.is_some() { Op::Put } else { Op::Delete };
    record_as(tx, catalog, &c.table.name, c.table.changefeed_mode(), c.id, op, c.new)
}

/// Appends the event of one change of document `id` of `table` (known by name and mode: a
/// dropped table's purge too) to the write.
pub(crate) fn record_as(
    tx: &mut WriteTx<'_>,
    catalog: &Catalog,
    table: &str,
    mode: ChangefeedMode,
    id: &str,
    op: Op,
    blob: Option<&[u8]>,
) -> Result<()> {
    if mode == ChangefeedMode::Off {
        return Ok(());
    }
    let document = match (mode, op, blob) {
        (ChangefeedMode::Full, Op::Put, Some(b)) => {
            Some(crate::service::core::render::json_with_id(&catalog.dict(), id, b)?)
        }
        _ => None,
    };
    tx.append_event(body(table, id, op, document.as_deref()));
    Ok(())
}

/// The event's members but `seq`, `txn` and `count`: `"ts":…,"op":…,"table":…,"id":…[,"document":…]`.
pub(crate) fn body(table: &str, id: &str, op: Op, document: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + table.len() + id.len() + document.map_or(0, <[u8]>::len));
    let ts = crate::service::core::clock::now_ms();
    out.extend_from_slice(b"\"ts\":");
    out.extend_from_slice(itoa::Buffer::new().format(ts).as_bytes());
    out.extend_from_slice(b",\"op\":");
    out.extend_from_slice(match op {
        Op::Put => b"\"put\"",
        Op::Delete => b"\"delete\"",
    });
    out.extend_from_slice(b",\"table\":");
    json_string(&mut out, table);
    out.extend_from_slice(b",\"id\":");
    json_string(&mut out, id);
    if let Some(d) = document {
        out.extend_from_slice(b",\"document\":");
        out.extend_from_slice(d);
    }
    out
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    // writing a str to a Vec cannot fail
    if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_escape_names() {
        let b = body("t\"1", "a\nb", Op::Delete, None);
        let v: serde_json::Value = serde_json::from_slice(&crate::keys::changefeed::event_value(3, 3, 1, &b)).unwrap();
        assert_eq!(v["table"], "t\"1");
        assert_eq!(v["id"], "a\nb");
        assert_eq!(v["op"], "delete");
        assert_eq!(v["seq"], 3);
        assert!(v.get("document").is_none());
    }
}
