//! What the soak acknowledged, and the check at its end that all of it is there.

use super::Target;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A document's writes: the last acknowledged version, and the versions of later writes whose
/// answer was lost (each may or may not have been applied).
#[derive(Default, Clone)]
struct DocState {
    acked: Option<u64>,
    lost: Vec<u64>,
}

/// Everything the load was told was written.
#[derive(Default)]
pub struct Acked {
    docs: Mutex<HashMap<String, DocState>>,
    /// per line-protocol writer: points acknowledged, points in requests whose answer was lost
    points: Mutex<HashMap<usize, (u64, u64)>>,
    /// the document ids each changefeed consumer saw, once it caught up at the end
    feeds: Mutex<Vec<HashSet<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Acked {
    pub fn doc(&self, id: &str, version: u64, answered: bool) {
        let mut docs = lock(&self.docs);
        let state = docs.entry(id.to_owned()).or_default();
        if answered {
            state.acked = Some(version);
            state.lost.clear();
        } else {
            state.lost.push(version);
        }
    }

    pub fn points(&self, writer: usize, n: u64, answered: bool) {
        let mut points = lock(&self.points);
        let entry = points.entry(writer).or_default();
        if answered { entry.0 += n } else { entry.1 += n }
    }

    pub fn feed(&self, seen: HashSet<String>) {
        lock(&self.feeds).push(seen);
    }

    pub fn documents(&self) -> usize {
        lock(&self.docs).values().filter(|d| d.acked.is_some()).count()
    }

    pub fn uncertain_documents(&self) -> usize {
        lock(&self.docs).values().filter(|d| !d.lost.is_empty()).count()
    }
}

/// What the end check found.
#[derive(Default)]
pub struct Report {
    pub points: u64,
    pub series: usize,
    pub feed_events: usize,
    pub problems: Vec<String>,
}

/// Reads everything back: the documents (one NDJSON export), the series, the feeds.
pub async fn check(target: &Target, acked: &Acked) -> Report {
    let mut report = Report::default();
    if let Err(e) = documents(target, acked, &mut report).await {
        report.problems.push(format!("reading the documents back: {e}"));
    }
    if let Err(e) = series(target, acked, &mut report).await {
        report.problems.push(format!("reading the series back: {e}"));
    }
    feeds(acked, &mut report);
    report
}

fn truncate(s: &str) -> String {
    s.chars().take(400).collect()
}

async fn documents(target: &Target, acked: &Acked, report: &mut Report) -> Result<(), super::BoxError> {
    let body = target
        .http
        .get(target.url("/v1/tables/docs/documents"))
        .header("accept", "application/x-ndjson")
        .timeout(std::time::Duration::from_secs(600))
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    let mut stored: HashMap<String, u64> = HashMap::new();
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let doc: serde_json::Value = serde_json::from_slice(line)?;
        let (Some(id), Some(v)) = (doc["_id"].as_str(), doc["v"].as_u64()) else {
            report.problems.push(format!("a document without _id or v: {}", truncate(&doc.to_string())));
            continue;
        };
        stored.insert(id.to_owned(), v);
    }
    let docs = lock(&acked.docs);
    for (id, state) in docs.iter() {
        let found = stored.get(id).copied();
        let fine = match (found, state.acked) {
            (Some(v), Some(a)) => v == a || state.lost.contains(&v),
            (None, None) => true,
            (Some(v), None) => state.lost.contains(&v),
            (None, Some(_)) => false,
        };
        if !fine && report.problems.len() < 1000 {
            report.problems.push(format!(
                "document {id}: stored {found:?}, acknowledged {:?}, answers lost for {:?}",
                state.acked, state.lost
            ));
        }
    }
    for id in stored.keys().filter(|id| !docs.contains_key(*id)).take(100) {
        report.problems.push(format!("document {id} is stored but was never written"));
    }
    Ok(())
}

async fn series(target: &Target, acked: &Acked, report: &mut Report) -> Result<(), super::BoxError> {
    let answer: serde_json::Value = target
        .http
        .get(target.url("/v1/timeseries/soak/series?limit=100000"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let mut stored: HashMap<usize, u64> = HashMap::new();
    for s in answer["series"].as_array().into_iter().flatten() {
        let writer = s["labels"]["writer"].as_str().and_then(|w| w.parse().ok());
        if let (Some(writer), Some(points)) = (writer, s["points"].as_u64()) {
            stored.insert(writer, points);
        }
    }
    report.series = stored.len();
    for (writer, (ok, lost)) in lock(&acked.points).iter() {
        let found = stored.get(writer).copied().unwrap_or(0);
        report.points += found;
        if found < *ok || found > ok + lost {
            report
                .problems
                .push(format!("series writer={writer}: {found} points, acknowledged {ok}, lost answers {lost}"));
        }
    }
    Ok(())
}

fn feeds(acked: &Acked, report: &mut Report) {
    let docs = lock(&acked.docs);
    for (i, seen) in lock(&acked.feeds).iter().enumerate() {
        report.feed_events = report.feed_events.max(seen.len());
        let missing: Vec<&String> =
            docs.iter().filter(|(id, s)| s.acked.is_some() && !seen.contains(*id)).map(|(id, _)| id).take(5).collect();
        if !missing.is_empty() {
            report.problems.push(format!("changefeed consumer {i} never saw acknowledged writes of {missing:?}"));
        }
    }
}
