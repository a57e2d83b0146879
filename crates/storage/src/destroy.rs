//! Removing a whole store: a dropped database's folder (or PostgreSQL schema), every key of it.

use super::config::{Backend, StorageConfig};
use super::{Result, StorageError, dirs};

/// Removes every key of the store `config` names, which must be closed (no [`super::Store`] of
/// it open in this process, nor anywhere else). The embedded backend's folder is removed and its
/// removal made durable; PostgreSQL's schema is dropped with its tables. Idempotent: a store
/// already gone is no error, so a removal a crash cut short is simply run again. The default
/// database (id 0) is never removed.
pub fn destroy(config: &StorageConfig) -> Result<()> {
    if config.database == 0 {
        return Err(StorageError::Engine("the default database's store cannot be removed".into()));
    }
    match &config.backend {
        Backend::Embedded => {
            match std::fs::remove_dir_all(&config.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(io(config, source)),
            }
            let parent = dirs::parent_of(&config.path);
            if parent.exists() {
                dirs::sync_dir(parent).map_err(|source| io(config, source))?;
            }
            Ok(())
        }
        Backend::Postgres { url } => super::postgres::destroy(url, config.database),
    }
}

/// The ids of the databases whose stores exist beside the default one `config` names (folders
/// `databases/{id}`, or schemas `mosaic_db_{id}`), whatever the catalog says.
pub fn stored_databases(config: &StorageConfig) -> Result<Vec<u32>> {
    match &config.backend {
        Backend::Embedded => {
            let root = super::config::database_dir(&config.path, 0);
            let Some(parent) = root.parent() else { return Ok(Vec::new()) };
            let entries = match std::fs::read_dir(parent) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(source) => return Err(io(config, source)),
            };
            let mut ids = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|source| io(config, source))?;
                if let Some(id) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()).filter(|id| *id > 0) {
                    ids.push(id);
                }
            }
            Ok(ids)
        }
        Backend::Postgres { url } => super::postgres::stored_databases(url),
    }
}

fn io(config: &StorageConfig, source: std::io::Error) -> StorageError {
    StorageError::Io { context: format!("removing {:?}", config.path), source }
}
