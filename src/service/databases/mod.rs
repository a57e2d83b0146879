//! The server's databases: `default`, which is the data directory itself (so every directory
//! written before databases existed opens as it is), and those made with `POST /v1/databases`.
//!
//! Each database is a store of its own (`StorageConfig::for_database`: a folder under
//! `databases/`, or a PostgreSQL schema) with its own [`Db`] — catalog, counts, changefeed and
//! its sequence, caches, background jobs and periodic tasks. Isolation is by construction: no
//! scan of one database can meet another's keys, as they are in other keyspaces altogether, and
//! the key bytes are the same in every database. Which databases exist is kept in the default
//! database's catalog (`meta:database:{name}`, see `lifecycle.rs` for create and drop).

mod lifecycle;
pub use lifecycle::ID_SEQ;
mod restore;

use super::{Db, DbOptions, Result, ServiceError};
use crate::storage::StorageConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use utoipa::ToSchema;

/// The name of the database every route without `/v1/db/{db}` goes to.
pub const DEFAULT_DATABASE: &str = "default";

/// Default of `--max-databases`: `default` and 63 more.
pub const DEFAULT_MAX_DATABASES: usize = 64;

/// What the server starts for each database it opens (its periodic tasks): called with the
/// database, it returns how to stop it again.
pub type Attach = Arc<dyn Fn(&Arc<Db>) -> Detach + Send + Sync>;

/// Stops what [`Attach`] started, and waits until it has stopped.
pub type Detach = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The body of `POST /v1/databases`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDatabase {
    /// database name: the rules of table names (1-256 bytes of UTF-8, no `/`, no control
    /// characters)
    #[schema(example = "shop", min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$")]
    pub name: String,
    /// most bytes the database may store (its table files and memtables), at least 1 MiB: past
    /// it, writes answer 507 `quota_exceeded` (deletes go on); omit for none
    #[serde(default, deserialize_with = "crate::service::core::de::integer")]
    #[schema(value_type = Option<u64>, minimum = 1048576, maximum = 9007199254740991_f64, example = 1073741824)]
    pub quota_bytes: Option<usize>,
}

/// The body of `PATCH /v1/databases/{db}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchDatabase {
    /// the new quota of stored bytes (at least 1 MiB), or `null` for none
    #[serde(deserialize_with = "crate::service::core::de::integer")]
    #[schema(value_type = Option<u64>, minimum = 1048576, maximum = 9007199254740991_f64, example = 2147483648_u64)]
    pub quota_bytes: Option<usize>,
}

/// One database of the server.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DatabaseInfo {
    /// its name
    pub name: String,
    /// its number, never given to another database (0: `default`)
    pub id: u32,
    /// when it was made, in milliseconds since the Unix epoch (0: `default`, which always was)
    pub created_ms: u64,
    /// its tables
    pub tables: u64,
    /// its documents, in every table
    pub documents: u64,
    /// the bytes it stores: its table files and memtables
    pub stored_bytes: u64,
    /// its quota of stored bytes, if it has one
    pub quota_bytes: Option<u64>,
}

/// The list of `GET /v1/databases`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DatabaseList {
    /// every database, `default` first, then by name
    pub databases: Vec<DatabaseInfo>,
}

/// A database other than `default`, open.
struct Hosted {
    id: u32,
    created_ms: u64,
    db: Arc<Db>,
    /// what `attach` started for it (taken when it is closed)
    detach: Mutex<Option<Detach>>,
}

/// Every database of the server, open.
pub struct Databases {
    default: Arc<Db>,
    /// the default database's storage settings, from which every other's are made
    storage: StorageConfig,
    options: DbOptions,
    attach: Attach,
    default_detach: Mutex<Option<Detach>>,
    /// `--max-databases`
    max: usize,
    hosted: RwLock<BTreeMap<String, Arc<Hosted>>>,
    /// one create or drop at a time
    changing: tokio::sync::Mutex<()>,
    /// set by [`Databases::shutdown`]: no database is made or dropped any more
    closed: std::sync::atomic::AtomicBool,
    /// the databases the catalog names that could not be opened at the start, with why
    unopened: Mutex<Vec<(String, String)>>,
}

