//! `POST /v1/tables/{table}/import`: an NDJSON body, streamed — parsed and encoded a chunk at a
//! time on the blocking pool while the previous chunk commits. Each line is its own document:
//! good lines are written, bad ones reported by line number.

use super::documents::{Prepared, live_table, new_id, prepare, put_encoded, take_id};
use super::{Db, Result, ServiceError};
use crate::catalog::{Catalog, TableDef, TableKind};
use crate::entity::EncodeOptions;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use simd_json::prelude::*;
use std::sync::Arc;
use tokio::task::JoinHandle;
use utoipa::ToSchema;

/// Lines per commit.
const CHUNK_LINES: usize = 4096;
/// Bytes per commit.
const CHUNK_BYTES: usize = 4 << 20;
/// Failures listed in the report (all are counted).
const MAX_LISTED_FAILURES: usize = 1000;

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
    /// 1-based line number
    pub line: u64,
    /// error code, as in problem responses
    pub code: &'static str,
    /// what is wrong
    pub detail: String,
}

impl ImportReport {
    fn fail(&mut self, line: u64, e: &ServiceError) {
        self.failed += 1;
        if self.failures.len() < MAX_LISTED_FAILURES {
            self.failures.push(LineFailure { line, code: e.code(), detail: e.to_string() });
        }
    }
}

type Chunk = Vec<(u64, Vec<u8>)>;

/// Parses and encodes one line. Schemaless document tables take the simd-json path straight into
/// the blob encoder; typed and edge tables go through serde_json and the schema check.
fn prepare_line(catalog: &Catalog, table: &TableDef, mut line: Vec<u8>) -> Result<Prepared> {
    let invalid = |e: &dyn std::fmt::Display| ServiceError::InvalidDocument(format!("not a JSON object: {e}"));
    if table.columns.is_some() || table.kind == TableKind::Edge {
        let value: serde_json::Value = serde_json::from_slice(&line).map_err(|e| invalid(&e))?;
        let serde_json::Value::Object(mut doc) = value else {
            return Err(ServiceError::InvalidDocument("a line must hold a JSON object".into()));
        };
        let id = take_id(&mut doc, None)?.unwrap_or_else(new_id);
        return prepare(catalog, table, id, doc);
    }
    let mut value = simd_json::to_borrowed_value(&mut line).map_err(|e| invalid(&e))?;
    let Some(obj) = value.as_object_mut() else {
        return Err(ServiceError::InvalidDocument("a line must hold a JSON object".into()));
    };
    let id = match obj.remove("_id") {
        None => new_id(),
        Some(v) => {
            v.as_str().map(str::to_owned).ok_or_else(|| ServiceError::InvalidDocument("_id must be a string".into()))?
        }
    };
    super::documents::check_id(&id)?;
    let blob = catalog
        .encode_simd_detached(&value, &EncodeOptions::default())
        .map_err(|e| ServiceError::InvalidDocument(e.to_string()))?;
    Ok(Prepared { id, blob, edge: None })
}

