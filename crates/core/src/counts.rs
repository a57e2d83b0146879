//! Each table's document count (`meta:count:{table}`, u64 big-endian; absent means 0), kept in
//! the same write as the documents it counts. A leaf: every model that adds or removes documents
//! (puts, deletes, imports, index and view builds that size their work) uses it.

use super::Result;
use mosaic_keys::MetaKey;
use mosaic_storage::{Space, WriteTx};

/// A stored document count; absent means 0.
pub fn decode(value: Option<&[u8]>) -> u64 {
    value.and_then(|v| v.try_into().ok()).map_or(0, u64::from_be_bytes)
}

/// The key of the table's count.
pub fn key(table: &str) -> Vec<u8> {
    MetaKey::Count(table.into()).encode()
}

/// The table's document count as the write sees it. Read through the committer's cache of hot
/// keys (`WriteTx::get_cached`): every write to a table reads and rewrites its count, and the
/// cache answers without the store (a memtable walk on fjall, a round trip on PostgreSQL).
pub fn count_in(tx: &WriteTx<'_>, table: &str) -> Result<u64> {
    Ok(decode(tx.get_cached(Space::Meta, &key(table))?.as_deref()))
}

/// Adds `delta` to the table's document count, in the write.
pub fn bump(tx: &mut WriteTx<'_>, table: &str, delta: i64) -> Result<()> {
    let next = count_in(tx, table)?.saturating_add_signed(delta);
    tx.put(Space::Meta, key(table), next.to_be_bytes().to_vec());
    Ok(())
}

/// Adds `n` new documents to the table's count in the write.
pub fn add(tx: &mut WriteTx<'_>, table: &str, n: u64) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    bump(tx, table, i64::try_from(n).unwrap_or(i64::MAX))
}