impl Databases {
    /// Opens the default database and every other one its catalog names, attaching each (call
    /// from within a tokio runtime), and resumes the removal of dropped ones. In cluster mode
    /// only `default` is opened: databases are not available there.
    pub fn open(storage: StorageConfig, options: DbOptions, max: usize, attach: Attach) -> Result<Arc<Databases>> {
        let default = Db::open(storage.clone(), options)?;
        let default_detach = Mutex::new(Some(attach(&default)));
        let databases = Arc::new(Databases {
            default,
            storage,
            options,
            attach,
            default_detach,
            max: max.max(1),
            hosted: RwLock::default(),
            changing: tokio::sync::Mutex::new(()),
            closed: Default::default(),
            unopened: Default::default(),
        });
        if databases.clustered() {
            return Ok(databases);
        }
        let (registered, dropping) = Databases::registered(&databases.default)?;
        // stores no entry names and no drop mark covers: a create cut short before it named its
        // store (never acknowledged), removed like a drop
        let known: std::collections::HashSet<u32> =
            registered.iter().map(|(_, e)| e.id).chain(dropping.iter().copied()).collect();
        let unnamed: Vec<u32> = match crate::storage::stored_databases(&databases.storage) {
            Ok(ids) => ids.into_iter().filter(|id| !known.contains(id)).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the stores of the databases");
                Vec::new()
            }
        };
        for (name, entry) in registered {
            if let Err(e) = databases.host(name.clone(), entry) {
                // the others are served; this one answers 404 until a restart opens it
                tracing::error!(database = name, error = %e, "cannot open the database");
                databases
                    .unopened
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((name, e.to_string()));
            }
        }
        if options.background_jobs {
            for id in dropping.into_iter().chain(unnamed) {
                databases.remove_in_background(id, None);
            }
        }
        Ok(databases)
    }

    /// The default database.
    pub fn default_db(&self) -> &Arc<Db> {
        &self.default
    }

    /// The database named `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<Db>> {
        if name == DEFAULT_DATABASE {
            return Some(self.default.clone());
        }
        self.hosted.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).map(|h| h.db.clone())
    }

    /// The databases the catalog names that could not be opened at the start, with why (they
    /// answer 404 until a start opens them).
    pub fn unopened(&self) -> Vec<(String, String)> {
        self.unopened.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// A database other than `default`, as served.
    fn get_hosted(&self, name: &str) -> Option<Arc<Hosted>> {
        self.hosted.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).cloned()
    }

    /// The database named `name`: else 404 `database_not_found`.
    pub fn require(&self, name: &str) -> Result<Arc<Db>> {
        self.get(name).ok_or_else(|| ServiceError::DatabaseNotFound(name.to_owned()))
    }

    /// Every open database with its name, `default` first.
    pub fn all(&self) -> Vec<(String, Arc<Db>)> {
        let hosted = self.hosted.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::iter::once((DEFAULT_DATABASE.to_owned(), self.default.clone()))
            .chain(hosted.iter().map(|(name, h)| (name.clone(), h.db.clone())))
            .collect()
    }

    /// Every database, described.
    pub fn list(&self) -> DatabaseList {
        // measured out of the lock: a slow measure must not hold up a create or drop (nor every
        // request behind it)
        let hosted: Vec<(String, Arc<Hosted>)> = self
            .hosted
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(name, h)| (name.clone(), h.clone()))
            .collect();
        let others = hosted.iter().map(|(name, h)| describe(name, h.id, h.created_ms, &h.db));
        DatabaseList {
            databases: std::iter::once(describe(DEFAULT_DATABASE, 0, 0, &self.default)).chain(others).collect(),
        }
    }

    /// One database, described: else 404 `database_not_found`.
    pub fn describe(&self, name: &str) -> Result<DatabaseInfo> {
        if name == DEFAULT_DATABASE {
            return Ok(describe(name, 0, 0, &self.default));
        }
        let h = self.get_hosted(name).ok_or_else(|| ServiceError::DatabaseNotFound(name.to_owned()))?;
        Ok(describe(name, h.id, h.created_ms, &h.db))
    }

    /// Stops every database's attached tasks and background jobs, and closes each store (the
    /// default one last: the removals of dropped databases are its jobs).
    pub async fn shutdown(&self) -> Result<()> {
        {
            // a create or drop under way finishes first; none starts after
            let _changing = self.changing.lock().await;
            self.closed.store(true, std::sync::atomic::Ordering::Release);
        }
        let hosted: Vec<_> =
            std::mem::take(&mut *self.hosted.write().unwrap_or_else(std::sync::PoisonError::into_inner))
                .into_values()
                .collect();
        let mut first_error = None;
        for h in hosted {
            if let Err(e) = close(&h).await {
                first_error.get_or_insert(e);
            }
        }
        let detach = self.default_detach.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(detach) = detach {
            detach().await;
        }
        let closed = self.default.shutdown().await;
        match first_error {
            Some(e) => Err(e),
            None => closed,
        }
    }

    /// Ends every database's change waits (long-polls, event streams) at once.
    pub fn stop_change_waits(&self) {
        for (_, db) in self.all() {
            db.changefeed.stop_change_waits();
        }
    }

    /// Refuses a create or drop once the server is shutting down.
    fn refuse_if_closed(&self) -> Result<()> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ServiceError::Unavailable(crate::storage::StorageError::Closed));
        }
        Ok(())
    }

    /// Whether the server runs in cluster mode, where only `default` exists.
    fn clustered(&self) -> bool {
        self.storage.advertise.is_some()
    }
}

/// Stops a hosted database's tasks and jobs and closes its store.
async fn close(h: &Hosted) -> Result<()> {
    let detach = h.detach.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    if let Some(detach) = detach {
        detach().await;
    }
    h.db.shutdown().await
}

fn describe(name: &str, id: u32, created_ms: u64, db: &Db) -> DatabaseInfo {
    let tables = db.core.catalog().tables();
    let documents = tables.iter().map(|t| db.pipeline.table_count(&t.name)).sum();
    DatabaseInfo {
        name: name.to_owned(),
        id,
        created_ms,
        tables: tables.len() as u64,
        documents,
        stored_bytes: db.core.store().stored_bytes().unwrap_or(0),
        quota_bytes: db.core.quota.limit(),
    }
}
