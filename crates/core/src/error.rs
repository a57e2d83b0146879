//! The service layer's one error type; each variant has a stable machine-readable code.

use mosaic_catalog::CatalogError;
use mosaic_storage::StorageError;

/// Why a service call failed. `api` maps each variant to an HTTP status via [`ServiceError::code`].
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The table does not exist: create it first.
    #[error("table {0:?} does not exist")]
    TableNotFound(String),
    /// A table of that name exists already.
    #[error("table {0:?} already exists")]
    TableExists(String),
    /// The table was dropped and its keys are still being removed: retry shortly.
    #[error("table {0:?} is being dropped; retry shortly")]
    TableDropping(String),
    /// No database of that name (or the API key has no access to it).
    #[error("database {0:?} does not exist")]
    DatabaseNotFound(String),
    /// A database of that name exists already.
    #[error("database {0:?} already exists")]
    DatabaseExists(String),
    /// A database name breaks the naming rules (those of table names).
    #[error("invalid database name {name:?}: {reason}")]
    InvalidDatabaseName {
        /// the name given
        name: String,
        /// the rule it breaks
        reason: &'static str,
    },
    /// The server holds `--max-databases` databases already (`default` among them).
    #[error("the server holds its maximum of {max} databases (--max-databases): drop one first")]
    TooManyDatabases {
        /// the limit
        max: usize,
    },
    /// The database stores its quota of bytes or more: writes are refused until space is freed
    /// (deletes and drops go on).
    #[error("the database stores {used} bytes, at or over its quota of {quota}: delete or drop to free space")]
    QuotaExceeded {
        /// bytes stored
        used: u64,
        /// the quota
        quota: u64,
    },
    /// Databases other than `default` are not available in cluster mode.
    #[error("databases other than \"default\" are not available in cluster mode")]
    DatabasesInCluster,
    /// A table name breaks the naming rules.
    #[error("invalid table name {name:?}: {reason}")]
    InvalidTableName {
        /// the name given
        name: String,
        /// the rule it breaks
        reason: &'static str,
    },
    /// A document id breaks the rules (empty, or longer than 1024 bytes).
    #[error("invalid document id: {0}")]
    InvalidId(&'static str),
    /// No index of that name on the table.
    #[error("index {index:?} does not exist on table {table:?}")]
    IndexNotFound {
        /// table name
        table: String,
        /// index name
        index: String,
    },
    /// An index of that name exists already.
    #[error("index {index:?} already exists on table {table:?}")]
    IndexExists {
        /// table name
        table: String,
        /// index name
        index: String,
    },
    /// An index of that name was dropped and its entries are still being removed: retry shortly.
    #[error("index {index:?} of table {table:?} is being dropped; retry shortly")]
    IndexDropping {
        /// table name
        table: String,
        /// index name
        index: String,
    },
    /// No view of that name on the table.
    #[error("view {view:?} does not exist on table {table:?}")]
    ViewNotFound {
        /// table name
        table: String,
        /// view name
        view: String,
    },
    /// A view of that name exists already.
    #[error("view {view:?} already exists on table {table:?}")]
    ViewExists {
        /// table name
        table: String,
        /// view name
        view: String,
    },
    /// A view of that name was dropped and its keys are still being removed: retry shortly.
    #[error("view {view:?} of table {table:?} is being dropped; retry shortly")]
    ViewDropping {
        /// table name
        table: String,
        /// view name
        view: String,
    },
    /// The view is still building (or its build failed): it can be read once it is ready.
    #[error("view {view:?} of table {table:?} is not ready: see its state with GET …/views/{view}")]
    ViewNotReady {
        /// table name
        table: String,
        /// view name
        view: String,
    },
    /// A view definition (or a use of a view) that cannot be served.
    #[error("invalid view: {0}")]
    InvalidView(String),
    /// A document would touch more keys of one group view than a document may.
    #[error(
        "the document would touch {keys} keys of view {view:?}; a document may touch at most 1000 (its groups times one plus its distinct min/max values)"
    )]
    TooManyViewKeys {
        /// view name
        view: String,
        /// how many it would touch
        keys: String,
    },
    /// No metric of that name: write a point (or set a retention) first.
    #[error("metric {0:?} does not exist")]
    MetricNotFound(String),
    /// The metric is being deleted: retry once the delete has finished.
    #[error("metric {0:?} is being deleted; retry shortly")]
    MetricDropping(String),
    /// History turned on again before the history turned off was removed (the next retention
    /// run removes it): what was kept no longer follows the documents.
    #[error(
        "the history of table {0:?} that was turned off is still being removed: turn it on again once the \
         history_retention task has run"
    )]
    HistoryPurging(String),
    /// Line protocol that does not parse: every bad line with its number; nothing was written.
    #[error("{}", describe_lines(.0))]
    InvalidLines(Vec<LineError>),
    /// An aggregation would answer with more buckets than allowed: widen `step` or narrow the window.
    #[error("the aggregation would return more than {0} buckets: widen step or narrow from/to")]
    TooManyBuckets(usize),
    /// A PromQL query would read or produce more samples, series or steps than a query may.
    #[error("{0}")]
    QueryTooLarge(String),
    /// A PromQL operation left two series of an instant vector with the same labels at one step
    /// (a function or an operator dropped the metric name that told them apart).
    #[error("vector cannot contain metrics with the same labelset: {0}")]
    DuplicateLabelset(String),
    /// A search query that does not parse; `position` counts characters from 0.
    #[error("invalid search query at character {position}: {reason}")]
    InvalidQuery {
        /// where the problem starts
        position: usize,
        /// what is wrong
        reason: String,
    },
    /// The table has no fulltext index (or several, and the request named none).
    #[error("{0}")]
    NoSearchIndex(String),
    /// The table has no ready vector index on the field a vector search names.
    #[error("{0}")]
    NoVectorIndex(String),
    /// A document's value for a vector index's field is not a vector the index takes; nothing
    /// was written.
    #[error("field {field:?} of a vector index: {reason}")]
    InvalidVector {
        /// the indexed field
        field: String,
        /// what is wrong with it
        reason: String,
    },
    /// A unique index already maps the value to another document; nothing was written.
    #[error("unique index {index:?}: {detail}")]
    UniqueViolation {
        /// index name
        index: String,
        /// which value, held by which document
        detail: String,
    },
    /// No document with that id.
    #[error("document {id:?} not found in table {table:?}")]
    DocumentNotFound {
        /// table name
        table: String,
        /// document id
        id: String,
    },
    /// The body is not a usable document (not an object, `_id` not a string, …).
    #[error("invalid document: {0}")]
    InvalidDocument(String),
    /// An import line that is not JSON text: where the text stops being JSON, and why.
    #[error("malformed JSON at byte {at} ({found}): {message}")]
    MalformedJson {
        /// the 0-based byte offset in the line
        at: usize,
        /// the character there, quoted, or "the end of the line"
        found: String,
        /// what the parser expected there
        message: String,
    },
    /// The document would have more entries in one index than a document may have.
    #[error(
        "the document would have {entries} entries in index {index:?}; a document may have at most 1000 per index (array lengths multiply in a composite index)"
    )]
    TooManyIndexEntries {
        /// index name
        index: String,
        /// how many it would have
        entries: String,
    },
    /// A document's `_expires_at` is not a time (RFC 3339 string or integer epoch milliseconds).
    #[error("invalid expiry: {0}")]
    InvalidExpiry(String),
    /// A cursor that this query (table, filter and sort) did not hand out.
    #[error("invalid cursor: {0}")]
    InvalidCursor(String),
    /// A filter or sort over one of the documented query limits.
    #[error("query too complex: {0}")]
    QueryTooComplex(String),
    /// A streamed query's sort needs every result in memory (no index scan gives that order),
    /// and more documents match than a stream sorts in memory.
    #[error(
        "the sort of this streamed query needs more than {max} matching documents in memory: sort by a range-indexed field, narrow the filter, or read pages"
    )]
    StreamSortTooLarge {
        /// the most documents a stream sorts in memory
        max: usize,
    },
    /// A streamed query's sort needs its results in memory, and their sort values take more than
    /// a stream may hold.
    #[error(
        "the sort of this streamed query needs more than {max_bytes} bytes of sort values in memory: sort by a range-indexed field, sort by shorter fields, narrow the filter, or read pages"
    )]
    StreamSortTooLargeBytes {
        /// the most bytes a stream sorts in memory
        max_bytes: usize,
    },
    /// The request was abandoned (timed out or the client went away) while its scan ran.
    #[error("the request was abandoned before its scan finished")]
    Abandoned,
    /// A typed table rejected a field.
    #[error("field {field:?}: {reason}")]
    SchemaViolation {
        /// the offending field
        field: String,
        /// what is wrong with it
        reason: String,
    },
    /// The JSON text breaks a rule every write path enforces (a repeated key, a number that
    /// cannot be stored exactly); nothing was written.
    #[error("{0}")]
    Json(mosaic_entity::TextError),
    /// The import body stopped arriving (or crawls below the minimum rate); the lines before were
    /// written.
    #[error(
        "the import body stalled: under {min_bytes} bytes arrived in {window_secs} s; {written} documents before line {line} were written"
    )]
    ImportStalled {
        /// 1-based number of the line being received
        line: u64,
        /// documents written
        written: u64,
        /// the least a window must bring
        min_bytes: usize,
        /// the window, in seconds
        window_secs: u64,
    },
    /// The changefeed no longer holds the events after `since`: retention removed them.
    #[error(
        "the changefeed no longer holds the events after seq {since}: the oldest kept is {oldest}; resync and follow from there"
    )]
    ChangefeedExpired {
        /// the `since` asked for
        since: u64,
        /// the oldest seq that may be asked for (pass `oldest - 1` as `since`)
        oldest: u64,
    },
    /// `since` is past the last event: the feed was reset under the consumer (a restore of an
    /// older backup, or events lost with the OS in buffered mode). Resume from `last` or resync.
    #[error(
        "since {since} is past the last change event {last}: the feed was reset (a restore, or events lost in buffered mode); resume from {last} or resync"
    )]
    ChangefeedAhead {
        /// the `since` asked for
        since: u64,
        /// the last event seq there is
        last: u64,
    },
    /// A request parameter or body field is out of its allowed range.
    #[error("{0}")]
    InvalidRequest(String),
    /// A filter, sort or projection does not parse.
    #[error("invalid filter: {0}")]
    InvalidFilter(String),
    /// The query needs a full scan, and `allow_scan: false` forbids it on a table this large.
    #[error(
        "the query needs a full scan of table {table:?} ({documents} documents, more than the threshold {threshold}) and allow_scan is false: add an index or allow the scan"
    )]
    ScanRefused {
        /// table name
        table: String,
        /// its document count
        documents: u64,
        /// the server's threshold
        threshold: u64,
    },
    /// The request's precondition (`If-Match` / `If-None-Match`) does not hold.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// One operation of a batch failed, so none was written.
    #[error("operation {index} failed, nothing was written: {source}")]
    BatchFailed {
        /// 0-based position of the failing operation
        index: usize,
        /// why it failed
        #[source]
        source: Box<ServiceError>,
    },
    /// An import line is longer than the body limit; the lines before it were written.
    #[error(
        "line {line} is longer than the server accepts (--max-body-mb); {written} documents before it were written"
    )]
    LineTooLong {
        /// 1-based line number
        line: u64,
        /// documents written before it
        written: u64,
    },
    /// The vertex has an edge in an edge table whose `on_vertex_delete` is `reject`.
    #[error("vertex {vertex:?} has edges in a reject edge table (e.g. {edge:?}): delete them first")]
    VertexHasEdges {
        /// the vertex, `"table/id"`
        vertex: String,
        /// one of its edges, `"edge_table/id"`
        edge: String,
    },
    /// Deleting the vertex would cascade to more edges than one write deletes.
    #[error("deleting vertex {vertex:?} would cascade to more than {limit} edges: delete its edges in batches first")]
    TooManyEdges {
        /// the vertex, `"table/id"`
        vertex: String,
        /// the cascade limit
        limit: usize,
    },
    /// No path joins the two vertices (along the given edge tables and direction).
    #[error("no path from {from:?} to {to:?}")]
    NoPath {
        /// the start vertex
        from: String,
        /// the target vertex
        to: String,
    },
    /// A walk reached more adjacency entries than its `max_visited`.
    #[error(
        "the walk read more than max_visited = {0} adjacency entries: narrow it (depth, edges, filters) or raise max_visited"
    )]
    MaxVisited(usize),
    /// An edge's weight is missing, not a number, or negative.
    #[error("invalid weight: {0}")]
    InvalidWeight(String),
    /// Cluster mode: this server follows; writes go to the leader (`not_leader`: a redirect to
    /// the leader, or 503 while no leader is known). Nothing was written.
    #[error("this server follows the cluster's leader: writes go to the leader")]
    NotLeader,
    /// A read asked (`X-Mosaic-Min-Seq`) for a state this server had not applied within the wait.
    #[error("this server has applied state {applied}, not yet {wanted}: retry, or read from the leader")]
    Lagging {
        /// the state asked for
        wanted: u64,
        /// the last state applied
        applied: u64,
    },
    /// A document names a field this server has not read the name of yet: a cluster follower
    /// that has not applied the leader's latest field names (`lagging`: retry in a moment).
    #[error("the document uses field {0}, whose name this server has not read yet: retry in a moment")]
    FieldsBehind(u32),
    /// The store cannot answer: it refuses writes, poisoned after a disk failure (`store_failed`),
    /// its disk nearly full (`insufficient_storage`), its committer stopped or shutting down
    /// (`unavailable`); or a read from disk failed (`io_error`) or found damaged data
    /// (`data_corrupted`), which is never served.
    #[error("{0}")]
    Unavailable(StorageError),
    /// A write passed a limit of the storage backend: a key too long (`key_too_large`: a value a
    /// key is made of, such as an indexed field), a value or a write too large
    /// (`value_too_large`, `commit_too_large`). Nothing of it was written.
    #[error("{0}")]
    TooLarge(mosaic_storage::TooLarge),
    /// A model read keys of its own that do not decode (`data_corrupted`, as storage answers a
    /// damaged block): `family` names the key family, `what` what was damaged. Never served;
    /// logged, and `mosaicdb check` says where.
    #[error("damaged {family} data: {what}")]
    Damaged {
        /// the key family (`hist`, `ftidx`, `view`, `ts` …)
        family: &'static str,
        /// what did not decode, and where
        what: String,
    },
    /// Anything else: a bug. Logged; details stay out of responses.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ServiceError {
    /// Damaged data of key family `family` (see [`ServiceError::Damaged`]).
    pub fn damaged(family: &'static str, what: impl Into<String>) -> ServiceError {
        ServiceError::Damaged { family, what: what.into() }
    }

    /// True for a write refused because the disk is nearly full (it may succeed once space is
    /// freed).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, ServiceError::Unavailable(StorageError::DiskFull { .. }))
    }

    /// The stable error code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::TableNotFound(_) => "table_not_found",
            ServiceError::TableExists(_) => "table_exists",
            ServiceError::TableDropping(_) => "table_dropping",
            ServiceError::DatabaseNotFound(_) => "database_not_found",
            ServiceError::DatabaseExists(_) => "database_exists",
            ServiceError::InvalidDatabaseName { .. } => "invalid_database_name",
            ServiceError::TooManyDatabases { .. } => "too_many_databases",
            ServiceError::DatabasesInCluster => "cluster_mode",
            ServiceError::QuotaExceeded { .. } => "quota_exceeded",
            ServiceError::InvalidTableName { .. } => "invalid_table_name",
            ServiceError::InvalidId(_) => "invalid_id",
            ServiceError::DocumentNotFound { .. } => "document_not_found",
            ServiceError::IndexNotFound { .. } => "index_not_found",
            ServiceError::IndexExists { .. } => "index_exists",
            ServiceError::IndexDropping { .. } => "index_dropping",
            ServiceError::ViewNotFound { .. } => "view_not_found",
            ServiceError::ViewExists { .. } => "view_exists",
            ServiceError::ViewDropping { .. } => "view_dropping",
            ServiceError::ViewNotReady { .. } => "view_not_ready",
            ServiceError::InvalidView(_) => "invalid_view",
            ServiceError::TooManyViewKeys { .. } => "too_many_view_keys",
            ServiceError::InvalidQuery { .. } => "invalid_query",
            ServiceError::MetricNotFound(_) => "metric_not_found",
            ServiceError::MetricDropping(_) => "metric_dropping",
            ServiceError::HistoryPurging(_) => "history_purging",
            ServiceError::InvalidLines(_) => "invalid_line_protocol",
            ServiceError::TooManyBuckets(_) => "too_many_buckets",
            ServiceError::QueryTooLarge(_) => "query_too_large",
            ServiceError::DuplicateLabelset(_) => "duplicate_labelset",
            ServiceError::NoSearchIndex(_) => "no_search_index",
            ServiceError::NoVectorIndex(_) => "no_vector_index",
            ServiceError::InvalidVector { .. } => "invalid_vector",
            ServiceError::UniqueViolation { .. } => "unique_violation",
            ServiceError::InvalidDocument(_) => "invalid_document",
            ServiceError::MalformedJson { .. } => "malformed_json",
            ServiceError::SchemaViolation { .. } => "schema_violation",
            ServiceError::Json(mosaic_entity::TextError::DuplicateKey(_)) => "duplicate_key",
            ServiceError::Json(mosaic_entity::TextError::InvalidNumber(..)) => "invalid_number",
            ServiceError::Json(mosaic_entity::TextError::TooDeep(_)) => "invalid_document",
            ServiceError::ImportStalled { .. } => "request_timeout",
            ServiceError::TooManyIndexEntries { .. } => "too_many_index_entries",
            ServiceError::InvalidExpiry(_) => "invalid_expiry",
            ServiceError::InvalidCursor(_) => "invalid_cursor",
            ServiceError::QueryTooComplex(_) => "query_too_complex",
            ServiceError::StreamSortTooLarge { .. } | ServiceError::StreamSortTooLargeBytes { .. } => {
                "stream_sort_too_large"
            }
            ServiceError::Abandoned => "request_timeout",
            ServiceError::InvalidRequest(_) => "invalid_request",
            ServiceError::ChangefeedExpired { .. } => "changefeed_expired",
            ServiceError::ChangefeedAhead { .. } => "changefeed_ahead",
            ServiceError::InvalidFilter(_) => "invalid_filter",
            ServiceError::ScanRefused { .. } => "scan_refused",
            ServiceError::PreconditionFailed(_) => "precondition_failed",
            ServiceError::BatchFailed { source, .. } => source.code(),
            ServiceError::LineTooLong { .. } => "payload_too_large",
            ServiceError::VertexHasEdges { .. } => "vertex_has_edges",
            ServiceError::TooManyEdges { .. } => "too_many_edges",
            ServiceError::NoPath { .. } => "no_path",
            ServiceError::MaxVisited(_) => "max_visited_exceeded",
            ServiceError::InvalidWeight(_) => "invalid_weight",
            ServiceError::TooLarge(t) => match t.what {
                mosaic_storage::Limit::Key => "key_too_large",
                mosaic_storage::Limit::Value => "value_too_large",
                mosaic_storage::Limit::Commit => "commit_too_large",
            },
            ServiceError::NotLeader => "not_leader",
            ServiceError::Lagging { .. } | ServiceError::FieldsBehind(_) => "lagging",
            ServiceError::Unavailable(StorageError::Deposed) => "not_leader",
            ServiceError::Unavailable(StorageError::DiskFull { .. }) => "insufficient_storage",
            ServiceError::Unavailable(StorageError::Poisoned) => "store_failed",
            ServiceError::Unavailable(StorageError::Recovering { .. }) => "store_recovering",
            ServiceError::Unavailable(StorageError::Corrupt(_)) => "data_corrupted",
            ServiceError::Unavailable(StorageError::Io { .. }) => "io_error",
            ServiceError::Unavailable(StorageError::Backend(_)) => "backend_unavailable",
            ServiceError::Unavailable(_) => "unavailable",
            ServiceError::Damaged { .. } => "data_corrupted",
            ServiceError::Internal(_) => "internal",
        }
    }
}

