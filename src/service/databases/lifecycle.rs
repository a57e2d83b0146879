//! Making and dropping databases.
//!
//! - **Create** writes `meta:database:{name}` (its id, from the sequence `meta:seq:database`, and
//!   its creation time) to the default database, durably, then opens its store. A crash in
//!   between is harmless: the next start opens every database the catalog names, making the
//!   store of one that has none yet.
//! - **Drop** replaces the name's entry with the mark `meta:database_dropping:{id}` in one write,
//!   takes the database out of service (its name answers 404 from then on, and may be used
//!   again), stops its tasks and jobs and closes its store; then, in the background, waits until
//!   no request holds it, removes its store (`storage::destroy`: its folder or schema) and last
//!   the mark. A crash anywhere in between leaves the mark, and the next start removes the store
//!   again: a drop never half happens.

use super::{CreateDatabase, DatabaseInfo, Databases, Hosted, PatchDatabase};
use crate::keys::MetaKey;
use crate::service::pipeline::tables::check_table_name;
use crate::service::{Db, Result, ServiceError};
use crate::storage::{KeyRange, Space, StorageError};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A database's entry in the default database's catalog.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Entry {
    pub(super) id: u32,
    pub(super) created_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) quota_bytes: Option<u64>,
}

/// Every database the catalog names (name and entry), and the ids of those being dropped.
pub(super) type Registered = (Vec<(String, Entry)>, Vec<u32>);

/// The smallest quota a database may have: 1 MiB.
const MIN_QUOTA: u64 = 1 << 20;

/// The largest quota a database may have: the largest integer a JSON number holds exactly.
const MAX_QUOTA: u64 = (1 << 53) - 1;

pub use crate::service::core::registry::ID_SEQ;

/// Checks a database name: the rules of table names.
pub(super) fn check_name(name: &str) -> Result<()> {
    if name == "." || name == ".." {
        // a client normalises `/v1/db/../tables` to `/v1/tables` before sending it
        let reason = "must not be \".\" or \"..\" (clients remove such path segments)";
        return Err(ServiceError::InvalidDatabaseName { name: name.to_owned(), reason });
    }
    check_table_name(name).map_err(|e| match e {
        ServiceError::InvalidTableName { name, reason } => ServiceError::InvalidDatabaseName { name, reason },
        other => other,
    })
}

