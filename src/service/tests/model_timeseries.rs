//! Single points and blocks together against a model: random writes (appends, overwrites and
//! out-of-order points, some with tags), merges, retention runs and series deletes, and after
//! each step every read — pages in both orders, aggregations, the records — answers what the
//! model holds, and `check` is clean.

use crate::service::timeseries::batch::Batch;
use crate::service::timeseries::{
    AggregateFn, AggregateRequest, AggregateResponse, Order, PointsRequest, Precision, Retention,
};
use crate::service::{Db, DbOptions};
use crate::storage::{Durability, StorageConfig};
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::collections::BTreeMap;
use std::sync::Arc;

/// (entity, ts) → (value, tags)
type Model = BTreeMap<(String, i64), (f64, Option<String>)>;

/// The test's random choices, from a seed: proptest's deterministic generator.
struct Rng(TestRng);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..].copy_from_slice(&seed.rotate_left(17).to_le_bytes());
        Rng(TestRng::from_seed(RngAlgorithm::XorShift, &bytes))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }
}

const ENTITIES: [&str; 3] = ["a", "b", "c"];

async fn pages(
    db: &Arc<Db>,
    entity: Option<&str>,
    order: Order,
    limit: usize,
    window: (i64, i64),
) -> Vec<(String, i64, f64)> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let req = PointsRequest {
            entity: entity.map(str::to_owned),
            from: Some(window.0.to_string()),
            to: Some(window.1.to_string()),
            limit: Some(limit),
            order,
            cursor: cursor.take(),
            precision: Precision::Milliseconds,
            ..Default::default()
        };
        let page = db.timeseries.read_points("m".into(), req).await.unwrap();
        out.extend(page.points.into_iter().map(|p| (p.entity, p.ts, p.value)));
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}

