//! Streamed queries: every match of a query, one JSON document per line, from one snapshot, in
//! bounded memory — for `Accept: application/x-ndjson` on the query and the document listing.
//!
//! The order is the one pages give. Where the scan yields it (`_id` order — also for a sort of
//! `["_id"]` alone —, a range scan's natural order, or a one-key sort served by a range index), results are written as the scan meets them.
//! Any other order needs the results in memory: their positions (sort values and id; for a
//! covered plan the key values too; the documents only as of a time (`as_of`), whose versions
//! cannot be read again by id — otherwise they are read again as they are written) are collected
//! before the answer starts, up to [`MAX_STREAM_SORT`] results and [`MAX_STREAM_SORT_BYTES`]. Beyond that, a requested sort is refused (422
//! `stream_sort_too_large`); without a sort, the query streams a
//! full scan in `_id` order instead, which checks every document against the filter and gives
//! the same results.

use super::Query;
use super::covered::Covered;
use super::matcher::{Hit, Matcher, Source};
use super::plan::{self, Access, SortKey};
use super::{MAX_LIMIT, Prepared, QueryRequest, check_fields, exec, split_view};
use crate::service::core::Handle;
use crate::service::core::cancel::{AbandonOnDrop, Stop};
use crate::service::core::filter::Filter;
use crate::service::{Result, ServiceError};
use std::io::{self, Write};
use std::sync::Arc;

/// Most results a stream sorts in memory.
pub const MAX_STREAM_SORT: usize = 10_000;
/// Most memory the results a stream sorts in memory may take (their sort values, ids and covered
/// values — sort values are as long as the documents' fields — and, as of a time, the documents).
pub const MAX_STREAM_SORT_BYTES: usize = 64 << 20;

/// A query planned for streaming; [`QueryStream::write_to`] writes its results.
pub struct QueryStream {
    query: Arc<Query>,
    table: String,
    filter: Filter,
    fields: Option<Vec<String>>,
    prepared: Prepared,
    /// results sorted in memory (positions only), when no scan gives the order
    sorted: Option<Vec<Hit>>,
    stop: Stop,
    abandon: Option<AbandonOnDrop>,
}

impl Query {
    /// Plans a query that streams every match: `limit`, `cursor` and `explain` are refused (400
    /// `invalid_request`), everything else is as for a page. The snapshot is taken here; a sort
    /// no scan gives is done here too (bounded), so that every error comes before the answer.
    pub async fn query_stream(self: &Arc<Self>, table: String, req: QueryRequest) -> Result<QueryStream> {
        for (given, what) in
            [(req.limit.is_some(), "limit"), (req.cursor.is_some(), "cursor"), (req.explain, "explain")]
        {
            if given {
                return Err(ServiceError::InvalidRequest(format!(
                    "a streamed query (Accept: application/x-ndjson) returns every match: {what} is for pages"
                )));
            }
        }
        let (view_name, rest) = split_view(req.filter.as_ref())?;
        let filter = match &rest {
            Some(f) => Filter::parse(f)?,
            None => Filter::And(Vec::new()),
        };
        let sort = plan::parse_sort(&req.sort)?;
        check_fields(req.fields.as_deref())?;
        let (stop, _abandon) = self.core.request_stop();
        let query = self.clone();
        self.read(move |this| {
            let mut prepared =
                this.prepare(&table, &filter, view_name.as_deref(), &sort, false, MAX_LIMIT, &req, true, &stop)?;
            // with `$view`, every candidate must match the view's filter too
            let filter = prepared.combined.take().unwrap_or(filter);
            let (stream_stop, abandon) = Stop::new(None);
            let mut stream = QueryStream {
                query,
                table,
                filter,
                fields: req.fields,
                prepared,
                sorted: None,
                stop: stream_stop,
                abandon: Some(abandon),
            };
            stream.order(!req.sort.is_empty(), req.allow_scan, &stop)?;
            Ok(stream)
        })
        .await
    }
}

impl QueryStream {
    /// The guard whose drop stops the stream at its next look (every few dozen keys): held by
    /// whatever receives the stream, so that a stream nobody reads any more stops reading.
    pub fn abandon_guard(&mut self) -> Option<AbandonOnDrop> {
        self.abandon.take()
    }

