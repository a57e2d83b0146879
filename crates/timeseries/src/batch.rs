//! The points of one write request, checked and interned, before they are encoded: what the
//! JSON and line-protocol readers (`write.rs`, `line.rs`) fill in and `write.rs` stores. A leaf
//! of its own so the line-protocol reader need not import the writer that calls it.

/// Longest metric name, in bytes.
pub const MAX_METRIC_BYTES: usize = 256;
/// Longest entity, in bytes.
pub const MAX_ENTITY_BYTES: usize = 1024;
/// Most points one request may write.
pub const MAX_POINTS_PER_WRITE: usize = 1_000_000;

/// The points of one request, their series interned: most requests write many points to few
/// series, so each metric and entity is stored, checked and encoded once.
#[derive(Debug, Default)]
pub struct Batch {
    /// (metric, entity), in the order first seen
    pub(super) series: Vec<(String, String)>,
    /// hash of (metric, entity) → indexes into `series`
    pub(super) index: std::collections::HashMap<u64, Vec<u32>>,
    pub(super) points: Vec<Pt>,
}

/// One point of a [`Batch`].
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pt {
    pub(super) series: u32,
    /// nanoseconds since the epoch
    pub(super) ts: i64,
    pub(super) value: f64,
    /// the tags as JSON text, if any
    pub(super) tags: Option<Vec<u8>>,
}

impl Batch {
    /// Points in the batch.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the batch has no point.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The series of `metric` and `entity`, checked and added the first time it is seen.
    pub fn series(&mut self, metric: &str, entity: &str) -> std::result::Result<u32, String> {
        use std::hash::BuildHasher;
        let hash = foldhash::fast::FixedState::with_seed(0).hash_one((metric, entity));
        let candidates = self.index.entry(hash).or_default();
        if let Some(&i) = candidates.iter().find(|&&i| {
            let (m, e) = &self.series[i as usize];
            m == metric && e == entity
        }) {
            return Ok(i);
        }
        check_metric(metric)?;
        check_entity(entity)?;
        let i = u32::try_from(self.series.len()).map_err(|_| "too many series in one request".to_owned())?;
        self.series.push((metric.to_owned(), entity.to_owned()));
        candidates.push(i);
        Ok(i)
    }

    /// Adds a point of a series [`Batch::series`] returned.
    pub fn push(&mut self, series: u32, ts: i64, value: f64, tags: Option<Vec<u8>>) {
        self.points.push(Pt { series, ts, value, tags });
    }

    /// Every point as (metric, entity, ts, value), in the order given (for tests).
    #[doc(hidden)]
    pub fn flatten(&self) -> Vec<(String, String, i64, f64)> {
        let name = |p: &Pt| self.series[p.series as usize].clone();
        self.points.iter().map(|p| (name(p).0, name(p).1, p.ts, p.value)).collect()
    }

    /// Adds a point, checking its series (for tests: it panics on a bad series).
    #[doc(hidden)]
    pub fn add(&mut self, metric: &str, entity: &str, ts: i64, value: f64) {
        let series = self.series(metric, entity).expect("a valid series");
        self.push(series, ts, value, None);
    }
}

/// A metric name must be 1-256 bytes without control characters.
pub fn check_metric(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > MAX_METRIC_BYTES {
        return Err(format!("a metric name must be 1 to {MAX_METRIC_BYTES} bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err("a metric name may not hold control characters".into());
    }
    Ok(())
}

/// An entity must be at most 1024 bytes without control characters (the empty entity is the
/// series of a metric written without tags).
pub fn check_entity(entity: &str) -> std::result::Result<(), String> {
    if entity.len() > MAX_ENTITY_BYTES {
        return Err(format!("an entity must be at most {MAX_ENTITY_BYTES} bytes"));
    }
    if entity.chars().any(char::is_control) {
        return Err("an entity may not hold control characters".into());
    }
    Ok(())
}
