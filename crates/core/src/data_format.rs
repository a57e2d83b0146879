//! The data directory's format version, `meta:format` (a big-endian u32), so that a layout change
//! is explicit: a directory written by a newer format is refused with a clear error instead of
//! being misread.
//!
//! - 1: every time-series point its own key, series records of 24 bytes (no `meta:format` key);
//! - 2: time-series points also in compressed blocks, series records of 32 bytes (with the loose
//!   key count). Format 1's keys are valid format 2 — single points, records read as "every point
//!   loose" — so a format 1 directory opens unchanged, is stamped 2, and the merge task compacts
//!   its points into blocks.
//! - 3: the series index of time series (`meta:label:`; see `service::timeseries::labels`) and
//!   series records of 48 bytes (with the bytes of the series' keys and its count of single
//!   points). An older directory gets
//!   both for every series it holds in the stamping write (`service::timeseries::upgrade`).
//! - 4: vector indexes keyed by slot (`vec:{table}:{index}:node:{slot}`, `links:{slot}`, `slots`;
//!   see `service::vectors::layout`) instead of by document id. An older directory's vector
//!   indexes are rewritten in the stamping write (`service::vectors::upgrade`); until it
//!   commits, they are read in the old layout.
//! - 5: fulltext postings by document number (`ftidx:{table}:{index}:{token}:{first}`, blocks of
//!   columns; `ftdoc` maps numbers to ids; see `service::search::block`). An older directory's
//!   fulltext indexes are rebuilt from their documents in the stamping write
//!   (`service::search::upgrade`); a search that runs before it commits reads keys it cannot
//!   decode and fails (500) rather than answer wrong.

use super::{Result, ServiceError};
use mosaic_keys::MetaKey;
use mosaic_storage::{ReadView, Space, Store, WriteTx};

/// The format this build writes, and the newest it reads.
pub const DATA_FORMAT: u32 = 5;

/// The format of the directory `store` opened: its stamp, or 1 when it has none.
pub fn read(store: &Store) -> Result<u32> {
    read_view(&store.snapshot())
}

/// The format of the directory as `view` sees it.
pub fn read_view(view: &ReadView) -> Result<u32> {
    match view.get(Space::Meta, &MetaKey::Format.encode())? {
        None => Ok(1),
        Some(v) => {
            let bytes: [u8; 4] =
                v.as_ref().try_into().map_err(|_| ServiceError::Internal("meta:format is not 4 bytes".into()))?;
            Ok(u32::from_be_bytes(bytes))
        }
    }
}

/// Refuses a directory of a newer format than this build's; returns the format found.
pub fn check(store: &Store) -> Result<u32> {
    let found = read(store)?;
    if found > DATA_FORMAT {
        return Err(ServiceError::Internal(format!(
            "the data directory has format {found}, newer than this build reads ({DATA_FORMAT}): run a newer mosaicdb"
        )));
    }
    Ok(found)
}

/// Brings a directory of format `found` (older) to [`DATA_FORMAT`] with `migrate` (given the
/// format found: the models' own upgrades, so this module need not know them) and stamps it, in
/// one write queued on the committer before any other write of this open (so nothing of the new
/// format commits before the stamp, and nothing changes the series while their index is built),
/// not waited for: its outcome is logged. A crash or a failure before it commits leaves the
/// older format, upgraded at the next open. Call from within a tokio runtime.
pub fn upgrade<F>(store: &Store, found: u32, migrate: F) -> Result<()>
where
    F: FnOnce(&mut WriteTx<'_>, u32) -> mosaic_storage::Result<()> + Send + 'static,
{
    let outcome = store.write_queued(move |tx| {
        migrate(tx, found)?;
        tx.put(Space::Meta, MetaKey::Format.encode(), DATA_FORMAT.to_be_bytes().to_vec());
        Ok(())
    })?;
    let started = std::time::Instant::now();
    tokio::spawn(async move {
        match outcome.await {
            Ok(Ok(())) => {
                let ms = started.elapsed().as_millis() as u64;
                tracing::info!(from = found, to = DATA_FORMAT, ms, "data directory upgraded and stamped");
            }
            Ok(Err(e)) => tracing::error!(from = found, error = %e, "upgrading the data directory failed"),
            Err(_) => tracing::error!(from = found, "upgrading the data directory failed: the committer stopped"),
        }
    });
    Ok(())
}
