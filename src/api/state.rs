//! What every handler gets ([`AppState`]) and the limits the HTTP layer is built with ([`HttpLimits`]).

use super::metrics::Metrics;
use crate::service::databases::Databases;
use std::sync::Arc;
use std::time::Duration;

/// What every handler gets: the database and the limits it enforces itself.
#[derive(Clone)]
pub struct AppState {
    /// every database of the server (a handler takes the one its request names with the
    /// [`crate::api::db_path::Database`] extractor)
    pub databases: Arc<Databases>,
    /// largest buffered body (and longest import line), in bytes
    pub max_body_bytes: usize,
    /// what an import must keep to
    pub import: crate::service::ImportLimits,
    /// the streamed answers (NDJSON streams, backups) that may run at once
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    /// their number (`--max-streams`)
    pub(crate) max_streams: usize,
    /// this server's metrics (`GET /metrics`)
    pub(crate) metrics: Arc<Metrics>,
    /// the places of the heavy reads (`--max-heavy-reads`)
    pub(crate) admission: Arc<super::admission::Admission>,
    /// runs SQL statements (`POST /v1/sql`) on a runtime of its own
    pub(crate) sql: Arc<crate::service::sql::SqlEngine>,
    /// `GET /ready` names the leader and the epoch to any caller (`--ready-details`, or no keys
    /// configured), not only to one with a valid key
    pub(crate) ready_details: bool,
}

/// Limits of the HTTP layer.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// largest request body, in bytes (import lines included; import bodies stream)
    pub max_body_bytes: usize,
    /// longest a request may take (import excepted); also the window in which an import body
    /// must bring `min_import_bytes`
    pub timeout: Duration,
    /// the least bytes an import body must bring per `timeout` window (and a streamed answer's
    /// client must take, while the server waits for it)
    pub min_import_bytes: usize,
    /// most streamed answers (NDJSON streams of queries and exports, backups) written at once;
    /// beyond, 503 `too_many_streams`
    pub max_streams: usize,
    /// heavy reads run at once per class (`--max-heavy-reads`); beyond, 503 `too_many_heavy_reads`
    pub heavy_reads: super::admission::HeavyReads,
    /// the bounds of SQL statements (`--sql-timeout-secs`, `--sql-memory-mb`, `--sql-total-memory-mb`)
    pub sql: crate::service::sql::SqlLimits,
}