/// A quota as asked for, in bytes: 400 `invalid_request` outside 1 MiB ..= 2^53 - 1.
fn check_quota(asked: Option<usize>) -> Result<Option<u64>> {
    let quota = asked.map(|q| q as u64);
    if quota.is_some_and(|q| !(MIN_QUOTA..=MAX_QUOTA).contains(&q)) {
        return Err(ServiceError::InvalidRequest(format!(
            "quota_bytes must be at least {MIN_QUOTA} (1 MiB) and at most {MAX_QUOTA}"
        )));
    }
    Ok(quota)
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Databases {
    /// Every database the default one's catalog names (by name), and the ids of those being dropped.
    pub(super) fn registered(default: &Db) -> Result<Registered> {
        let view = default.core.store().snapshot();
        let mut named = Vec::new();
        for item in
            view.scan(Space::Meta, KeyRange::Prefix(MetaKey::kind_prefix(crate::service::core::registry::KIND)), false)
        {
            let (key, value) = item?;
            let Ok(MetaKey::Database(name)) = MetaKey::decode(&key) else { continue };
            let entry: Entry = serde_json::from_slice(&value)
                .map_err(|e| ServiceError::damaged("meta", format!("the catalog entry of database {name:?}: {e}")))?;
            named.push((name.into_owned(), entry));
        }
        let mut dropping = Vec::new();
        for item in view.scan(
            Space::Meta,
            KeyRange::Prefix(MetaKey::kind_prefix(crate::service::core::registry::DROPPING_KIND)),
            false,
        ) {
            let (key, _) = item?;
            if let Ok(MetaKey::DatabaseDropping(id)) = MetaKey::decode(&key) {
                dropping.push(id);
            }
        }
        Ok((named, dropping))
    }

    /// Opens the store of database `name` and serves it.
    pub(super) fn host(&self, name: String, entry: Entry) -> Result<Arc<Db>> {
        let db = Db::open(self.storage.for_database(entry.id), self.options)?;
        Ok(self.serve(name, entry, db))
    }

    /// Serves the open database `db` as `name`: its tasks attached, its name answering.
    fn serve(&self, name: String, entry: Entry, db: Arc<Db>) -> Arc<Db> {
        db.core.quota.set(entry.quota_bytes);
        let detach = Mutex::new(Some((self.attach)(&db)));
        let hosted = Arc::new(Hosted { id: entry.id, created_ms: entry.created_ms, db: db.clone(), detach });
        self.hosted.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name, hosted);
        db
    }

    /// Makes a database: 409 `database_exists` if the name is taken, 409 `too_many_databases`
    /// past `--max-databases`, 409 `cluster_mode` in cluster mode.
    pub async fn create(self: &Arc<Self>, req: CreateDatabase) -> Result<DatabaseInfo> {
        // run to its end even if the request is given up: never registered and not served
        let this = self.clone();
        self.default.core.detached(async move { this.create_now(req).await }).await
    }

    async fn create_now(self: &Arc<Self>, req: CreateDatabase) -> Result<DatabaseInfo> {
        check_name(&req.name)?;
        let quota_bytes = check_quota(req.quota_bytes)?;
        if self.clustered() {
            return Err(ServiceError::DatabasesInCluster);
        }
        let _changing = self.changing.lock().await;
        self.refuse_if_closed()?;
        if self.is_taken(&req.name)? {
            return Err(ServiceError::DatabaseExists(req.name));
        }
        let count = 1 + self.hosted.read().unwrap_or_else(std::sync::PoisonError::into_inner).len();
        if count >= self.max {
            return Err(ServiceError::TooManyDatabases { max: self.max });
        }
        let entry = Entry { id: self.take_id().await?, created_ms: now_ms(), quota_bytes };
        self.clear_store(entry.id).await?;
        // The store first, made whole (its creation fsynced) and open; its name only then. A
        // crash in between leaves a store no catalog entry names, of an id never given again,
        // which the next start removes; a crash while the store is being made leaves no name
        // pointing at a half-made store.
        let (config, options) = (self.storage.for_database(entry.id), self.options);
        let opened = tokio::task::spawn_blocking(move || Db::open(config, options))
            .await
            .map_err(|e| ServiceError::Internal(format!("opening the database failed: {e}")))?;
        let db = match opened {
            Ok(db) => db,
            Err(e) => {
                tracing::error!(database = req.name, error = %e, "cannot make the new database's store");
                self.remove_in_background(entry.id, None);
                return Err(e);
            }
        };
        if let Err(e) = self.enter(&req.name, entry).await {
            let _ = db.shutdown().await;
            drop(db);
            self.remove_in_background(entry.id, None);
            return Err(e);
        }
        self.serve(req.name.clone(), entry, db);
        self.describe(&req.name)
    }

    /// Whether `name` is a database's: served, or named in the catalog (one that failed to open
    /// at the start is not served, and keeps its name).
    pub(super) fn is_taken(&self, name: &str) -> Result<bool> {
        Ok(self.get(name).is_some()
            || self.default.core.store().get(Space::Meta, &MetaKey::Database(name.into()).encode())?.is_some())
    }

    /// A database id no database had: the sequence moved on, durably (a crash after it wastes
    /// the id, nothing else).
    pub(super) async fn take_id(&self) -> Result<u32> {
        Ok(self
            .default
            .core
            .store()
            .write(move |tx| {
                let seq = MetaKey::Seq(ID_SEQ.into()).encode();
                let last = match tx.get(Space::Meta, &seq)? {
                    Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| {
                        StorageError::Corrupt(format!("the sequence {ID_SEQ:?} holds {} bytes, not 8", v.len()))
                    })?),
                    None => 0,
                };
                let id = u32::try_from(last + 1)
                    .map_err(|_| StorageError::Engine("every database id has been used".into()))?;
                tx.put(Space::Meta, seq, u64::from(id).to_be_bytes().to_vec());
                Ok::<_, StorageError>(id)
            })
            .await?)
    }

    /// Writes database `name`'s catalog entry, durably: from then on every start opens it.
    pub(super) async fn enter(&self, name: &str, entry: Entry) -> Result<()> {
        let value = serde_json::to_vec(&entry).map_err(|e| ServiceError::Internal(e.to_string()))?;
        let key = MetaKey::Database(name.into()).encode();
        self.default
            .core
            .store()
            .write(move |tx| {
                tx.put(Space::Meta, key, value);
                Ok::<_, StorageError>(())
            })
            .await?;
        Ok(())
    }

    /// Sets a database's quota (`None`: none), durably, effective at once; `default` has none
    /// and takes none (400).
    pub async fn patch(self: &Arc<Self>, name: &str, req: PatchDatabase) -> Result<DatabaseInfo> {
        let quota_bytes = check_quota(req.quota_bytes)?;
        if name == super::DEFAULT_DATABASE {
            let refusal = "the default database has no quota (--min-free-disk-mb guards the disk)";
            return Err(ServiceError::InvalidRequest(refusal.into()));
        }
        let (this, name) = (self.clone(), name.to_owned());
        self.default
            .core
            .detached(async move {
                let _changing = this.changing.lock().await;
                this.refuse_if_closed()?;
                let hosted = this.get_hosted(&name).ok_or_else(|| ServiceError::DatabaseNotFound(name.clone()))?;
                let entry = Entry { id: hosted.id, created_ms: hosted.created_ms, quota_bytes };
                this.enter(&name, entry).await?;
                hosted.db.core.quota.set(quota_bytes);
                this.describe(&name)
            })
            .await
    }

    /// Drops a database with every key of it: 404 `database_not_found` if there is none of that
    /// name; `default` cannot be dropped (400).
    pub async fn drop_database(self: &Arc<Self>, name: &str) -> Result<()> {
        // run to its end even if the request is given up: a drop mark written is a drop done
        let (this, name) = (self.clone(), name.to_owned());
        self.default.core.detached(async move { this.drop_now(&name).await }).await
    }

    async fn drop_now(self: &Arc<Self>, name: &str) -> Result<()> {
        if name == super::DEFAULT_DATABASE {
            return Err(ServiceError::InvalidRequest("the default database cannot be dropped".into()));
        }
        let _changing = self.changing.lock().await;
        self.refuse_if_closed()?;
        let hosted = self.get_hosted(name).ok_or_else(|| ServiceError::DatabaseNotFound(name.to_owned()))?;
        self.unregister(name, hosted.id).await?;
        self.hosted.write().unwrap_or_else(std::sync::PoisonError::into_inner).remove(name);
        let id = hosted.id;
        self.remove_in_background(id, Some(hosted));
        Ok(())
    }

    /// Removes whatever a store of the fresh id `id` holds: a power cut in buffered durability may
    /// have taken back the catalog write that used the id while its folder (or schema) stayed,
    /// and a new database must never open an old one's keys.
    pub(super) async fn clear_store(&self, id: u32) -> Result<()> {
        let config = self.storage.for_database(id);
        tokio::task::spawn_blocking(move || crate::storage::destroy(&config))
            .await
            .map_err(|e| ServiceError::Internal(format!("clearing a new database's store failed: {e}")))??;
        Ok(())
    }

    /// Replaces database `name`'s catalog entry with its drop mark, durably.
    async fn unregister(&self, name: &str, id: u32) -> Result<()> {
        let key = MetaKey::Database(name.into()).encode();
        self.default
            .core
            .store()
            .write(move |tx| {
                tx.delete(Space::Meta, key);
                tx.put(Space::Meta, MetaKey::DatabaseDropping(id).encode(), Vec::new());
                Ok::<_, StorageError>(())
            })
            .await?;
        Ok(())
    }

    /// Removes database `id`'s store and then its drop mark, as a job of the default database.
    /// `held`: the database as it was served, whose last holders (requests under way) are waited
    /// for first; a removal the shutdown interrupts resumes at the next start.
    pub(super) fn remove_in_background(&self, id: u32, held: Option<Arc<Hosted>>) {
        let default = self.default.clone();
        let config = self.storage.for_database(id);
        drop(self.default.core.spawn_job(async move {
            if let Some(hosted) = held {
                // its tasks and jobs stopped, its store closed (also when the server is closing:
                // nobody else closes a database out of the registry)
                if let Err(e) = super::close(&hosted).await {
                    // what it acknowledged is durable; it is removed all the same
                    tracing::warn!(database_id = id, error = %e, "closing the dropped database");
                }
                // out of the registry, so nobody takes a new hold: the last ones end with their
                // requests (the store closes its files once the last is dropped)
                while Arc::strong_count(&hosted) > 1 || Arc::strong_count(&hosted.db) > 1 {
                    if default.core.closing() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                drop(hosted);
            }
            let removed = tokio::task::spawn_blocking(move || crate::storage::destroy(&config)).await;
            match removed {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(database_id = id, error = %e, "removing a dropped database failed: tried again at the next start");
                    return;
                }
                Err(e) => {
                    tracing::error!(database_id = id, error = %e, "removing a dropped database failed");
                    return;
                }
            }
            let mark = MetaKey::DatabaseDropping(id).encode();
            let cleared = default
                .core.store()
                .write(move |tx| {
                    tx.delete(Space::Meta, mark);
                    Ok::<_, StorageError>(())
                })
                .await;
            if let Err(e) = cleared {
                tracing::warn!(database_id = id, error = %e, "clearing a dropped database's mark");
            }
        }));
    }
}
