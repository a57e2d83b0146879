//! `GET /v1/info`: version, uptime, data directory, durability, key counts per family.

use super::Db;
use crate::service::core::Handle;
use crate::storage::{Durability, Space};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// What the server reports about itself.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Info {
    /// mosaicdb version
    pub version: &'static str,
    /// seconds since the server started
    pub uptime_seconds: u64,
    /// the data directory (shown to an admin key of every database only)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
    /// when writes are acknowledged
    pub durability: Durability,
    /// whether the store takes writes
    pub writable: bool,
    /// NDJSON imports under way
    pub imports_running: u64,
    /// backups under way (each holds a snapshot until its archive is written)
    pub backups_running: u64,
    /// approximate number of keys per key family
    pub keys: Vec<KeyCount>,
    /// the in-memory graph adjacency: its state, size and bytes per edge
    pub graph_memory: super::graph::memory::GraphMemoryStats,
    /// this server among those sharing its backend (role `sole` outside cluster mode)
    pub cluster: super::cluster::ClusterStatus,
}

/// The key count of one family.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyCount {
    /// family (keyspace) name
    pub family: &'static str,
    /// approximate number of keys
    pub keys: u64,
}

/// The server's description of itself.
pub async fn info(db: &Arc<Db>) -> super::Result<Info> {
    db.read(|db| {
        Ok(Info {
            version: env!("CARGO_PKG_VERSION"),
            uptime_seconds: db.core.started.elapsed().as_secs(),
            data_dir: Some(db.core.store.config().path.display().to_string()),
            durability: db.core.store.config().durability,
            writable: db.core.is_writable(),
            imports_running: db.pipeline.imports_running(),
            backups_running: crate::service::backup::backups_running(db),
            keys: Space::ALL
                .iter()
                .map(|s| KeyCount { family: s.name(), keys: db.core.store.approximate_len(*s) as u64 })
                .collect(),
            graph_memory: db.graph.memory.stats(),
            cluster: db.cluster.cluster_status(),
        })
    })
    .await
}
