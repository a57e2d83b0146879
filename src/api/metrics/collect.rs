//! The collectors a scrape runs: the request metrics, and the database's figures read at that
//! moment ([`crate::service::metrics_snapshot`]). Every family is named `mosaicdb_…`; the
//! docs/operations.md lists them.

use super::http::{HttpMetrics, SeriesSnapshot};
use crate::service::cluster::ClusterStatus;
use crate::service::{Db, IndexBuild, MetricsSnapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;
use std::fmt::Result;
use std::sync::Arc;

/// A family of counters, one per label set.
pub(super) fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Result {
    let mut metric = encoder.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for (labels, value) in samples {
        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A family of gauges, one per label set.
pub(super) fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, V)>,
) -> Result {
    let mut metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, value) in samples {
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One counter without labels.
pub(super) fn counter<V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: V,
) -> Result {
    ConstCounter::new(value).encode(encoder.encode_descriptor(name, help, unit, MetricType::Counter)?)
}

/// One gauge without labels (none at all when `value` is `None`).
pub(super) fn gauge<V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: impl Into<Option<V>>,
) -> Result {
    let metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    match value.into() {
        Some(value) => ConstGauge::new(value).encode(metric),
        None => Ok(()),
    }
}

/// `method`, `route` and `status`.
type RequestLabels<'a> = ([(&'static str, &'a str); 2], [(&'static str, u16); 1]);

impl Collector for HttpMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result {
        let series = self.snapshot();
        let answered = || series.iter().filter_map(|s| s.status.map(|status| (s, status)));
        fn labels(s: &SeriesSnapshot, status: u16) -> RequestLabels<'_> {
            ([("method", s.method), ("route", &s.route)], [("status", status)])
        }
        counters(
            &mut encoder,
            "mosaicdb_http_requests",
            "HTTP requests answered, by method, route template (`unmatched` when no route matched) and status",
            None,
            answered().map(|(s, status)| (labels(s, status), s.latency.count())),
        )?;
        let mut metric = encoder.encode_descriptor(
            "mosaicdb_http_request_duration",
            "time from the request reaching the router to its response head, by method, route template and status",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (s, status) in answered() {
            let labels = labels(s, status);
            s.latency.encode(&mut metric.encode_family(&labels)?)?;
        }
        counters(
            &mut encoder,
            "mosaicdb_http_requests_abandoned",
            "HTTP requests dropped before their answer (the client left), by method and route template",
            None,
            series
                .iter()
                .filter(|s| s.status.is_none())
                .map(|s| ([("method", s.method), ("route", &*s.route)], s.latency.count())),
        )?;
        gauge(&mut encoder, "mosaicdb_http_requests_in_flight", "HTTP requests under way", None, self.in_flight())
    }
}

/// The heavy reads' places (`--max-heavy-reads`): running and refused, by class.
#[derive(Debug)]
pub(super) struct AdmissionCollector(pub(super) Arc<crate::api::admission::Admission>);

impl Collector for AdmissionCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result {
        let figures = self.0.figures();
        gauges(
            &mut encoder,
            "mosaicdb_heavy_reads_running",
            "heavy reads running (holding one of the --max-heavy-reads places of their class), by class",
            None,
            figures.iter().map(|(class, running, _)| ([("class", *class)], *running as i64)),
        )?;
        counters(
            &mut encoder,
            "mosaicdb_heavy_reads_refused",
            "heavy reads refused with 503 too_many_heavy_reads (every place of their class taken), by class",
            None,
            figures.iter().map(|(class, _, refused)| ([("class", *class)], *refused)),
        )
    }
}

/// The database's figures, read at each scrape.
pub(super) struct DbCollector(pub(super) Arc<Db>);

impl std::fmt::Debug for DbCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbCollector")
    }
}

impl Collector for DbCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result {
        let snapshot = crate::service::metrics_snapshot(&self.0);
        service(&mut encoder, &snapshot)?;
        storage(&mut encoder, &snapshot)?;
        tasks(&mut encoder, &snapshot)?;
        indexes(&mut encoder, &snapshot)?;
        timeseries(&mut encoder, &snapshot)
    }
}

fn timeseries(e: &mut DescriptorEncoder<'_>, s: &MetricsSnapshot) -> Result {
    let metric = |m: &crate::service::timeseries::MetricInfo| [("metric", m.name.clone())];
    gauges(
        e,
        "mosaicdb_timeseries_points",
        "points stored per metric",
        None,
        s.metrics.iter().map(|m| (metric(m), m.points)),
    )?;
    gauges(
        e,
        "mosaicdb_timeseries_series",
        "series with points per metric",
        None,
        s.metrics.iter().map(|m| (metric(m), m.series)),
    )?;
    gauges(
        e,
        "mosaicdb_timeseries",
        "bytes of each metric's stored keys and values (blocks and single points), before the store's compression",
        Some(&Unit::Bytes),
        s.metrics.iter().map(|m| (metric(m), m.bytes)),
    )
}

