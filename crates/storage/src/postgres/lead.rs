//! Who writes a PostgreSQL database (see `storage/cluster.rs`): the lock a leader holds for its
//! session, the epoch it moves on as it takes the lead, the fence each of its groups passes, and
//! the row followers poll.

use super::conn::{Conn, blocking};
use crate::cluster::Leadership;
use crate::error::{Result, StorageError};
use crate::space::Space;
use postgres::SimpleQueryMessage;

/// The row that names the state the committed keys are (id 1), whether a restore into the
/// database is unfinished, and the leadership (epoch, leader, the keyspaces' last changes).
pub(super) const STORE_TABLE: &str = "mosaic_store";

/// The document keys each of a leader's groups wrote, by the state the group published, and the
/// state of the group logged before it (`prev`: a follower that finds a row whose `prev` it has
/// not seen missed rows the leader pruned). Followers evict these keys from their document
/// caches (see `cluster.rs`).
const LOG_TABLE: &str = "mosaic_log";

/// The groups the log keeps (older rows are pruned every [`PRUNE_EVERY`] groups).
const LOG_KEPT: u64 = 4096;
const PRUNE_EVERY: u64 = 256;

/// The key of the session lock a leader holds on its database (`pg_try_advisory_lock`): "mosa".
const LOCK_KEY: i64 = 0x6d6f_7361;

/// The lock of database `id` of a server (see `StorageConfig::database`): the default one's is
/// [`LOCK_KEY`], every other's its own.
pub(super) fn lock_key(id: u32) -> i64 {
    LOCK_KEY + (i64::from(id) << 32)
}

/// Slots of `mosaic_store.changed` (one per keyspace, room for more).
pub(super) const CHANGED_SLOTS: usize = 16;
const _: () = assert!(Space::ALL.len() <= CHANGED_SLOTS);

/// The store's row and what cluster mode added to it (an older database gains the columns; the
/// `ALTER`, which locks the table against every read view, only then).
pub(super) fn store_ddl() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {STORE_TABLE} (id int PRIMARY KEY, state bigint NOT NULL, restoring boolean NOT NULL);\
         INSERT INTO {STORE_TABLE} VALUES (1, 0, false) ON CONFLICT (id) DO NOTHING;\
         CREATE TABLE IF NOT EXISTS {LOG_TABLE} (state bigint PRIMARY KEY, prev bigint NOT NULL, documents bytea NOT NULL);\
         DO $$ BEGIN \
           IF NOT EXISTS (SELECT 1 FROM information_schema.columns \
               WHERE table_schema = current_schema() AND table_name = '{STORE_TABLE}' AND column_name = 'changed') THEN \
             ALTER TABLE {STORE_TABLE} ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0, \
               ADD COLUMN IF NOT EXISTS leader text NOT NULL DEFAULT '', \
               ADD COLUMN IF NOT EXISTS changed bigint[] NOT NULL DEFAULT array_fill(0::bigint, ARRAY[{CHANGED_SLOTS}]); \
           END IF; \
         END $$;"
    )
}

/// Tries the database's lock for the session of `conn` once: whether it holds it now.
pub(super) fn try_lock(conn: &mut Conn, key: i64) -> Result<bool> {
    let row = blocking(|| conn.client().query_one("SELECT pg_try_advisory_lock($1)", &[&key]))?;
    Ok(row.try_get::<_, bool>(0)?)
}

/// Takes the lead on `conn`, which holds the lock: moves the epoch on and names `leader` (the
/// advertised URL, empty if none). Returns the new epoch and the state the last leader
/// published. Durable whatever the session's setting: a leader must not lose its epoch.
pub(super) fn take_lead(conn: &mut Conn, leader: &str) -> Result<(u64, u64)> {
    let sql = format!(
        "BEGIN; SET LOCAL synchronous_commit = on;\
         UPDATE {STORE_TABLE} SET epoch = epoch + 1, leader = {} WHERE id = 1 RETURNING epoch, state; COMMIT",
        quote(leader)
    );
    let messages = blocking(|| conn.client().simple_query(&sql))?;
    let row = first_row(&messages).ok_or_else(|| StorageError::Engine(format!("{STORE_TABLE} has no row")))?;
    Ok((number(row.get(0))?, number(row.get(1))?))
}

/// Begins a group's transaction on the leader's connection and checks, in it, that the epoch is
/// still `epoch` — holding the store's row until the group ends, so no other server takes the
/// lead in between. A moved epoch: [`StorageError::Deposed`] (the transaction is left open, for
/// the group's end to roll back).
pub(super) fn begin_fenced(conn: &mut Conn, epoch: u64) -> Result<()> {
    // a row lock, no new row version: what a new leader's move of the epoch waits for
    let sql = format!("BEGIN; SELECT 1 FROM {STORE_TABLE} WHERE id = 1 AND epoch = {epoch} FOR NO KEY UPDATE");
    let messages = blocking(|| conn.client().simple_query(&sql))?;
    let updated = messages.iter().rev().find_map(|m| match m {
        SimpleQueryMessage::CommandComplete(n) => Some(*n),
        _ => None,
    });
    if updated == Some(1) { Ok(()) } else { Err(StorageError::Deposed) }
}

