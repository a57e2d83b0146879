//! `POST /v1/tables/{table}/import`: an NDJSON or CSV body, streamed — parsed and encoded a chunk
//! at a time on the blocking pool while the previous chunk commits. Each line (each CSV row after
//! the header) is its own document: good ones are written, bad ones (unparsable, against the
//! schema, or taken by a unique index) reported by line number.
//!
//! The body is split into lines ([`lines`]) or CSV records ([`csv`]) as it arrives, each byte
//! looked at once; a line or record over the limit ends the import as soon as the limit is passed. Imports are not bound by the request timeout,
//! so the body must keep coming: at least [`ImportLimits::min_bytes`] every
//! [`ImportLimits::window`]. When the client goes away, the handler is dropped with this future:
//! no further line is read, and at most the chunk already handed over is written.

use super::documents::{new_id, put_uncounted};
use super::write::{Prepared, check_id, from_blob, live_table, plan_vectors_of, prepare, same_schema, take_id};
use crate::catalog::{Catalog, TableDef, TableKind};
use crate::entity::EncodeOptions;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use bytes::Bytes;
use csv::{CsvSplitter, Header, SplitError};
use futures_util::{Stream, StreamExt};
use lines::{LineSplitter, malformed, not_json};
use serde::Serialize;
use simd_json::prelude::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use utoipa::ToSchema;

mod csv;
mod lines;

/// Lines per commit.
const CHUNK_LINES: usize = 4096;
/// Bytes per commit.
const CHUNK_BYTES: usize = 4 << 20;
/// Failures listed in the report (all are counted).
const MAX_LISTED_FAILURES: usize = 1000;
/// The least an import body must bring per window by default (with the request timeout as the
/// window: 4 KiB in 30 s).
pub const DEFAULT_MIN_IMPORT_BYTES: usize = 4 << 10;

/// What an import did.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct ImportReport {
    /// documents written (created or replaced)
    pub inserted: u64,
    /// lines that were not written
    pub failed: u64,
    /// the first 1000 failures
    pub failures: Vec<LineFailure>,
}

/// Why one line was not written.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineFailure {
    /// 1-based line number (of a CSV row: the line it starts on)
    pub line: u64,
    /// error code, as in problem responses
    pub code: &'static str,
    /// what is wrong
    pub detail: String,
}

/// What an import body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// one JSON object per line (`application/x-ndjson`)
    Ndjson,
    /// a header row naming the fields, then one row per document (`text/csv`)
    Csv,
}

/// The limits one import runs under.
#[derive(Debug, Clone, Copy)]
pub struct ImportLimits {
    /// longest line, in bytes
    pub max_line: usize,
    /// the body must bring `min_bytes` in every window this long, or the import stops (408)
    pub window: Duration,
    /// the least bytes per window (at least 1: a silent client is stopped after one window)
    pub min_bytes: usize,
}

/// What a chunk did, in line order.
#[derive(Default)]
struct ChunkOutcome {
    inserted: u64,
    failures: Vec<(u64, ServiceError)>,
}

impl ImportReport {
    fn absorb(&mut self, outcome: ChunkOutcome) {
        self.inserted += outcome.inserted;
        for (line, e) in outcome.failures {
            self.failed += 1;
            if self.failures.len() < MAX_LISTED_FAILURES {
                self.failures.push(LineFailure { line, code: e.code(), detail: e.to_string() });
            }
        }
    }
}

type Chunk = Vec<(u64, Vec<u8>)>;
/// Lines that failed, with why.
type Failures = Vec<(u64, ServiceError)>;

/// What a chunk's items are: JSON lines, or CSV rows of this header.
#[derive(Debug, Clone)]
enum Rows {
    Json,
    Csv(Arc<Header>),
}

/// The body cut into lines or records as it arrives.
enum Splitter {
    Lines(LineSplitter),
    /// boxed: csv-core's reader holds its state machine's tables
    Csv(Box<CsvSplitter>),
}

impl Splitter {
    fn new(format: ImportFormat, max_line: usize) -> Self {
        match format {
            ImportFormat::Ndjson => Splitter::Lines(LineSplitter::new(max_line)),
            ImportFormat::Csv => Splitter::Csv(Box::new(CsvSplitter::new(max_line))),
        }
    }

    /// Feeds a piece of the body: its complete lines or rows go into `chunk`.
    fn push(&mut self, piece: &[u8], chunk: &mut Chunk, size: &mut usize) -> std::result::Result<(), SplitError> {
        match self {
            Splitter::Lines(s) => {
                s.push(piece, |no, line| push_line(chunk, size, no, line)).map_err(SplitError::TooLong)
            }
            Splitter::Csv(s) => s.push(piece, &mut |no, row| push_row(chunk, size, no, row)),
        }
    }