async fn compare(db: &Arc<Db>, model: &Model, rng: &mut Rng) {
    let window = {
        let a = rng.below(3000) as i64 - 500;
        (a, a + 1 + rng.below(3000) as i64)
    };
    let inside = |ts: i64| ts >= window.0 && ts < window.1;
    let entity = (rng.below(2) == 0).then(|| ENTITIES[rng.below(3) as usize]);
    let mut want: Vec<(String, i64, f64)> = model
        .iter()
        .filter(|((e, ts), _)| inside(*ts) && entity.is_none_or(|x| x == e))
        .map(|((e, ts), (v, _))| (e.clone(), *ts, *v))
        .collect();
    let limit = 1 + rng.below(400) as usize;
    assert_eq!(pages(db, entity, Order::Asc, limit, window).await, want, "asc, window {window:?}");
    // descending: entities in reverse name order, each newest first
    want.sort_by(|x, y| y.0.cmp(&x.0).then(y.1.cmp(&x.1)));
    assert_eq!(pages(db, entity, Order::Desc, limit, window).await, want, "desc, window {window:?}");
    // the sum and count per 100 ms bucket over every series
    for func in [AggregateFn::Count, AggregateFn::Sum] {
        let req = AggregateRequest {
            entity: entity.map(str::to_owned),
            from: Some(window.0.to_string()),
            to: Some(window.1.to_string()),
            step: "100ms".into(),
            func,
            ..Default::default()
        };
        let AggregateResponse::Buckets { buckets } = db.timeseries.aggregate("m".into(), req).await.unwrap() else {
            panic!("buckets expected")
        };
        let mut expect: BTreeMap<i64, f64> = BTreeMap::new();
        for (_, ts, v) in &want {
            *expect.entry(ts.div_euclid(100) * 100).or_default() += if func == AggregateFn::Count { 1.0 } else { *v };
        }
        let got: BTreeMap<i64, f64> = buckets.iter().map(|b| (b.ts, b.value)).collect();
        assert_eq!(got.keys().collect::<Vec<_>>(), expect.keys().collect::<Vec<_>>());
        for (k, v) in &expect {
            assert!((got[k] - v).abs() < 1e-6 * v.abs().max(1.0), "{func:?} at {k}: {} vs {v}", got[k]);
        }
    }
    let list = db.timeseries.list_metrics().await.unwrap();
    let m = list.metrics.iter().find(|m| m.name == "m");
    assert_eq!(m.map_or(0, |m| m.points), model.len() as u64);
    if let Some(m) = m {
        assert_eq!(m.first, model.keys().map(|(_, t)| *t).min());
        assert_eq!(m.last, model.keys().map(|(_, t)| *t).max());
    }
    let report = crate::service::check(db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
}

#[tokio::test]
async fn single_points_and_blocks_answer_as_the_model_through_merges_and_retention() {
    for seed in [0x9e37_79b9_7f4a_7c15, 0x2545_f491_4f6c_dd1d, 0x1234_5678_9abc_def1, 7] {
        run(seed).await;
    }
}

async fn run(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StorageConfig::new(dir.path());
    config.durability = Durability::Buffered;
    let db = Db::open(config, DbOptions::default()).unwrap();
    // the metric exists before its first point (a retention set creates it)
    db.timeseries.set_retention("m".into(), Retention { max_age: None }).await.unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(seed);
    for step in 0..120 {
        match rng.below(10) {
            0..=4 => {
                // mostly appends after the series' end, some anywhere (overwrites, out of order)
                let mut batch = Batch::default();
                let entity = ENTITIES[rng.below(3) as usize];
                let end = model.keys().filter(|(e, _)| e == entity).map(|(_, t)| *t).max().unwrap_or(0);
                let n = 1 + rng.below(300);
                for i in 0..n {
                    let ts = if rng.below(4) == 0 { rng.below(3000) as i64 - 500 } else { end + 1 + i as i64 * 3 };
                    let value = (rng.below(10_000) as f64) / 100.0;
                    let tags = (rng.below(8) == 0).then(|| format!("{{\"k\":{}}}", rng.below(5)));
                    let series = batch.series("m", entity).unwrap();
                    batch.push(series, ts * 1_000_000, value, tags.clone().map(String::into_bytes));
                    model.insert((entity.to_owned(), ts), (value, tags));
                }
                db.timeseries.write_points(batch).await.unwrap();
            }
            5..=6 => {
                db.timeseries.merge_timeseries(&|| false).await.unwrap();
            }
            7 => {
                // retention at a random cutoff: everything before it goes
                let cutoff_ms = rng.below(2000) as i64 - 500;
                db.timeseries.set_retention("m".into(), Retention { max_age: Some("1h".into()) }).await.unwrap();
                let now_ns = (cutoff_ms + 3_600_000) * 1_000_000;
                db.timeseries.apply_retention(now_ns, &|| false).await.unwrap();
                db.timeseries.set_retention("m".into(), Retention { max_age: None }).await.unwrap();
                model.retain(|(_, ts), _| *ts >= cutoff_ms);
            }
            8 if rng.below(3) == 0 => {
                let entity = ENTITIES[rng.below(3) as usize];
                if model.keys().any(|(e, _)| e == entity) {
                    db.timeseries.delete_timeseries("m".into(), Some(entity.into())).await.unwrap();
                    model.retain(|(e, _), _| e != entity);
                }
            }
            _ => compare(&db, &model, &mut rng).await,
        }
        if step % 10 == 9 {
            compare(&db, &model, &mut rng).await;
        }
    }
    db.timeseries.merge_timeseries(&|| false).await.unwrap();
    compare(&db, &model, &mut rng).await;
    // merged: far fewer keys than points
    let keys = crate::service::check(&db).await.unwrap().checked.points;
    eprintln!("{} points in {keys} keys", model.len());
    assert!(keys * 4 < model.len() as u64, "{} points in {keys} keys", model.len());
    // the tags come back from blocks too
    let req = PointsRequest { limit: Some(100_000), precision: Precision::Milliseconds, ..Default::default() };
    let page = db.timeseries.read_points("m".into(), req).await.unwrap();
    for p in page.points {
        let want = model[&(p.entity.clone(), p.ts)].1.clone();
        assert_eq!(p.tags.map(|t| t.to_string()), want, "tags of {}/{}", p.entity, p.ts);
    }
}

/// A data directory of format 1 (before blocks): every point its own key, 24-byte series records,
/// no format stamp, no series index. It opens unchanged, answers the same before and after the
/// merge task packs it, gets its series index and is stamped with the current format; a directory
/// of a newer format is refused.
#[tokio::test]
async fn a_format_1_directory_opens_reads_and_is_merged() {
    use crate::keys::{MetaKey, TsKey};
    use crate::service::core::data_format;
    use crate::storage::Space;
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut c = StorageConfig::new(dir.path());
        c.durability = Durability::Buffered;
        c
    };
    {
        // what a format 1 build wrote, key by key
        let db = Db::open(config(), DbOptions { background_jobs: false, ..DbOptions::default() }).unwrap();
        db.timeseries.set_retention("m".into(), Retention { max_age: None }).await.unwrap();
        db.core
            .store
            .write(|tx| {
                tx.delete(Space::Meta, MetaKey::Format.encode());
                for (entity, n) in [("a", 300i64), ("host=h1", 5)] {
                    for i in 0..n {
                        let key = TsKey::new("m", entity, i * 1_000_000).encode();
                        tx.put(Space::Ts, key, ((i % 7) as f64).to_be_bytes().to_vec());
                    }
                    let mut record = n.to_be_bytes().to_vec();
                    record.extend_from_slice(&0i64.to_be_bytes());
                    record.extend_from_slice(&((n - 1) * 1_000_000).to_be_bytes());
                    tx.put(Space::Meta, MetaKey::Series("m".into(), entity.into()).encode(), record);
                }
                Ok::<(), crate::storage::StorageError>(())
            })
            .await
            .unwrap();
        db.shutdown().await.unwrap();
    }
    {
        // as it is on disk: the server's open upgrades it in the background (a read after the
        // open may already see the new stamp)
        let store = crate::storage::Store::open(config(), &crate::storage::TestEvents).unwrap();
        assert_eq!(data_format::read(&store).unwrap(), 1);
        store.close().unwrap();
    }
    let db = Db::open(config(), DbOptions::default()).unwrap();
    let all = |db: Arc<Db>| async move {
        let req = PointsRequest { limit: Some(100_000), ..Default::default() };
        db.timeseries
            .read_points("m".into(), req)
            .await
            .unwrap()
            .points
            .iter()
            .map(|p| (p.entity.clone(), p.ts, p.value))
            .collect::<Vec<_>>()
    };
    let before = all(db.clone()).await;
    assert_eq!(before.len(), 305);
    assert!(crate::service::check(&db).await.unwrap().ok);
    let gone = db.timeseries.merge_timeseries(&|| false).await.unwrap();
    assert!(gone > 250, "merged away {gone} keys");
    assert_eq!(all(db.clone()).await, before);
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(db.timeseries.list_metrics().await.unwrap().metrics[0].points, 305);
    // the server's open stamps the current format (in the background)
    for _ in 0..100 {
        if data_format::read(&db.core.store).unwrap() == data_format::DATA_FORMAT {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(data_format::read(&db.core.store).unwrap(), data_format::DATA_FORMAT);
    // the upgrade built the series index (format 3), which check now holds to the records
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.checked.series_labels, 1);
    let page = db.timeseries.list_series("m".into(), Some("{host=\"h1\"}".into()), None, None).await.unwrap();
    assert_eq!(page.series.iter().map(|s| (s.entity.as_str(), s.points)).collect::<Vec<_>>(), [("host=h1", 5)]);
    // a newer format is refused, with the reason
    db.core
        .store
        .write(|tx| {
            tx.put(Space::Meta, MetaKey::Format.encode(), (data_format::DATA_FORMAT + 1).to_be_bytes().to_vec());
            Ok::<(), crate::storage::StorageError>(())
        })
        .await
        .unwrap();
    db.shutdown().await.unwrap();
    drop(db);
    let refused = Db::open(config(), DbOptions::default()).err().expect("a newer format is refused");
    assert!(refused.to_string().contains("newer than this build reads"), "{refused}");
}

/// `check` holds the series index to the series records: a label key missing, one of no series,
/// and one left behind by a series whose last point went are each reported.
#[tokio::test]
async fn check_reports_a_series_index_that_differs_from_the_series() {
    use crate::keys::MetaKey;
    use crate::storage::Space;
    let dir = tempfile::tempdir().unwrap();
    let mut config = StorageConfig::new(dir.path());
    config.durability = Durability::Buffered;
    let db = Db::open(config, DbOptions::default()).unwrap();
    let mut batch = Batch::default();
    for (entity, ts) in [("dc=eu,host=h1", 1), ("host=h2", 2), ("plain", 3)] {
        batch.add("m", entity, ts, 1.0);
    }
    db.timeseries.write_points(batch).await.unwrap();
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.checked.series_labels, 3);
    // deleting a series removes its labels
    db.timeseries.delete_timeseries("m".into(), Some("host=h2".into())).await.unwrap();
    let report = crate::service::check(&db).await.unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.checked.series_labels, 2);
    let label = |v: &str, e: &str| MetaKey::Label("m".into(), "host".into(), v.into(), e.into()).encode();
    let (gone, ghost) = (label("h1", "dc=eu,host=h1"), label("h9", "host=h9"));
    db.core
        .store
        .write(move |tx| {
            tx.delete(Space::Meta, gone);
            tx.put(Space::Meta, ghost, Vec::new());
            Ok::<(), crate::storage::StorageError>(())
        })
        .await
        .unwrap();
    let report = crate::service::check(&db).await.unwrap();
    let mut kinds: Vec<&str> = report.problems.iter().map(|p| p.kind).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["missing_entry", "stale_entry"], "{:?}", report.problems);
}