    /// Sorts in memory when the scan does not give the order (see the module doc).
    fn order(&mut self, sorted: bool, allow_scan: Option<bool>, stop: &Stop) -> Result<()> {
        let p = &self.prepared;
        if p.id_ordered || (p.sort_by_index && p.sort.len() == 1) {
            return Ok(());
        }
        let mut hits = Vec::new();
        let (mut over, mut bytes) = (None, 0usize);
        {
            let mut matcher = self.matcher();
            for cand in exec::candidates(&p.view, &self.table, &p.access, None, stop) {
                let Some(mut hit) = matcher.accept(cand?)? else { continue };
                if hits.len() >= MAX_STREAM_SORT {
                    over = Some(ServiceError::StreamSortTooLarge { max: MAX_STREAM_SORT });
                    break;
                }
                // (a version as of a time cannot be read again by id: it is kept)
                if let Source::Blob(_) = hit.source
                    && !matches!(p.access, Access::AsOf(_))
                {
                    hit.source = Source::Reread;
                }
                bytes = bytes.saturating_add(hit.kept_bytes());
                if bytes > MAX_STREAM_SORT_BYTES {
                    over = Some(ServiceError::StreamSortTooLargeBytes { max_bytes: MAX_STREAM_SORT_BYTES });
                    break;
                }
                hits.push(hit);
            }
        }
        let Some(too_large) = over else {
            hits.sort_unstable();
            self.sorted = Some(hits);
            return Ok(());
        };
        if sorted {
            return Err(too_large);
        }
        drop(hits);
        // `_id` order, from a full scan of the table
        if allow_scan == Some(false) && p.count > self.query.core.scan_threshold {
            return Err(ServiceError::ScanRefused {
                table: self.table.clone(),
                documents: p.count,
                threshold: self.query.core.scan_threshold,
            });
        }
        let p = &mut self.prepared;
        if !matches!(p.access, Access::AsOf(_)) {
            p.access = Access::FullScan;
        }
        (p.covered, p.id_ordered, p.sort_by_index) = (None, true, false);
        Ok(())
    }

    fn matcher(&self) -> Matcher<'_> {
        let p = &self.prepared;
        let sort: &[SortKey] = &p.sort;
        let covered: Option<&Covered> = p.covered.as_ref();
        let expiry = (p.expiry.as_ref(), p.now);
        Matcher::new(&p.view, expiry, &p.dict, &self.table, &p.access, &self.filter, sort, covered)
    }

    /// True when the results are built from index keys alone (no document is read).
    pub fn covered(&self) -> bool {
        self.prepared.covered.is_some()
    }

    /// Writes every result, each followed by a newline, to `out` (on the calling thread: reads
    /// block, so run it on the blocking pool), and returns how many. Ends at the first error of
    /// `out` (the receiver went away) or of the store, or once the abandon guard is dropped.
    pub fn write_to<W: Write>(mut self, mut out: W) -> io::Result<u64> {
        let fields = self.fields.take();
        let fields = fields.as_deref();
        let matcher = self.matcher();
        let mut written = 0u64;
        let mut line = |matcher: &Matcher<'_>, hit: &Hit| -> io::Result<()> {
            if let Some(doc) = matcher.render(hit, fields).map_err(io::Error::other)? {
                out.write_all(&doc)?;
                out.write_all(b"\n")?;
                written += 1;
            }
            Ok(())
        };
        match &self.sorted {
            Some(hits) => {
                for (i, hit) in hits.iter().enumerate() {
                    if i % 64 == 0 {
                        self.stop.check().map_err(io::Error::other)?;
                    }
                    line(&matcher, hit)?;
                }
            }
            None => {
                let p = &self.prepared;
                let mut matcher = matcher;
                for cand in exec::candidates(&p.view, &self.table, &p.access, None, &self.stop) {
                    let cand = cand.map_err(io::Error::other)?;
                    if let Some(hit) = matcher.accept(cand).map_err(io::Error::other)? {
                        line(&matcher, &hit)?;
                    }
                }
            }
        }
        out.flush()?;
        Ok(written)
    }
}