    /// Ends the body: its last line or row goes into `chunk`.
    fn finish(&mut self, chunk: &mut Chunk, size: &mut usize) -> std::result::Result<(), SplitError> {
        match self {
            Splitter::Lines(s) => {
                s.finish(|no, line| push_line(chunk, size, no, line));
                Ok(())
            }
            Splitter::Csv(s) => s.finish(&mut |no, row| push_row(chunk, size, no, row)),
        }
    }

    /// The number of the line not complete yet.
    fn next_line(&self) -> u64 {
        match self {
            Splitter::Lines(s) => s.next_line(),
            Splitter::Csv(s) => s.next_line(),
        }
    }

    /// What the chunks hold (a CSV body has rows only once its header is read).
    fn rows(&self) -> Rows {
        match self {
            Splitter::Lines(_) => Rows::Json,
            Splitter::Csv(s) => Rows::Csv(s.header().cloned().unwrap_or_default()),
        }
    }
}

/// The error that ends an import whose body could not be split further.
fn split_failed(e: SplitError, written: u64) -> ServiceError {
    match e {
        SplitError::TooLong(line) => ServiceError::LineTooLong { line, written },
        SplitError::Header(why) => ServiceError::InvalidRequest(format!("{why}; nothing was written")),
    }
}

/// A CSV row made a document (see [`csv`]) and checked against the table.
fn prepare_row(catalog: &Catalog, table: &TableDef, header: &Header, row: &[u8]) -> Result<Prepared> {
    let (id, doc) = csv::document(header, table, row)?;
    prepare(catalog, table, id.unwrap_or_else(new_id), doc)
}

/// Parses and encodes one line, under the text rules every write path shares
/// (`entity::check_text`). Schemaless document tables take the simd-json path straight into the
/// blob encoder (parsing a copy in `scratch`, since simd-json parses in place: a line it refuses is
/// parsed again, as it came, for a message that says where and why); typed and edge tables go
/// through serde_json and the schema check.
fn prepare_line(catalog: &Catalog, table: &TableDef, mut line: Vec<u8>, scratch: &mut Vec<u8>) -> Result<Prepared> {
    if crate::entity::check_text(&line, crate::entity::MAX_DEPTH)?.negative_zero {
        crate::entity::rewrite_negative_zero(&mut line);
    }
    if table.columns.is_some() || table.kind == TableKind::Edge {
        let mut de = serde_json::Deserializer::from_slice(&line);
        // check_text bounded the depth
        de.disable_recursion_limit();
        let value = serde::Deserialize::deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| malformed(&line, &e))?;
        let serde_json::Value::Object(mut doc) = value else {
            return Err(ServiceError::InvalidDocument("a line must hold a JSON object".into()));
        };
        let id = take_id(&mut doc, None)?.unwrap_or_else(new_id);
        return prepare(catalog, table, id, doc);
    }
    scratch.clear();
    scratch.extend_from_slice(&line);
    let mut value = simd_json::to_borrowed_value(scratch).map_err(|e| not_json(&line, &e))?;
    let Some(obj) = value.as_object_mut() else {
        return Err(ServiceError::InvalidDocument("a line must hold a JSON object".into()));
    };
    let id = match obj.remove("_id") {
        None => new_id(),
        Some(v) => {
            v.as_str().map(str::to_owned).ok_or_else(|| ServiceError::InvalidDocument("_id must be a string".into()))?
        }
    };
    check_id(&id)?;
    let blob = catalog
        .encode_simd_detached(&value, &EncodeOptions::default())
        .map_err(|e| ServiceError::InvalidDocument(e.to_string()))?;
    crate::service::core::expiry::check_blob(&blob, &catalog.dict())?;
    from_blob(catalog, table, id, blob, None)
}

/// What a chunk is committed with: the import's running count, and what its items are.
struct Job {
    running: Arc<Running>,
    rows: Rows,
}

/// Counts one import as running while alive. Shared (`Arc`) by the import's future and the task
/// committing the chunk it handed over, so an import counts until that chunk is written too, also
/// when the import's future is dropped: once it no longer counts, nothing more of it is written.
struct Running(Arc<Pipeline>);

