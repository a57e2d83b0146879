//! The database's settings.

/// Documents an index backfill or a view build handles per write unless
/// [`DbOptions::backfill_chunk`] says otherwise.
pub const BACKFILL_CHUNK: usize = 2000;
/// Keys a table or index purge removes per write unless [`DbOptions::purge_chunk`] says otherwise.
pub const PURGE_CHUNK: usize = 1000;

/// Service settings.
#[derive(Debug, Clone, Copy)]
pub struct DbOptions {
    /// a query with `allow_scan: false` refuses a full scan of a table with more documents
    pub scan_threshold: u64,
    /// resume unfinished index builds and table drops at open (off for offline tools such as
    /// `mosaicdb check`, which must not change the data they inspect)
    pub background_jobs: bool,
    /// a query's scan gives up (408 `request_timeout`) this long after it started; the server
    /// sets it to the request timeout, so no scan outlives its request
    pub query_timeout: Option<std::time::Duration>,
    /// documents an index backfill indexes per write
    pub backfill_chunk: usize,
    /// keys a table or index purge removes per write
    pub purge_chunk: usize,
    /// most bytes the in-memory graph adjacency may take (0: walks always read the keys)
    pub graph_memory_bytes: usize,
    /// most bytes one heavy read (PromQL, InfluxQL) may hold while it works (0: no budget);
    /// past it, 422 `query_too_large` (`--max-query-memory-mb`)
    pub max_query_bytes: usize,
}

/// [`DbOptions::graph_memory_bytes`] unless said otherwise: 2 GiB.
pub const GRAPH_MEMORY_BYTES: usize = 2 << 30;

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            scan_threshold: 1000,
            background_jobs: true,
            query_timeout: None,
            backfill_chunk: BACKFILL_CHUNK,
            purge_chunk: PURGE_CHUNK,
            graph_memory_bytes: GRAPH_MEMORY_BYTES,
            max_query_bytes: super::mem_budget::DEFAULT_MAX_QUERY_BYTES,
        }
    }
}
