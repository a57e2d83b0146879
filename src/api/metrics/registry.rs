//! One server's metrics: its own registry of the request and connection metrics and the database's
//! figures.

use super::collect;
use super::connections::ConnectionMetrics;
use super::http::{self, RecordLayer};
use crate::service::databases::Databases;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// One server's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    http: Arc<http::HttpMetrics>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("http", &self.http).finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry of the request metrics, of the default database's figures and of every
    /// database's, labelled.
    pub(crate) fn new(
        databases: Arc<Databases>,
        connections: Arc<ConnectionMetrics>,
        admission: Arc<crate::api::admission::Admission>,
    ) -> Metrics {
        let http = Arc::new(http::HttpMetrics::default());
        let mut registry = Registry::default();
        registry.register_collector(Box::new(http.clone()));
        registry.register_collector(Box::new(connections));
        registry.register_collector(Box::new(collect::DbCollector(databases.default_db().clone())));
        registry.register_collector(Box::new(super::databases::DatabasesCollector(databases)));
        registry.register_collector(Box::new(collect::AdmissionCollector(admission)));
        Metrics { registry, http }
    }

    /// The layer recording every request into these metrics (add it with `Router::layer`, which
    /// wraps each route: the route template is known there).
    pub(crate) fn layer(&self) -> RecordLayer {
        self.http.layer()
    }

    /// The exposition, `# EOF` included. Reads the store's figures: call it from a blocking
    /// context.
    pub(super) fn render(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::with_capacity(16 << 10);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}