impl Running {
    fn start(db: &Arc<Pipeline>) -> Arc<Running> {
        db.imports_running.fetch_add(1, Ordering::Relaxed);
        Arc::new(Running(db.clone()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.imports_running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a line's write failing with `e` fails that line only (the others are written).
fn fails_the_line_only(e: &ServiceError) -> bool {
    matches!(
        e,
        ServiceError::UniqueViolation { .. }
            | ServiceError::TooManyIndexEntries { .. }
            | ServiceError::InvalidDocument(_)
            | ServiceError::InvalidExpiry(_)
            | ServiceError::SchemaViolation { .. }
            | ServiceError::InvalidVector { .. }
            | ServiceError::TooLarge(_)
    )
}

impl Pipeline {
    /// Imports currently running.
    pub fn imports_running(&self) -> u64 {
        self.imports_running.load(Ordering::Relaxed)
    }

    /// Imports an NDJSON stream into `table`; a line longer than `limits.max_line` bytes, or a
    /// body that stalls, stops the import (what was committed before stays).
    pub async fn import<S, E>(self: &Arc<Self>, table: String, body: S, limits: ImportLimits) -> Result<ImportReport>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        self.import_as(table, ImportFormat::Ndjson, body, limits).await
    }

    /// Imports a stream of `format` into `table`: NDJSON as [`Pipeline::import`]; CSV a header row,
    /// then a document per row (a header that cannot name fields refuses the import, 400).
    pub async fn import_as<S, E>(
        self: &Arc<Self>,
        table: String,
        format: ImportFormat,
        mut body: S,
        limits: ImportLimits,
    ) -> Result<ImportReport>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let def = self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let running = Running::start(self);
        let job = |split: &Splitter| Job { running: running.clone(), rows: split.rows() };
        let mut report = ImportReport::default();
        let mut lines = Splitter::new(format, limits.max_line);
        let mut chunk: Chunk = Vec::new();
        let mut chunk_bytes = 0;
        let mut pending: Option<JoinHandle<Result<ChunkOutcome>>> = None;
        let min_bytes = limits.min_bytes.max(1);
        let mut window_end = Instant::now() + limits.window;
        let mut window_bytes = 0usize;
        loop {
            let next = match tokio::time::timeout_at(window_end, body.next()).await {
                Ok(next) => next,
                Err(_) if window_bytes >= min_bytes => {
                    window_end += limits.window;
                    window_bytes = 0;
                    continue;
                }
                Err(_) => {
                    self.finish(&table, &def, std::mem::take(&mut chunk), pending.take(), &mut report, &job(&lines))
                        .await?;
                    return Err(ServiceError::ImportStalled {
                        line: lines.next_line(),
                        written: report.inserted,
                        min_bytes,
                        window_secs: limits.window.as_secs(),
                    });
                }
            };
            match next {
                Some(Ok(bytes)) => {
                    window_bytes += bytes.len();
                    let now = Instant::now();
                    if now >= window_end {
                        window_end = now + limits.window;
                        window_bytes = 0;
                    }
                    if let Err(e) = lines.push(&bytes, &mut chunk, &mut chunk_bytes) {
                        self.finish(
                            &table,
                            &def,
                            std::mem::take(&mut chunk),
                            pending.take(),
                            &mut report,
                            &job(&lines),
                        )
                        .await?;
                        return Err(split_failed(e, report.inserted));
                    }
                }
                Some(Err(e)) => {
                    // The complete lines received so far are written; the error says how many.
                    self.finish(&table, &def, std::mem::take(&mut chunk), pending.take(), &mut report, &job(&lines))
                        .await?;
                    return Err(ServiceError::InvalidRequest(format!(
                        "reading the body failed at line {} ({} documents written): {e}",
                        lines.next_line(),
                        report.inserted
                    )));
                }
                None => break,
            }
            if chunk.len() >= CHUNK_LINES || chunk_bytes >= CHUNK_BYTES {
                chunk_bytes = 0;
                let next = self.commit_chunk(&table, &def, std::mem::take(&mut chunk), &job(&lines)).await?;
                if let Some(p) = pending.replace(next) {
                    report.absorb(join(p).await?);
                }
            }
        }
        let ended = lines.finish(&mut chunk, &mut chunk_bytes);
        self.finish(&table, &def, chunk, pending, &mut report, &job(&lines)).await?;
        ended.map_err(|e| split_failed(e, report.inserted))?;
        Ok(report)
    }

    /// Commits the last chunk and waits for every commit still under way.
    async fn finish(
        self: &Arc<Self>,
        table: &str,
        def: &Arc<TableDef>,
        chunk: Chunk,
        pending: Option<JoinHandle<Result<ChunkOutcome>>>,
        report: &mut ImportReport,
        job: &Job,
    ) -> Result<()> {
        if let Some(p) = pending {
            report.absorb(join(p).await?);
        }
        if !chunk.is_empty() {
            let last = self.commit_chunk(table, def, chunk, job).await?;
            report.absorb(join(last).await?);
        }
        Ok(())
    }

    /// Prepares a chunk on the blocking pool and starts committing its good lines, each in its own
    /// [`WriteTx::attempt`](crate::storage::WriteTx::attempt): a line the write refuses (a unique
    /// value taken, too many index entries) fails alone. A chunk prepared for columns the table no
    /// longer has (one was added meanwhile) is prepared again against the table the write sees, so
    /// no line misses a new column's default. The task resolves to what the chunk did.
    async fn commit_chunk(
        self: &Arc<Self>,
        table: &str,
        def: &Arc<TableDef>,
        lines: Chunk,
        job: &Job,
    ) -> Result<JoinHandle<Result<ChunkOutcome>>> {
        // a streamed import is held to its database's quota chunk by chunk, not only at its start
        self.core.check_quota()?;
        // After a column was added, later chunks are prepared for the table as it is now.
        let fresh = self.core.catalog.table(table).filter(|d| d.created_at == def.created_at);
        let def = fresh.as_ref().unwrap_or(def);
        // Only a typed table can change its columns under the import: keep its lines to prepare again.
        let kept = def.columns.is_some().then(|| lines.clone());
        let (good, failures) = self.prepare_chunk(def, lines, &job.rows).await?;
        let (db, table, def, running, rows) =
            (self.clone(), table.to_owned(), def.clone(), job.running.clone(), job.rows.clone());
        Ok(tokio::spawn(async move {
            // the import counts as running until this chunk is written
            let _running = running;
            let (mut def, mut good, mut failures) = (def, good, failures);
            loop {
                let mut outcome = if good.is_empty() {
                    ChunkOutcome::default()
                } else {
                    let (t, d) = (table.clone(), def.clone());
                    let written = db
                        .write(move |tx, db| {
                            let live = live_table(&db.core.catalog, &t, Some(&d))?;
                            if !same_schema(&live, &d) {
                                return Ok(Err(live));
                            }
                            let mut outcome = ChunkOutcome::default();
                            // the table's count moves once per chunk, not once per document
                            let mut added = 0;
                            for (no, p) in good {
                                match tx.attempt(|tx| put_uncounted(tx, &live, p, &Default::default())) {
                                    Ok((_, new)) => {
                                        outcome.inserted += 1;
                                        added += u64::from(new);
                                    }
                                    Err(e) if fails_the_line_only(&e) => outcome.failures.push((no, e)),
                                    Err(e) => return Err(e),
                                }
                            }
                            crate::service::core::counts::add(tx, &live.name, added)?;
                            Ok(Ok(outcome))
                        })
                        .await?;
                    match written {
                        Ok(outcome) => outcome,
                        Err(live) => {
                            let lines = kept.clone().ok_or_else(|| {
                                ServiceError::Internal("a schemaless table's definition changed under an import".into())
                            })?;
                            (good, failures) = db.prepare_chunk(&live, lines, &rows).await?;
                            def = live;
                            continue;
                        }
                    }
                };
                outcome.failures.append(&mut failures);
                outcome.failures.sort_by_key(|(no, _)| *no);
                return Ok(outcome);
            }
        }))
    }

    /// Parses and encodes a chunk's lines on the blocking pool: the good ones, and the failures.
    async fn prepare_chunk(
        self: &Arc<Self>,
        def: &Arc<TableDef>,
        lines: Chunk,
        rows: &Rows,
    ) -> Result<(Vec<(u64, Prepared)>, Failures)> {
        let (db, d, rows) = (self.clone(), def.clone(), rows.clone());
        let prepared = tokio::task::spawn_blocking(move || {
            let mut scratch = Vec::new();
            let mut prepared: Vec<_> = lines
                .into_iter()
                .map(|(no, line)| {
                    let prepared = match &rows {
                        Rows::Json => prepare_line(&db.core.catalog, &d, line, &mut scratch),
                        Rows::Csv(header) => prepare_row(&db.core.catalog, &d, header, &line),
                    };
                    (no, prepared)
                })
                .collect();
            plan_vectors_of(&db, &d, prepared.iter_mut().filter_map(|(_, p)| p.as_mut().ok()).collect());
            prepared
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("import task failed: {e}")))?;
        let mut good = Vec::with_capacity(prepared.len());
        let mut failures = Vec::new();
        for (no, p) in prepared {
            match p {
                Ok(p) => good.push((no, p)),
                Err(e) => failures.push((no, e)),
            }
        }
        Ok((good, failures))
    }
}

/// A CSV row, encoded by the splitter, into the chunk.
fn push_row(chunk: &mut Chunk, bytes: &mut usize, no: u64, row: &[u8]) {
    *bytes += row.len();
    chunk.push((no, row.to_vec()));
}

fn push_line(chunk: &mut Chunk, bytes: &mut usize, no: u64, line: &[u8]) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    *bytes += line.len();
    chunk.push((no, line.to_vec()));
}

async fn join(task: JoinHandle<Result<ChunkOutcome>>) -> Result<ChunkOutcome> {
    task.await.map_err(|e| ServiceError::Internal(format!("import commit failed: {e}")))?
}