fn service(e: &mut DescriptorEncoder<'_>, s: &MetricsSnapshot) -> Result {
    let mut info = e.encode_descriptor("mosaicdb_build", "the mosaicdb version", None, MetricType::Info)?;
    info.encode_info(&[("version", env!("CARGO_PKG_VERSION"))])?;
    gauge(e, "mosaicdb_uptime", "time since the database opened", Some(&Unit::Seconds), s.uptime.as_secs_f64())?;
    gauge(
        e,
        "mosaicdb_writable",
        "1 while the store takes writes, 0 after a failed fsync",
        None,
        u64::from(s.writable),
    )?;
    gauge(e, "mosaicdb_imports_running", "NDJSON imports under way", None, s.imports_running)?;
    gauge(
        e,
        "mosaicdb_background_jobs_running",
        "background jobs under way: index builds, table and index purges, and the writes that start them",
        None,
        s.jobs_running,
    )?;
    gauge(e, "mosaicdb_tables", "tables defined", None, s.tables)?;
    let feed = &s.changefeed;
    gauge(
        e,
        "mosaicdb_changefeed_last_seq",
        "the newest durable change event's seq (0 before the first)",
        None,
        feed.last_seq,
    )?;
    gauge(e, "mosaicdb_changefeed_events", "change events kept", None, feed.events)?;
    gauge(e, "mosaicdb_changefeed_disk", "disk space of the changefeed's table files", Some(&Unit::Bytes), feed.bytes)?;
    gauge(e, "mosaicdb_tables_dropping", "dropped tables whose keys are still being removed", None, s.tables_dropping)?;
    let g = &s.graph_memory;
    gauge(
        e,
        "mosaicdb_graph_memory_on",
        "1 while graph walks read the in-memory adjacency, 0 while they read the keys (off: over --graph-memory-mb)",
        None,
        u64::from(g.state == "on"),
    )?;
    gauge(e, "mosaicdb_graph_memory_edges", "edges held by the in-memory adjacency", None, g.edges)?;
    gauge(e, "mosaicdb_graph_memory", "memory the in-memory adjacency takes, estimated", Some(&Unit::Bytes), g.bytes)?;
    gauge(
        e,
        "mosaicdb_graph_memory_per_edge",
        "bytes per edge of the in-memory adjacency, estimated",
        Some(&Unit::Bytes),
        g.bytes_per_edge,
    )?;
    gauge(
        e,
        "mosaicdb_graph_memory_load",
        "how long loading the adjacency took at open",
        Some(&Unit::Seconds),
        g.load_seconds,
    )?;
    gauge(
        e,
        "mosaicdb_indexes_dropping",
        "dropped indexes whose entries are still being removed",
        None,
        s.indexes_dropping,
    )?;
    cluster(e, &s.cluster)
}

fn cluster(e: &mut DescriptorEncoder<'_>, c: &ClusterStatus) -> Result {
    let role = serde_json::to_value(c.role).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let mut info = e.encode_descriptor(
        "mosaicdb_cluster_role",
        "this server among those sharing its backend: sole (no cluster mode), leader or follower",
        None,
        MetricType::Info,
    )?;
    info.encode_info(&[("role", role.as_str()), ("leader", c.leader.as_str())])?;
    gauge(
        e,
        "mosaicdb_cluster_epoch",
        "the backend's epoch (moved on each time a server took the lead)",
        None,
        c.epoch,
    )?;
    gauge(e, "mosaicdb_cluster_applied_state", "the last state this server has applied", None, c.applied)?;
    gauge(
        e,
        "mosaicdb_cluster_lag",
        "how far behind the leader's last state a follower is (0: caught up)",
        Some(&Unit::Seconds),
        c.lag_ms as f64 / 1000.0,
    )
}

fn storage(e: &mut DescriptorEncoder<'_>, s: &MetricsSnapshot) -> Result {
    let st = &s.storage;
    let (bytes, seconds) = (Some(&Unit::Bytes), Some(&Unit::Seconds));
    counter(
        e,
        "mosaicdb_storage_write_groups",
        "groups of writes the committer took from its queue",
        None,
        st.write_groups,
    )?;
    counter(e, "mosaicdb_storage_writes", "writes whose keys were committed", None, st.writes)?;
    counter(
        e,
        "mosaicdb_storage_fsyncs",
        "fsyncs of the journal (sync durability: each covers every write group committed before it began)",
        None,
        st.fsyncs,
    )?;
    counter(e, "mosaicdb_storage_fsync", "time spent in those fsyncs", seconds, st.fsync_time.as_secs_f64())?;
    gauges(
        e,
        "mosaicdb_storage_disk",
        "bytes of table files per key family (the journal apart)",
        bytes,
        st.families.iter().map(|f| ([("family", f.family)], f.disk_bytes)),
    )?;
    gauges(
        e,
        "mosaicdb_storage_keys",
        "approximate number of keys per key family",
        None,
        st.families.iter().map(|f| ([("family", f.family)], f.approximate_keys)),
    )?;
    gauges(
        e,
        "mosaicdb_storage_table_files",
        "table (SST) files per key family",
        None,
        st.families.iter().map(|f| ([("family", f.family)], f.table_files)),
    )?;
    gauges(
        e,
        "mosaicdb_storage_sealed_memtables",
        "memtables waiting to be flushed, per key family",
        None,
        st.families.iter().map(|f| ([("family", f.family)], f.sealed_memtables)),
    )?;
    gauge(e, "mosaicdb_storage_journal_files", "journal files on disk", None, st.journal_files)?;
    gauge::<u64>(
        e,
        "mosaicdb_storage_journal",
        "size of the journal files on disk (fjall preallocates them)",
        bytes,
        st.journal_bytes,
    )?;
    gauge(e, "mosaicdb_storage_cache_capacity", "size the block cache may grow to", bytes, st.cache_capacity_bytes)?;
    gauge(e, "mosaicdb_storage_cache", "bytes in the block cache", bytes, st.cache_bytes)?;
    gauge(
        e,
        "mosaicdb_storage_write_buffer",
        "bytes in memtables, active and sealed, of every family",
        bytes,
        st.write_buffer_bytes,
    )?;
    gauge(e, "mosaicdb_storage_flushes_queued", "memtable flushes waiting to run", None, st.flushes_queued)?;
    gauge(e, "mosaicdb_storage_compactions_running", "compactions running", None, st.compactions_running)?;
    counter(e, "mosaicdb_storage_compactions", "compactions finished", None, st.compactions_completed)?;
    counter(e, "mosaicdb_storage_compaction", "time spent compacting", seconds, st.compaction_time.as_secs_f64())
}

