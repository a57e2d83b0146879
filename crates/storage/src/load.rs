//! Bulk load into a fresh data directory (what a restore writes): key-value pairs go through the
//! ordinary committer in writes of bounded size, so memory stays bounded however large the load.
//!
//! While the load runs the directory holds [`RESTORE_MARKER`], which [`Store::open`] refuses: a
//! restore that was killed half-way never opens as a database that looks whole. The marker is
//! removed only after the last write is fsynced; a failed load removes what it wrote.

use super::dirs::sync_dir;
use super::{Durability, EventCodec, RESTORE_MARKER, Result, Space, StorageConfig, StorageError, Store};
use std::path::{Path, PathBuf};

/// A write holds at most this many bytes of keys and values…
const BATCH_BYTES: usize = 4 << 20;
/// …and at most this many pairs.
const BATCH_PAIRS: usize = 50_000;

/// A load under way into a directory that was empty or absent.
pub struct BulkLoad {
    store: Store,
    path: PathBuf,
    /// the load made the directory (so a failure removes it, not only its contents)
    created: bool,
    batch: Vec<(Space, Vec<u8>, Vec<u8>)>,
    batch_bytes: usize,
    loaded: u64,
}

impl BulkLoad {
    /// Starts a load into `config.path`, which must be absent (it is created) or an empty
    /// directory; anything else is refused before a byte is written. Writes are buffered
    /// (acknowledged once they reach the OS) and fsynced once, by [`BulkLoad::finish`].
    ///
    /// PostgreSQL: every table must be empty; the marker is a flag of the store's row, and a
    /// failed load empties the tables again. `events` is the store's event format (see
    /// [`Store::open`]); the load itself appends none.
    pub fn create(mut config: StorageConfig, events: &'static dyn EventCodec) -> Result<BulkLoad> {
        if config.backend != super::Backend::Embedded {
            config.durability = Durability::Buffered;
            let store = Store::open_dir(config.clone(), events)?;
            let marked = store.engine().postgres().map_or(Ok(()), |pg| pg.mark_restoring(true));
            if let Err(e) = marked {
                let _ = store.close();
                return Err(e);
            }
            return Ok(BulkLoad {
                store,
                path: config.path,
                created: false,
                batch: Vec::new(),
                batch_bytes: 0,
                loaded: 0,
            });
        }
        let path = config.path.clone();
        let io = |context: &str| {
            let context = format!("{context} {path:?}");
            move |source| StorageError::Io { context, source }
        };
        let missing = super::dirs::missing(&path);
        let created = match std::fs::read_dir(&path) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(StorageError::NotEmpty(path));
                }
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&path).map_err(io("cannot create"))?;
                true
            }
            Err(e) => return Err(io("cannot read")(e)),
        };
        let started = (|| {
            // The marker's entry, and the directory's own when the load made it, are fsynced in
            // their folders: a power cut must not leave the keys without the marker.
            std::fs::File::create(path.join(RESTORE_MARKER))
                .and_then(|f| f.sync_all())
                .and_then(|()| sync_dir(&path))
                .and_then(|()| missing.iter().try_for_each(|dir| sync_dir(super::dirs::parent_of(dir))))
                .map_err(io("cannot mark"))?;
            config.durability = Durability::Buffered;
            Store::open_dir(config, events)
        })();
        match started {
            Ok(store) => Ok(BulkLoad { store, path, created, batch: Vec::new(), batch_bytes: 0, loaded: 0 }),
            Err(e) => {
                remove_written(&path, created);
                Err(e)
            }
        }
    }

    /// Adds one pair; a full batch is written before this returns. Call from a thread that may
    /// block (not from inside an async task).
    pub fn put(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.batch_bytes += key.len() + value.len();
        self.batch.push((space, key, value));
        if self.batch_bytes >= BATCH_BYTES || self.batch.len() >= BATCH_PAIRS {
            self.flush()?;
        }
        Ok(())
    }

    /// How many pairs are loaded (written or waiting in the batch).
    pub fn loaded(&self) -> u64 {
        self.loaded + self.batch.len() as u64
    }

    fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let n = batch.len() as u64;
        self.batch_bytes = 0;
        self.store.write_blocking(move |tx| {
            // pairs of a fresh directory, each key once: no ordered map needed
            for (space, key, value) in batch {
                tx.put_new(space, key, value);
            }
            Ok::<(), StorageError>(())
        })?;
        self.loaded += n;
        Ok(())
    }

    /// Writes what is left, fsyncs everything, closes the store and removes the marker: the
    /// directory is an ordinary data directory from then on. On failure what was written is
    /// removed.
    pub fn finish(mut self) -> Result<u64> {
        let done = (|| {
            self.flush()?;
            self.store.close()?;
            if let Some(pg) = self.store.engine().postgres() {
                // durable (its commit after the load's, in PostgreSQL's log)
                return pg.mark_restoring(false);
            }
            std::fs::remove_file(self.path.join(RESTORE_MARKER))
                .and_then(|()| sync_dir(&self.path))
                .map_err(|source| StorageError::Io { context: format!("cannot unmark {:?}", self.path), source })
        })();
        match done {
            Ok(()) => Ok(self.loaded),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    /// Gives the load up: closes the store and removes what the load wrote (the directory
    /// itself if the load created it, else its contents, since it was empty).
    pub fn abandon(self) {
        let BulkLoad { store, path, created, .. } = self;
        let _ = store.close();
        if let Some(pg) = store.engine().postgres() {
            if let Err(e) = pg.empty_all() {
                tracing::warn!(error = %e, "removing what a failed restore wrote into PostgreSQL failed");
            }
            return;
        }
        drop(store);
        remove_written(&path, created);
    }
}

fn remove_written(path: &Path, created: bool) {
    let removed = if created {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::read_dir(path).and_then(|entries| {
            for entry in entries {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    std::fs::remove_dir_all(entry.path())?;
                } else {
                    std::fs::remove_file(entry.path())?;
                }
            }
            Ok(())
        })
    };
    if let Err(e) = removed {
        tracing::warn!(path = %path.display(), error = %e, "removing what a failed restore wrote failed");
    }
}
