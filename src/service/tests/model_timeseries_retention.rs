//! Retention of a metric through the database: exactly the points older than the maximum age go,
//! chunk by chunk, and `check` stays clean.

use crate::service::Db;
use crate::service::timeseries::batch::Batch;
use crate::service::timeseries::retention::REMOVE_CHUNK;
use crate::service::timeseries::time::NS_PER_MS;
use crate::storage::{Durability, StorageConfig};

#[tokio::test]
async fn retention_removes_exactly_the_points_older_than_max_age_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StorageConfig::new(dir.path());
    config.durability = Durability::Buffered;
    let db = Db::open(config, crate::service::DbOptions::default()).unwrap();
    let hour = 3_600_000 * NS_PER_MS;
    let now = 100 * hour;
    let cutoff = now - hour;
    // more points than one chunk before the cutoff in one series, a few in another
    let mut points = Batch::default();
    for i in 0..REMOVE_CHUNK as i64 + 5 {
        points.add("cpu", "a", cutoff - 1 - i, 1.0);
    }
    for (metric, entity, ts) in [("cpu", "a", cutoff), ("cpu", "a", now), ("cpu", "b", cutoff - 1)] {
        points.add(metric, entity, ts, 1.0);
    }
    points.add("cpu", "b", cutoff + 1, 1.0);
    points.add("mem", "a", 0, 1.0);
    db.timeseries.write_points(points).await.unwrap();
    db.timeseries
        .set_retention("cpu".into(), crate::service::timeseries::Retention { max_age: Some("1h".into()) })
        .await
        .unwrap();

    let removed = db.timeseries.apply_retention(now, &|| false).await.unwrap();
    assert_eq!(removed, REMOVE_CHUNK as u64 + 6);
    let left = |entity: &str| {
        let req = crate::service::timeseries::PointsRequest {
            entity: Some(entity.into()),
            precision: crate::service::timeseries::Precision::Nanoseconds,
            ..Default::default()
        };
        let db = db.clone();
        async move {
            db.timeseries.read_points("cpu".into(), req).await.unwrap().points.iter().map(|p| p.ts).collect::<Vec<_>>()
        }
    };
    assert_eq!(left("a").await, [cutoff, now]);
    assert_eq!(left("b").await, [cutoff + 1]);
    // a metric without retention keeps everything; the statistics follow the removals
    let list = db.timeseries.list_metrics().await.unwrap();
    let by_name = |n: &str| list.metrics.iter().find(|m| m.name == n).unwrap().clone();
    assert_eq!(by_name("mem").points, 1);
    assert_eq!((by_name("cpu").points, by_name("cpu").first), (3, Some(cutoff / NS_PER_MS)));
    assert!(crate::service::check(&db).await.unwrap().ok);
    // nothing more to remove; a stop asked for before the run removes nothing more either
    assert_eq!(db.timeseries.apply_retention(now, &|| false).await.unwrap(), 0);
    assert_eq!(db.timeseries.apply_retention(now + 2 * hour, &|| true).await.unwrap(), 0);
}