impl Db {
    /// Imports an NDJSON stream into `table`; a line longer than `max_line` bytes stops the import
    /// (what was committed before it stays).
    pub async fn import<S, E>(self: &Arc<Self>, table: String, mut body: S, max_line: usize) -> Result<ImportReport>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let def = self.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let mut report = ImportReport::default();
        let mut carry: Vec<u8> = Vec::new();
        let mut chunk: Chunk = Vec::new();
        let mut chunk_bytes = 0;
        let mut line_no = 0u64;
        let mut pending: Option<JoinHandle<Result<u64>>> = None;
        let mut ended = false;
        while !ended {
            match body.next().await {
                Some(Ok(bytes)) => carry.extend_from_slice(&bytes),
                Some(Err(e)) => {
                    // The complete lines received so far are written; the error says how many.
                    self.finish(&table, &def, std::mem::take(&mut chunk), pending.take(), &mut report).await?;
                    return Err(ServiceError::InvalidRequest(format!(
                        "reading the body failed after line {line_no} ({} documents written): {e}",
                        report.inserted
                    )));
                }
                None => ended = true,
            }
            // Split off complete lines (and, at the end, the unterminated last one).
            let mut start = 0;
            let mut too_long = false;
            while let Some(pos) = carry[start..].iter().position(|&b| b == b'\n').map(|p| p + start) {
                if pos - start > max_line {
                    too_long = true;
                    break;
                }
                line_no += 1;
                push_line(&mut chunk, &mut chunk_bytes, line_no, &carry[start..pos]);
                start = pos + 1;
            }
            carry.drain(..start);
            if too_long || carry.len() > max_line {
                self.finish(&table, &def, std::mem::take(&mut chunk), pending.take(), &mut report).await?;
                return Err(ServiceError::LineTooLong { line: line_no + 1, written: report.inserted });
            }
            if ended && !carry.is_empty() {
                line_no += 1;
                push_line(&mut chunk, &mut chunk_bytes, line_no, &std::mem::take(&mut carry));
            }
            if chunk.len() >= CHUNK_LINES || chunk_bytes >= CHUNK_BYTES {
                let lines = std::mem::take(&mut chunk);
                chunk_bytes = 0;
                let next = self.commit_chunk(&table, &def, lines, &mut report).await?;
                if let Some(p) = pending.replace(next) {
                    report.inserted += join(p).await?;
                }
            }
        }
        self.finish(&table, &def, chunk, pending, &mut report).await?;
        Ok(report)
    }

    /// Commits the last chunk and waits for every commit still under way.
    async fn finish(
        self: &Arc<Self>,
        table: &str,
        def: &Arc<TableDef>,
        chunk: Chunk,
        pending: Option<JoinHandle<Result<u64>>>,
        report: &mut ImportReport,
    ) -> Result<()> {
        if let Some(p) = pending {
            report.inserted += join(p).await?;
        }
        if !chunk.is_empty() {
            let last = self.commit_chunk(table, def, chunk, report).await?;
            report.inserted += join(last).await?;
        }
        Ok(())
    }

    /// Prepares a chunk on the blocking pool, records its bad lines, and starts committing the
    /// good ones; the returned task resolves to the number written.
    async fn commit_chunk(
        self: &Arc<Self>,
        table: &str,
        def: &Arc<TableDef>,
        lines: Chunk,
        report: &mut ImportReport,
    ) -> Result<JoinHandle<Result<u64>>> {
        let (db, d) = (self.clone(), def.clone());
        let prepared = tokio::task::spawn_blocking(move || {
            lines.into_iter().map(|(no, line)| (no, prepare_line(&db.catalog, &d, line))).collect::<Vec<_>>()
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("import task failed: {e}")))?;
        let mut good = Vec::with_capacity(prepared.len());
        for (no, p) in prepared {
            match p {
                Ok(p) => good.push(p),
                Err(e) => report.fail(no, &e),
            }
        }
        let (db, table, def) = (self.clone(), table.to_owned(), def.clone());
        Ok(tokio::spawn(async move {
            let n = good.len() as u64;
            if n == 0 {
                return Ok(0);
            }
            db.write(move |tx, db| {
                let live = live_table(&db.catalog, &table, Some(&def))?;
                for p in good {
                    put_encoded(tx, &db.catalog, &live, p, &Default::default())?;
                }
                Ok(n)
            })
            .await
        }))
    }
}

fn push_line(chunk: &mut Chunk, bytes: &mut usize, no: u64, line: &[u8]) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    *bytes += line.len();
    chunk.push((no, line.to_vec()));
}

async fn join(task: JoinHandle<Result<u64>>) -> Result<u64> {
    task.await.map_err(|e| ServiceError::Internal(format!("import commit failed: {e}")))?
}