/// The statement that ends a group publishing `state`: the state row, and `state` as the last
/// change of every keyspace in `touched` (a bit per `Space as usize`); with `log`, the group's
/// document keys (encoded as [`Conn::documents`] holds them) and the state logged before.
pub(super) fn publish_sql(state: u64, touched: u32, epoch: u64, log: Option<(&[u8], u64)>) -> String {
    use std::fmt::Write;
    let mut set = format!("state = {state}");
    for space in Space::ALL {
        if touched & (1 << space as u32) != 0 {
            set.push_str(&format!(", changed[{}] = {state}", space as usize + 1));
        }
    }
    let mut sql = format!("UPDATE {STORE_TABLE} SET {set} WHERE id = 1 AND epoch = {epoch};");
    if let Some((documents, prev)) = log {
        sql.reserve(documents.len() * 2 + 96);
        let _ = write!(sql, "INSERT INTO {LOG_TABLE} VALUES ({state}, {prev}, '\\x");
        for b in documents {
            let _ = write!(sql, "{b:02x}");
        }
        sql.push_str("'::bytea);");
        if state.is_multiple_of(PRUNE_EVERY) {
            let _ = write!(
                sql,
                "DELETE FROM {LOG_TABLE} WHERE state < (SELECT min(state) FROM \
                 (SELECT state FROM {LOG_TABLE} ORDER BY state DESC LIMIT {LOG_KEPT}) kept);"
            );
        }
    }
    sql
}

/// The state of the last group logged (0: none), where a new leader's log goes on from.
pub(super) fn last_logged(conn: &mut Conn) -> Result<u64> {
    let sql = format!("SELECT coalesce(max(state), 0)::text FROM {LOG_TABLE}");
    let messages = blocking(|| conn.client().simple_query(&sql))?;
    number(first_row(&messages).and_then(|r| r.get(0)))
}

/// The document keys the groups after `applied` up to `upto` wrote, or `None` if some of those
/// groups' rows are gone (pruned, or a server outside cluster mode wrote).
pub(super) fn documents_since(conn: &mut Conn, applied: u64, upto: u64) -> Result<Option<Vec<Vec<u8>>>> {
    let sql = format!("SELECT prev, documents FROM {LOG_TABLE} WHERE state > $1 AND state <= $2 ORDER BY state");
    let (from, to) = (applied as i64, upto as i64);
    let rows = blocking(|| conn.client().query(&sql, &[&from, &to]))?;
    let Some(first) = rows.first() else { return Ok(None) };
    if first.try_get::<_, i64>(0)? as u64 > applied {
        return Ok(None);
    }
    let mut keys = Vec::new();
    for row in &rows {
        let mut rest: &[u8] = row.try_get(1)?;
        while let Some((len, after)) = rest.split_first_chunk::<4>() {
            let len = u32::from_be_bytes(*len) as usize;
            let Some((key, after)) = (after.len() >= len).then(|| after.split_at(len)) else {
                return Err(StorageError::Engine(format!("{LOG_TABLE} holds a cut document key")));
            };
            keys.push(key.to_vec());
            rest = after;
        }
    }
    Ok(Some(keys))
}

/// The backend's leadership row, and whether a server holds the lock.
pub(super) fn leadership(conn: &mut Conn) -> Result<Leadership> {
    let sql = format!("SELECT state, epoch, leader, array_to_string(changed, ',') FROM {STORE_TABLE} WHERE id = 1");
    let messages = blocking(|| conn.client().simple_query(&sql))?;
    let row = first_row(&messages).ok_or_else(|| StorageError::Engine(format!("{STORE_TABLE} has no row")))?;
    let changed = row.get(3).unwrap_or_default();
    Ok(Leadership {
        state: number(row.get(0))?,
        epoch: number(row.get(1))?,
        leader: row.get(2).unwrap_or_default().to_owned(),
        changed: changed.split(',').filter(|s| !s.is_empty()).map(|s| number(Some(s))).collect::<Result<_>>()?,
    })
}

/// Whether no session holds the database's lock (no leader): taken and at once given back.
pub(super) fn lock_free(conn: &mut Conn, key: i64) -> Result<bool> {
    let row =
        blocking(|| conn.client().query_one("SELECT pg_try_advisory_lock($1) AND pg_advisory_unlock($1)", &[&key]))?;
    Ok(row.try_get::<_, bool>(0)?)
}

fn first_row(messages: &[SimpleQueryMessage]) -> Option<&postgres::SimpleQueryRow> {
    messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    })
}

fn number(text: Option<&str>) -> Result<u64> {
    text.and_then(|s| s.parse().ok())
        .ok_or_else(|| StorageError::Engine(format!("{STORE_TABLE} holds a number that is not one: {text:?}")))
}

/// `text` as an SQL string literal.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishing_names_each_touched_keyspace_once() {
        let touched = (1 << Space::Entity as u32) | (1 << Space::Meta as u32);
        let sql = publish_sql(42, touched, 7, None);
        assert_eq!(
            sql,
            format!(
                "UPDATE {STORE_TABLE} SET state = 42, changed[1] = 42, changed[{}] = 42 WHERE id = 1 AND epoch = 7;",
                Space::Meta as usize + 1
            )
        );
        assert_eq!(quote("it's"), "'it''s'");
        let logged = publish_sql(42, 0, 7, Some((&[0, 0, 0, 1, 0xab], 40)));
        assert!(logged.ends_with("INSERT INTO mosaic_log VALUES (42, 40, '\\x00000001ab'::bytea);"), "{logged}");
    }
}
