//! Storage errors.

/// Why a storage call failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An fsync or journal write failed earlier; the store refuses writes until it is reopened
    /// (and the disk checked). Reads still work.
    #[error(
        "the store takes no more writes after a failed write (to disk, or to the storage backend): restart after checking it (in cluster mode the server opens its database again on its own)"
    )]
    Poisoned,
    /// The data directory's disk has less free space than the store keeps in reserve: the write
    /// was refused before anything was written. Free space (or grow the disk); writes resume
    /// on their own.
    #[error(
        "the disk holding the data directory is nearly full ({free} bytes free, {reserve} kept in reserve): writes are refused until space is freed"
    )]
    DiskFull {
        /// bytes free
        free: u64,
        /// bytes kept free
        reserve: u64,
    },
    /// The storage engine stopped its background work for a cause that passes (too many open
    /// files, out of memory): the write was refused before anything of it was written, and the
    /// store opens its engine again on its own once the cause is gone (see `recover.rs`). Retry
    /// after `retry_after` seconds.
    #[error(
        "the store is recovering from a storage engine failure that passes ({reason}): writes are refused until it has opened its data again, on its own"
    )]
    Recovering {
        /// the failure, as the engine logged it
        reason: String,
        /// seconds until the store next tries to reopen
        retry_after: u64,
    },
    /// The store is shutting down and takes no more writes.
    #[error("the store is closed")]
    Closed,
    /// Data read from disk failed its checksum or could not be decoded (a damaged table file):
    /// nothing of it is served. Restore the data directory from a backup.
    #[error("damaged data on disk: {0}; nothing of it is served (restore from a backup)")]
    Corrupt(String),
    /// An I/O or engine error: report it; the store may have been poisoned by it.
    #[error("storage engine error: {0}")]
    Engine(String),
    /// The storage backend could not be reached, or failed (PostgreSQL down, the connection lost,
    /// no connection free): the request did not complete; retry once the backend is back. A
    /// write whose group failed so was not acknowledged, and the store refuses writes until a
    /// restart (see `Poisoned`).
    #[error("the storage backend is unavailable: {0}")]
    Backend(String),
    /// Cluster mode: this server follows; writes go to the leader (the write did not run).
    #[error("this server is a follower: writes go to the cluster's leader")]
    NotLeader,
    /// Cluster mode: another server took the lead of the backend (the epoch moved on): this one
    /// commits nothing more (the group was rolled back).
    #[error("another server took the lead of the PostgreSQL database: this one commits nothing more")]
    Deposed,
    /// A write function panicked; nothing it staged was written.
    #[error("a write was aborted by an internal error")]
    Aborted,
    /// The committer thread stopped (a bug took it down): no write can commit until restart.
    #[error("the write path stopped after an internal error; restart the server")]
    CommitterDown,
    /// The data directory holds a restore that did not finish: restore again into an empty one.
    #[error(
        "{0:?} holds an unfinished restore (it has a RESTORE_INCOMPLETE file): restore again into an empty directory"
    )]
    UnfinishedRestore(std::path::PathBuf),
    /// A restore goes only into an empty or absent directory.
    #[error("{0:?} is not empty: a restore goes only into an empty or absent directory")]
    NotEmpty(std::path::PathBuf),
    /// A write passed one of the backend's limits (see `limits.rs`): refused before anything of
    /// it was written; the store is unharmed.
    #[error("{0}")]
    TooLarge(super::limits::TooLarge),
    /// A file system error outside the engine (creating or clearing a directory).
    #[error("{context}: {source}")]
    Io {
        /// what was being done
        context: String,
        /// the error
        source: std::io::Error,
    },
}

/// Storage result.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
