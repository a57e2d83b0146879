//! Online backup and restore.
//!
//! A backup reads every keyspace from one snapshot (`Store::snapshot`, fjall's MVCC), so the
//! catalog, the documents, every index, the graph adjacency, time series and expiry entries all
//! show the same instant — the snapshot point, when [`backup`] is called — while writes go
//! on: no lock is taken and the committer never waits for the backup. The snapshot pins the old
//! versions it still has to read until the archive is written. The archive format is in
//! [`archive`].
//!
//! A restore loads the records of a verified-as-it-goes archive into an empty or absent
//! directory through the storage bulk loader, and removes what it wrote if the archive turns out
//! truncated or corrupt (the checksum is only known at the end). Then it opens the result and
//! runs the consistency check.

pub mod archive;

pub use archive::{ArchiveError, FORMAT_VERSION, Header, Summary};

use super::{CheckReport, Db, DbOptions, ServiceError};
use crate::storage::{BulkLoad, KeyRange, ReadView, Space, StorageConfig, StorageError};
use archive::ArchiveWriter;
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a backup or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The archive is refused.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// Reading the archive, or writing it out, failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The store failed (a read of the snapshot, a write of the restore, the target directory).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Opening or checking the restored directory failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// A backup whose snapshot is taken: the snapshot point is fixed, the archive not yet written.
/// Counted in `GET /v1/info` (`backups_running`) until dropped.
pub struct Backup {
    view: ReadView,
    header: Header,
    at: time::OffsetDateTime,
    _running: Running,
}

/// Counts one backup as running, until dropped.
struct Running(Arc<AtomicU64>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Takes the snapshot of a backup now: the archive [`Backup::write_to`] writes later holds
/// exactly the writes committed before this call.
pub fn backup(db: &Db) -> Backup {
    let view = db.core.store.snapshot();
    let now = time::OffsetDateTime::now_utc();
    // milliseconds are enough, and a name without nanoseconds reads better
    let at = now.replace_millisecond(now.millisecond()).unwrap_or(now);
    let created_at =
        at.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| at.unix_timestamp().to_string());
    let header = Header {
        server_version: env!("CARGO_PKG_VERSION").to_owned(),
        created_at,
        keyspaces: Space::ALL.iter().map(|s| s.name().to_owned()).collect(),
    };
    db.backups_running.fetch_add(1, Ordering::AcqRel);
    Backup { view, header, at, _running: Running(db.backups_running.clone()) }
}

/// Backups whose archive is still being written (each holds its snapshot).
pub fn backups_running(db: &Db) -> u64 {
    db.backups_running.load(Ordering::Acquire)
}

impl Backup {
    /// The archive's header (its `created_at` is the snapshot point).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// A file name for the archive, with the snapshot time: `mosaicdb-20260102T030405Z.backup`.
    pub fn file_name(&self) -> String {
        let t = self.at;
        format!(
            "mosaicdb-{:04}{:02}{:02}T{:02}{:02}{:02}Z.backup",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )
    }

    /// Writes the whole archive to `out`, on the calling thread (reads block: run it on the
    /// blocking pool). Ends at the first error of `out` (the receiver went away). The registry of
    /// the server's databases, which the default database's catalog keeps, is left out: it is
    /// the server's, not the database's (a backup of `default` must not name the others, nor a
    /// restore bring back their names without their data).
    pub fn write_to<W: Write>(self, out: W) -> Result<(W, Summary), BackupError> {
        let mut writer = ArchiveWriter::new(out, &self.header)?;
        let registry = crate::service::core::registry::prefixes();
        for space in Space::ALL {
            for pair in self.view.scan(space, KeyRange::Prefix(Vec::new()), false) {
                let (key, value) = pair?;
                if space == Space::Meta && registry.iter().any(|p| key.starts_with(p)) {
                    continue;
                }
                writer.record(space, &key, &value)?;
            }
        }
        Ok(writer.finish()?)
    }
}

/// What a restore did.
#[derive(Debug)]
pub struct Restored {
    /// the archive's header
    pub header: Header,
    /// what it held
    pub summary: Summary,
    /// the consistency check of the restored directory
    pub check: CheckReport,
}

/// Restores the archive read from `source` into `config`'s store: a data directory that must be
/// empty or absent (it is created), or an empty PostgreSQL database: each record is loaded as it is read and verified; if the archive turns out
/// truncated or corrupt, what was loaded is removed (and the directory too, if the restore made
/// it). A whole archive is then fsynced, opened and checked (`check`'s report is returned, its
/// problems are not an error). Call from within a tokio runtime.
pub async fn restore(source: impl Read + Send + 'static, config: StorageConfig) -> Result<Restored, BackupError> {
    let loading = config.clone();
    let (header, summary) = tokio::task::spawn_blocking(move || load(source, loading))
        .await
        .map_err(|e| ServiceError::Internal(format!("the restore task failed: {e}")))??;
    let options = DbOptions { background_jobs: false, ..DbOptions::default() };
    let db = Db::open(config, options)?;
    let check = crate::service::check(&db).await;
    db.core.close()?;
    Ok(Restored { header, summary, check: check? })
}

fn load(source: impl Read, config: StorageConfig) -> Result<(Header, Summary), BackupError> {
    let mut loader = BulkLoad::create(config, &crate::service::changefeed::Events)?;
    let mut header = None;
    let read = archive::read_archive(
        source,
        |h: &Header| {
            header = Some(h.clone());
            Ok::<(), BackupError>(())
        },
        |space, key, value| Ok(loader.put(space, key.to_vec(), value.to_vec())?),
    );
    match (read, header) {
        (Ok(summary), Some(header)) => {
            loader.finish()?;
            Ok((header, summary))
        }
        (Ok(_), None) => {
            loader.abandon();
            Err(ArchiveError::Truncated.into())
        }
        (Err(e), _) => {
            loader.abandon();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests;
