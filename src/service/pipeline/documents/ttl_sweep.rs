//! The sweep: deletes the documents whose expiry has passed, oldest first, through the ordinary
//! delete path (`documents::delete_stored`), so their index, fulltext, graph and expiry entries
//! go in the same write. The scheduler in `src/background/` calls [`Pipeline::sweep_expired`].
//!
//! The due entries are read from a snapshot; each write then takes at most [`TTL_CHUNK`] of them
//! and checks each against its document as it is now (it may have been updated, refreshed or
//! deleted since), so a sweep never deletes a refreshed document and other writes wait for one
//! short batch at most.

use super::delete_stored;
use crate::catalog::TableDef;
use crate::keys::{EntityKey, TtlKey, table_prefix};
use crate::service::core::Handle;
use crate::service::pipeline::Pipeline;
use crate::service::pipeline::write::Write;
use crate::service::ttl::{EntryState, TTL_CHUNK, settle_entry};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, Space};
use serde::Serialize;
use std::ops::Bound;
use std::sync::Arc;
use utoipa::ToSchema;

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct SweepOutcome {
    /// expired documents deleted (edges a vertex delete cascaded to are not counted)
    pub removed: u64,
    /// expired documents left in place because their delete was refused (a vertex with edges in
    /// a `reject` edge table, or a cascade over the limit); retried by the next sweep
    pub skipped: u64,
    /// expiry entries that did not match their document (moved or removed)
    pub repaired: u64,
    /// true when the sweep stopped at `max_docs` with more entries due
    pub more: bool,
}

impl Pipeline {
    /// Deletes the documents of every table whose expiry is at or before `now_ms`, examining at
    /// most `max_docs` expiry entries; one write per [`TTL_CHUNK`] entries. Stops early (with
    /// what it did) when the database is closing.
    pub async fn sweep_expired(self: &Arc<Self>, now_ms: i64, max_docs: usize) -> Result<SweepOutcome> {
        let mut outcome = SweepOutcome::default();
        let mut budget = max_docs;
        for table in self.core.catalog.tables() {
            let mut after: Option<Vec<u8>> = None;
            loop {
                if self.core.closing() {
                    return Ok(outcome);
                }
                if budget == 0 {
                    // spent: say whether this or a later table has more due
                    if self.any_due(&table.name, now_ms, after.clone()).await? {
                        outcome.more = true;
                        return Ok(outcome);
                    }
                    break;
                }
                let take = budget.min(TTL_CHUNK);
                let (name, from) = (table.name.clone(), after.clone());
                let keys = self.read(move |db| due(db, &name, now_ms, from, take)).await?;
                let Some(last) = keys.last().cloned() else { break };
                budget -= keys.len();
                let (def, n) = (table.clone(), keys.len());
                let done = self.write(move |tx, db| sweep_chunk(tx, db, &def, keys)).await?;
                outcome.removed += done.removed;
                outcome.skipped += done.skipped;
                outcome.repaired += done.repaired;
                if n < take {
                    break;
                }
                after = Some(last);
            }
        }
        Ok(outcome)
    }

    async fn any_due(self: &Arc<Self>, table: &str, now: i64, after: Option<Vec<u8>>) -> Result<bool> {
        let t = table.to_owned();
        Ok(!self.read(move |db| due(db, &t, now, after, 1)).await?.is_empty())
    }
}

/// Up to `limit` expiry entries of `table` due at `now`, after `after`, as committed (the
/// committer checks each one again as it sweeps).
fn due(db: &Pipeline, table: &str, now: i64, after: Option<Vec<u8>>, limit: usize) -> Result<Vec<Vec<u8>>> {
    let lower = after.map_or_else(|| Bound::Included(table_prefix(table)), Bound::Excluded);
    let upper = Bound::Excluded(TtlKey::expired_until(table, now));
    db.core
        .store
        .committed()
        .scan(Space::Ttlidx, KeyRange::Between(lower, upper), false)
        .take(limit)
        .map(|r| r.map(|(k, _)| k.to_vec()).map_err(ServiceError::from))
        .collect()
}

/// On the committer: deletes each entry's document if it still expires at the entry's time (the
/// scan bound made that time due); a wrong entry is settled instead. A document whose delete is
/// refused stays, with everything its attempt staged undone, and the chunk goes on.
fn sweep_chunk(tx: &mut Write<'_, '_>, db: &Pipeline, read_for: &TableDef, keys: Vec<Vec<u8>>) -> Result<SweepOutcome> {
    let mut out = SweepOutcome::default();
    // dropped (or dropped and re-created) since the entries were read: its purge removes them
    let Some(table) = db.core.catalog.table(&read_for.name).filter(|t| t.created_at == read_for.created_at) else {
        return Ok(out);
    };
    for key in keys {
        let blob = match settle_entry(tx, &db.core.catalog, &table.name, &key)? {
            EntryState::Right(blob) => blob,
            EntryState::Fixed => {
                out.repaired += 1;
                continue;
            }
        };
        let id = TtlKey::decode(&key).map_err(|e| ServiceError::Internal(e.to_string()))?.id.into_owned();
        let ekey = EntityKey::new(&table.name, &id).encode();
        match tx.attempt(|tx| delete_stored(tx, &table, &id, ekey, &blob)) {
            Ok(()) => out.removed += 1,
            Err(e @ ServiceError::Unavailable(_)) => return Err(e),
            Err(e) => {
                tracing::warn!(table = table.name, id, error = %e, "an expired document was not deleted");
                out.skipped += 1;
            }
        }
    }
    Ok(out)
}