// Defined here, with the error that carries it, so that this file imports no model (`timeseries`
// re-exports it). Its doc comment is its OpenAPI description.
/// One refused line: its 1-based number and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct LineError {
    /// the line's number, counting from 1
    pub line: usize,
    /// why it was refused
    pub error: String,
}

/// The detail of [`ServiceError::InvalidLines`]: the first bad lines (all of them are in the
/// problem's `lines`).
fn describe_lines(lines: &[LineError]) -> String {
    let shown: Vec<String> = lines.iter().take(10).map(|l| format!("line {}: {}", l.line, l.error)).collect();
    let more = lines.len().saturating_sub(shown.len());
    let tail = if more > 0 { format!("; and {more} more") } else { String::new() };
    format!("{} bad line(s), nothing written: {}{tail}", lines.len(), shown.join("; "))
}

impl From<mosaic_entity::TextError> for ServiceError {
    fn from(e: mosaic_entity::TextError) -> Self {
        match e {
            // the same words as the encoder's refusal of a too deep document
            mosaic_entity::TextError::TooDeep(_) => ServiceError::InvalidDocument(e.to_string()),
            other => ServiceError::Json(other),
        }
    }
}

impl From<StorageError> for ServiceError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::NotLeader => ServiceError::NotLeader,
            StorageError::Poisoned
            | StorageError::Recovering { .. }
            | StorageError::Deposed
            | StorageError::Closed
            | StorageError::CommitterDown
            | StorageError::DiskFull { .. }
            | StorageError::Corrupt(_)
            | StorageError::Backend(_)
            | StorageError::Io { .. } => ServiceError::Unavailable(e),
            StorageError::TooLarge(t) => ServiceError::TooLarge(t),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

impl From<CatalogError> for ServiceError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Storage(s) => s.into(),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

impl From<mosaic_entity::Error> for ServiceError {
    fn from(e: mosaic_entity::Error) -> Self {
        match e {
            // a follower's field names are a poll behind the leader's: a document naming a
            // field the leader added in that moment is answered once they are read
            mosaic_entity::Error::UnknownFieldId(id) => ServiceError::FieldsBehind(id),
            other => ServiceError::Internal(format!("entity codec: {other}")),
        }
    }
}

/// Service result.
pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
