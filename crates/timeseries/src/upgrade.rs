//! The time-series part of a data directory's upgrade (see `service::core::data_format`): what an older
//! format lacks, built in the one write that stamps the new format.

use super::labels;
use super::stats::SeriesStats;
use mosaic_keys::{MetaKey, TsKey};
use mosaic_storage::{KeyRange, Space, WriteTx};

/// Brings the series of a directory of format `found` to format 3: each record gets the bytes of
/// its series' keys and its single points counted (records of formats 1 and 2 have neither) and the series index its
/// labels. Records that do not decode are left as they are, for `check` to report.
pub fn upgrade(tx: &mut WriteTx<'_>, found: u32) -> mosaic_storage::Result<()> {
    if found >= 3 {
        return Ok(());
    }
    let mut records = Vec::new();
    for item in tx.scan(Space::Meta, KeyRange::Prefix(MetaKey::kind_prefix("series"))) {
        let (key, value) = item?;
        if let (Ok(MetaKey::Series(metric, entity)), Ok(stats)) = (MetaKey::decode(&key), SeriesStats::decode(&value)) {
            records.push((metric.into_owned(), entity.into_owned(), stats));
        }
    }
    for (metric, entity, mut stats) in records {
        (stats.bytes, stats.singles) = (0, 0);
        for item in tx.scan(Space::Ts, KeyRange::Prefix(TsKey::series_prefix(&metric, &entity))) {
            let (key, value) = item?;
            stats.bytes += (key.len() + value.len()) as u64;
            stats.singles += u64::from(TsKey::decode(&key).is_ok());
        }
        tx.put(Space::Meta, MetaKey::Series(metric.as_str().into(), entity.as_str().into()).encode(), stats.encode());
        labels::stage(tx, &metric, &entity, true);
    }
    Ok(())
}
