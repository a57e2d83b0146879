//! The figures of every database, labelled `database`, read at each scrape: what a server of
//! several tenants is watched by. (The families without a `database` label describe `default`.)

use super::collect::{counters, gauges};
use crate::service::databases::Databases;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use std::fmt::Result;
use std::sync::Arc;

/// Every database's figures.
pub(super) struct DatabasesCollector(pub(super) Arc<Databases>);

impl std::fmt::Debug for DatabasesCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DatabasesCollector")
    }
}

/// One database's figures.
struct Figures {
    label: [(&'static str, String); 1],
    info: crate::service::databases::DatabaseInfo,
    last_seq: u64,
    writes: u64,
    fsyncs: u64,
}

impl Collector for DatabasesCollector {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result {
        let all: Vec<Figures> = self
            .0
            .list()
            .databases
            .into_iter()
            .filter_map(|info| {
                let db = self.0.get(&info.name)?;
                let stats = db.core.store().stats();
                Some(Figures {
                    label: [("database", info.name.clone())],
                    last_seq: db.changefeed.change_stats_now().last_seq,
                    writes: stats.writes,
                    fsyncs: stats.fsyncs,
                    info,
                })
            })
            .collect();
        let e = &mut e;
        let each = |f: fn(&Figures) -> u64| all.iter().map(move |d| (d.label.clone(), f(d)));
        gauges(e, "mosaicdb_database_tables", "tables defined, per database", None, each(|d| d.info.tables))?;
        gauges(
            e,
            "mosaicdb_database_documents",
            "documents in every table, per database",
            None,
            each(|d| d.info.documents),
        )?;
        gauges(
            e,
            "mosaicdb_database_stored",
            "bytes each database stores: its table files and memtables (what its quota counts)",
            Some(&Unit::Bytes),
            each(|d| d.info.stored_bytes),
        )?;
        let quotas = all.iter().filter_map(|d| d.info.quota_bytes.map(|q| (d.label.clone(), q)));
        gauges(
            e,
            "mosaicdb_database_quota",
            "each database's quota of stored bytes, where it has one",
            Some(&Unit::Bytes),
            quotas,
        )?;
        gauges(
            e,
            "mosaicdb_database_changefeed_last_seq",
            "the newest durable change event's seq, per database (each has its own sequence)",
            None,
            each(|d| d.last_seq),
        )?;
        counters(
            e,
            "mosaicdb_database_writes",
            "writes whose keys were committed, per database",
            None,
            each(|d| d.writes),
        )?;
        counters(e, "mosaicdb_database_fsyncs", "fsyncs of each database's journal", None, each(|d| d.fsyncs))
    }
}
