//! Restoring a backup archive as a new database of a data directory (`mosaicdb restore
//! --database`): the archive is loaded into the store of a fresh id, checked, and only then named
//! in the catalog — so a restore that fails or is cut short leaves no database behind (a refused
//! archive leaves nothing; a crash may leave an unnamed store of an id never given again, which
//! the next start removes).

use super::lifecycle::{Entry, check_name, now_ms};
use super::{DEFAULT_DATABASE, Databases};
use crate::service::ServiceError;
use crate::service::backup::{BackupError, Restored};
use std::io::Read;

impl Databases {
    /// Restores the archive read from `source` as the new database `name`, with the quota
    /// `quota_bytes` (409 `database_exists` if the name is taken). Offline: no server may have
    /// the data directory open. Call from within a tokio runtime.
    pub async fn restore_as(
        &self,
        name: &str,
        source: impl Read + Send + 'static,
        quota_bytes: Option<u64>,
    ) -> Result<Restored, BackupError> {
        check_name(name)?;
        if self.clustered() {
            return Err(ServiceError::DatabasesInCluster.into());
        }
        let _changing = self.changing.lock().await;
        self.refuse_if_closed()?;
        if name == DEFAULT_DATABASE || self.is_taken(name)? {
            return Err(ServiceError::DatabaseExists(name.to_owned()).into());
        }
        let id = self.take_id().await?;
        self.clear_store(id).await?;
        let restored = crate::service::backup::restore(source, self.storage.for_database(id)).await?;
        // named even if its check found problems, as a restore into a data directory is kept: the
        // report says what, and the database can be dropped
        self.enter(name, Entry { id, created_ms: now_ms(), quota_bytes }).await?;
        Ok(restored)
    }
}
