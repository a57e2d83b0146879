//! Storage settings: every knob fjall has that matters is set here, never left to its defaults.

use std::path::PathBuf;

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Acknowledged after the journal holding it is fsynced; concurrent writers share one fsync.
    #[default]
    Sync,
    /// Acknowledged once the journal is handed to the OS: survives a process crash, not a power loss.
    Buffered,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sync" => Ok(Durability::Sync),
            "buffered" => Ok(Durability::Buffered),
            other => Err(format!("durability must be sync or buffered, not {other:?}")),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::Sync => "sync",
            Durability::Buffered => "buffered",
        })
    }
}

/// Where the keys are kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backend {
    /// fjall, in the data directory (the default)
    #[default]
    Embedded,
    /// PostgreSQL: one table per key family in the database `url` names (see
    /// `storage/postgres/`)
    Postgres {
        /// a `postgres://` URL or a `key=value` connection string
        url: String,
    },
}

/// How the store is opened.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// the data directory (created if missing; the embedded backend keeps its keys there)
    pub path: PathBuf,
    /// where the keys are kept
    pub backend: Backend,
    /// when writes are acknowledged
    pub durability: Durability,
    /// block cache shared by all keyspaces, in bytes
    pub cache_bytes: u64,
    /// cache of documents for point reads, in bytes (0: none)
    pub row_cache_bytes: u64,
    /// memtable size of each keyspace, in bytes
    pub memtable_bytes: u64,
    /// journal size after which memtables are flushed, in bytes
    pub max_journal_bytes: u64,
    /// flush and compaction threads (at least 2: fjall#257)
    pub worker_threads: usize,
    /// how many queued writes one commit group may take
    pub max_group: usize,
    /// most table files the embedded store keeps open (fjall's descriptor cache; at least 10);
    /// the server lowers it under a low open-file limit (`server::limits`)
    pub max_table_files: usize,
    /// bytes kept free on the data directory's disk: writes are refused (and resume on their
    /// own) while less is free (0: no check); see `health.rs`
    pub min_free_bytes: u64,
    /// Cluster mode (PostgreSQL only): the URL at which other servers and clients reach this
    /// one. Any number of servers may then open one database: the one that takes its lock leads
    /// (writes), the others follow (read, and send writes to the leader). `None`: the only
    /// server on its backend (a second one is refused).
    pub advertise: Option<String>,
    /// Which of the server's databases this store holds: 0 is `default` (the data directory
    /// itself; PostgreSQL's current schema), any other id has its own directory
    /// (`databases/{id}` under the data directory) or schema (`mosaic_db_{id}`): see
    /// [`StorageConfig::for_database`].
    pub database: u32,
}

impl StorageConfig {
    /// Defaults for a data directory: sync durability, 256 MiB block cache, 64 MiB document
    /// cache, 16 MiB memtables, 64 MiB of disk kept free.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StorageConfig {
            path: path.into(),
            backend: Backend::Embedded,
            durability: Durability::Sync,
            cache_bytes: 256 << 20,
            row_cache_bytes: 64 << 20,
            memtable_bytes: 16 << 20,
            max_journal_bytes: 512 << 20,
            worker_threads: 2,
            max_group: 1024,
            max_table_files: 900,
            min_free_bytes: 64 << 20,
            advertise: None,
            database: 0,
        }
    }

    /// The settings of the store of database `id` of the same server: the same knobs, its own
    /// directory under this one's data directory (`databases/{id}`) and, on PostgreSQL, its own
    /// schema (`mosaic_db_{id}`) and lock. Each database is a store of its own — its keyspaces,
    /// journal, committer and caches — so no scan of one can meet another's keys and a drop
    /// removes a folder (a schema), not a key range.
    pub fn for_database(&self, id: u32) -> StorageConfig {
        let mut config = self.clone();
        if id != 0 {
            config.path = database_dir(&self.path, id);
        }
        config.database = id;
        config
    }
}

/// The folder of database `id`'s store under the data directory `root` (of the default one).
pub fn database_dir(root: &std::path::Path, id: u32) -> PathBuf {
    root.join("databases").join(id.to_string())
}

/// The PostgreSQL schema of database `id` (`None`: the default one, in the connection's current
/// schema).
pub(super) fn database_schema(id: u32) -> Option<String> {
    (id != 0).then(|| format!("mosaic_db_{id}"))
}