fn tasks(e: &mut DescriptorEncoder<'_>, s: &MetricsSnapshot) -> Result {
    let task = |name: &str| [("task", name.to_owned())];
    let seconds = Some(&Unit::Seconds);
    counters(
        e,
        "mosaicdb_task_runs",
        "finished runs of each periodic task",
        None,
        s.tasks.iter().map(|t| (task(&t.name), t.runs)),
    )?;
    counters(
        e,
        "mosaicdb_task_errors",
        "runs that ended with an error",
        None,
        s.tasks.iter().map(|t| (task(&t.name), t.errors)),
    )?;
    counters(
        e,
        "mosaicdb_task_removed_items",
        "items (documents, points) the task's runs removed",
        None,
        s.tasks.iter().map(|t| (task(&t.name), t.removed_total)),
    )?;
    counters(
        e,
        "mosaicdb_task_duration",
        "time taken by the task's finished runs",
        seconds,
        s.tasks.iter().map(|t| (task(&t.name), t.duration_total.as_secs_f64())),
    )?;
    gauges(
        e,
        "mosaicdb_task_last_duration",
        "time the last finished run took",
        seconds,
        s.tasks.iter().filter_map(|t| t.last_duration.map(|d| (task(&t.name), d.as_secs_f64()))),
    )?;
    gauges(
        e,
        "mosaicdb_task_running",
        "1 while a run is under way",
        None,
        s.tasks.iter().map(|t| (task(&t.name), u64::from(t.running))),
    )?;
    gauges(
        e,
        "mosaicdb_task_interval",
        "pause between the end of a run and the start of the next",
        seconds,
        s.tasks.iter().map(|t| (task(&t.name), t.interval.as_secs_f64())),
    )
}

fn indexes(e: &mut DescriptorEncoder<'_>, s: &MetricsSnapshot) -> Result {
    let index = |t: &str, n: &str| [("table", t.to_owned()), ("index", n.to_owned())];
    gauges(
        e,
        "mosaicdb_index_state",
        "1 for the state each index is in (building, ready, failed), 0 for the others",
        None,
        s.indexes.iter().flat_map(|i| {
            IndexBuild::NAMES.map(|state| {
                let labels = ([("table", &*i.table), ("index", &*i.name), ("kind", &*i.kind)], [("state", state)]);
                (labels, u64::from(i.state.name() == state))
            })
        }),
    )?;
    let building = || {
        s.indexes.iter().filter_map(|i| match i.state {
            IndexBuild::Building { done, total } => Some((i, done, total)),
            IndexBuild::Ready | IndexBuild::Failed => None,
        })
    };
    gauges(
        e,
        "mosaicdb_index_build_indexed_documents",
        "documents a building index has indexed so far",
        None,
        building().map(|(i, done, _)| (index(&i.table, &i.name), done)),
    )?;
    gauges(
        e,
        "mosaicdb_index_build_expected_documents",
        "documents a building index has to index (estimated when the build started)",
        None,
        building().map(|(i, _, total)| (index(&i.table, &i.name), total)),
    )?;
    gauges(
        e,
        "mosaicdb_vector_index_memory",
        "memory a vector index's graph takes (vectors or their int8 codes, links, ids), estimated",
        Some(&Unit::Bytes),
        s.indexes.iter().filter_map(|i| Some((index(&i.table, &i.name), i.memory?))),
    )?;
    gauges(
        e,
        "mosaicdb_index_build_progress_ratio",
        "indexed / expected documents of a building index",
        None,
        building().map(|(i, done, total)| {
            (index(&i.table, &i.name), if total == 0 { 1.0 } else { done as f64 / total as f64 })
        }),
    )
}
