//! A backup of every database of a server (`mosaicdb backup --all DIR`), and its restore into a
//! new data directory (`mosaicdb restore --all DIR DATA_DIR`): one archive per database
//! (`{name}.backup`, each one instant of its database — the databases are separate stores, so
//! not one instant of all) and `databases.json`, the list with each archive's SHA-256 and the
//! database's quota.

use super::backup::{BackupClientError, backup, backup_url};
use super::client;
use crate::service::ServiceError;
use crate::service::backup::{BackupError, Restored};
use crate::service::databases::{Attach, DEFAULT_DATABASE, Databases};
use crate::storage::StorageConfig;
use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The list of a backup of every database.
pub const MANIFEST: &str = "databases.json";

/// One database in [`MANIFEST`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Archived {
    /// the database
    pub name: String,
    /// its archive, in the same folder
    pub file: String,
    /// the archive's SHA-256
    pub sha256: String,
    /// its quota of stored bytes, if it had one
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_bytes: Option<u64>,
}

/// Why a backup or restore of every database failed.
#[derive(Debug, thiserror::Error)]
pub enum AllError {
    /// One backup failed.
    #[error("backup of {0:?} failed: {1}")]
    Backup(String, BackupClientError),
    /// One restore failed.
    #[error("restore of {0:?} failed: {1}")]
    Restore(String, BackupError),
    /// The list of databases could not be had, read or written.
    #[error("{0}")]
    Manifest(String),
}

/// Backs up every database of the server at `base_url` into the folder `dir` (made if missing;
/// its archives and list are replaced).
pub async fn backup_all(
    base_url: &str,
    key: Option<&str>,
    timeout: Duration,
    dir: &Path,
) -> Result<Vec<Archived>, AllError> {
    let base = base_url.trim_end_matches('/');
    let list = format!("{base}/v1/databases");
    let response = client::send(Method::GET, &list, key, Default::default(), timeout)
        .await
        .map_err(|e| AllError::Manifest(format!("GET {list}: {e}")))?;
    let status = response.status();
    let body = tokio::time::timeout(timeout, response.into_body().collect())
        .await
        .map_err(|_| AllError::Manifest(format!("GET {list}: no answer within {timeout:?}")))?
        .map_err(|e| AllError::Manifest(format!("GET {list}: {e}")))?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(AllError::Manifest(format!("GET {list} answered {status}: {}", String::from_utf8_lossy(&body))));
    }
    let listed: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| AllError::Manifest(format!("GET {list}: {e}")))?;
    std::fs::create_dir_all(dir).map_err(|e| AllError::Manifest(format!("{}: {e}", dir.display())))?;
    let mut archived = Vec::new();
    for db in listed["databases"].as_array().into_iter().flatten() {
        let Some(name) = db["name"].as_str() else { continue };
        let file = format!("{}.backup", crate::api::encode_path(name));
        let url = backup_url(base, (name != DEFAULT_DATABASE).then_some(name));
        let path = dir.join(&file);
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&path).map_err(|e| AllError::Manifest(format!("{}: {e}", path.display())))?,
        );
        let (_, summary) =
            backup(&url, key, timeout, &mut out).await.map_err(|e| AllError::Backup(name.to_owned(), e))?;
        archived.push(Archived {
            name: name.to_owned(),
            file,
            sha256: summary.sha256_hex(),
            quota_bytes: db["quota_bytes"].as_u64(),
        });
    }
    let manifest = serde_json::to_vec_pretty(&archived).map_err(|e| AllError::Manifest(e.to_string()))?;
    std::fs::write(dir.join(MANIFEST), manifest).map_err(|e| AllError::Manifest(format!("{MANIFEST}: {e}")))?;
    Ok(archived)
}

/// Restores a backup of every database (the folder `dir`) into the empty or absent data
/// directory (or empty PostgreSQL database) `storage` names: `default` as the directory itself,
/// every other database as a database of it, with its quota. Call from within a tokio runtime.
pub async fn restore_all(dir: &Path, storage: StorageConfig) -> Result<Vec<(String, Restored)>, AllError> {
    let text = std::fs::read(dir.join(MANIFEST)).map_err(|e| AllError::Manifest(format!("{MANIFEST}: {e}")))?;
    let archived: Vec<Archived> =
        serde_json::from_slice(&text).map_err(|e| AllError::Manifest(format!("{MANIFEST}: {e}")))?;
    let open = |a: &Archived| {
        std::fs::File::open(dir.join(&a.file)).map_err(|e| AllError::Restore(a.name.clone(), BackupError::Io(e)))
    };
    let default = archived
        .iter()
        .find(|a| a.name == DEFAULT_DATABASE)
        .ok_or_else(|| AllError::Manifest(format!("{MANIFEST} lists no {DEFAULT_DATABASE:?} database")))?;
    let mut restored = vec![(
        default.name.clone(),
        crate::service::backup::restore(open(default)?, storage.clone())
            .await
            .map_err(|e| AllError::Restore(default.name.clone(), e))?,
    )];
    let options = crate::service::DbOptions { background_jobs: false, ..Default::default() };
    let attach: Attach = std::sync::Arc::new(|_| Box::new(|| Box::pin(async {})));
    let databases = Databases::open(storage, options, usize::MAX, attach)
        .map_err(|e| AllError::Restore(DEFAULT_DATABASE.into(), e.into()))?;
    for a in archived.iter().filter(|a| a.name != DEFAULT_DATABASE) {
        let done = databases
            .restore_as(&a.name, open(a)?, a.quota_bytes)
            .await
            .map_err(|e| AllError::Restore(a.name.clone(), e))?;
        restored.push((a.name.clone(), done));
    }
    databases.shutdown().await.map_err(|e: ServiceError| AllError::Restore(DEFAULT_DATABASE.into(), e.into()))?;
    Ok(restored)
}
