//! SQL over every table, by Apache DataFusion: [`SqlEngine`] gives each database a catalog whose
//! relations are its tables (their shapes: [`catalog`]), parses, plans and runs one read-only
//! statement at a time, and hands back its columns and then its rows as JSON text.
//!
//! Tables are read through the query model's planner and streams (`scan.rs`), with the
//! conjuncts it can answer pushed down (`pushdown.rs`), so indexes serve SQL as they serve
//! `POST …/query`, and no table is ever held whole in memory.
//!
//! Bounds: statements run on a runtime of their own (two worker threads, made once), never on
//! the server's request runtime, and their rows come back over a bounded channel; a statement
//! draws on its own memory pool under a budget all share, without spilling (`memory.rs`); the
//! statement timeout covers planning, running and the hand-over of every row (planning cannot be
//! interrupted: past the deadline the caller is answered, and the statement ends when planning
//! returns); a receiver that goes away (a client gone) stops the statement at its next batch. How many statements run at
//! once is the API's admission control (`--max-heavy-reads`, class `sql`).

mod catalog;
mod error;
mod functions;
mod memory;
mod pushdown;
mod rows;
mod scan;
mod shape;
mod statement;

pub use error::SqlError;
pub use rows::{Column, JsonRows, RowWriter, is_json, json_value};

use crate::service::Db;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::config::Dialect;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement as AstStatement;
use error::Phase;
use functions::{AsOf, Function, ModelFunction};
use futures_util::StreamExt;
use memory::{SharedMemory, StatementPool};
use serde::Deserialize;
use serde_json::Value;
use statement::Statement;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use utoipa::ToSchema;

/// Longest statement text. With [`STACK_BYTES`] it bounds how deep DataFusion's passes recurse:
/// a left-deep chain `1 + 1 + …` of 20,000 terms overflowed an 8 MiB stack (about 400 bytes a
/// level), and 64 KiB of text holds at most about 32,000 levels.
pub const MAX_SQL_BYTES: usize = 64 << 10;
/// The stack of the engine's threads.
const STACK_BYTES: usize = 64 << 20;
/// Most parameters of one statement.
pub const MAX_PARAMS: usize = 1000;
/// Bytes of rows handed over at a time.
const PIECE_BYTES: usize = 256 << 10;

/// The bounds of SQL statements.
#[derive(Debug, Clone, Copy)]
pub struct SqlLimits {
    /// longest a statement may run, its answer included (`--sql-timeout-secs`)
    pub timeout: Duration,
    /// most memory one statement may hold (`--sql-memory-mb`)
    pub statement_memory: usize,
    /// most memory all statements together may hold (`--sql-total-memory-mb`)
    pub total_memory: usize,
}

impl Default for SqlLimits {
    /// 30 s, 256 MiB per statement, 1 GiB in all.
    fn default() -> Self {
        SqlLimits { timeout: Duration::from_secs(30), statement_memory: 256 << 20, total_memory: 1 << 30 }
    }
}

/// The body of `POST /v1/sql`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    /// one statement (PostgreSQL dialect): SELECT, WITH, VALUES, EXPLAIN, SHOW
    #[schema(example = "SELECT _id, doc->>'city' AS city FROM users WHERE (doc->>'age')::int >= $1")]
    pub sql: String,
    /// the values of `$1`, `$2` … (strings, numbers, booleans, null; arrays and objects as JSON text)
    #[serde(default)]
    #[schema(value_type = Vec<Object>, example = json!([18]))]
    pub params: Vec<Value>,
    /// false: no condition, projection or limit is handed to the tables' scans, DataFusion does
    /// it all (the same answer, slower; for comparisons)
    #[serde(default = "yes")]
    pub pushdown: bool,
}

fn yes() -> bool {
    true
}

/// A piece of a statement's answer.
#[derive(Debug)]
pub enum Piece {
    /// rows as the statement's [`RowWriter`] wrote them (with [`JsonRows`]: each a JSON array
    /// followed by `\n`)
    Rows(Vec<u8>),
    /// the end of the answer; `truncated`: rows past the cap were left out
    Done {
        /// rows past the cap were left out
        truncated: bool,
    },
}

/// A statement that planned: its columns, then its pieces. Dropping it stops the statement.
pub struct SqlAnswer {
    /// the columns of every row
    pub columns: Vec<Column>,
    /// the same columns as Arrow fields (their types exactly, a JSON column marked as such)
    pub fields: Vec<FieldRef>,
    /// the rows, then [`Piece::Done`]; an error instead if the statement fails on the way (the
    /// channel ending without `Done` means the statement was stopped)
    pub pieces: mpsc::Receiver<Result<Piece, SqlError>>,
}

/// One statement to run, as any front end hands it over.
pub struct Query {
    /// the statement's text
    pub sql: String,
    /// the values of `$1`, `$2` …
    pub params: Vec<ScalarValue>,
    /// conditions, projections and limits go to the tables' scans (false: DataFusion does it all)
    pub pushdown: bool,
    /// the rows past which the answer ends with `truncated` (`None`: every row)
    pub max_rows: Option<usize>,
    /// how rows are written into the pieces of the answer
    pub writer: Arc<dyn RowWriter>,
    /// held while the statement runs and dropped when it ends, however it ends (a front end's
    /// admission place, given back even when nobody reads the rest of the answer)
    pub hold: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// What a statement takes and gives, found without running it.
#[derive(Debug)]
pub struct Described {
    /// the type of each parameter `$1`, `$2` … as the planner inferred it (`None`: it could not)
    pub params: Vec<Option<DataType>>,
    /// the columns of its rows
    pub fields: Vec<FieldRef>,
}

/// Runs SQL statements over the databases, on a runtime of its own.
pub struct SqlEngine {
    runtime: Option<tokio::runtime::Runtime>,
    limits: SqlLimits,
    shared: Arc<SharedMemory>,
}

impl std::fmt::Debug for SqlEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlEngine").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl Drop for SqlEngine {
    /// The runtime stops without waiting (a runtime dropped inside another would panic).
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl SqlEngine {
    /// The engine and its runtime: two worker threads with room for deep plans (the stacks are
    /// reserved, not committed, until used).
    pub fn new(limits: SqlLimits) -> std::io::Result<SqlEngine> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(64)
            .thread_name("sql")
            .thread_stack_size(STACK_BYTES)
            .enable_all()
            .build()?;
        let shared = Arc::new(SharedMemory::new(limits.total_memory));
        Ok(SqlEngine { runtime: Some(runtime), limits, shared })
    }

    /// Runs `req` over `db` (named `name`): its columns once it planned, then its rows as JSON
    /// arrays, at most `max_rows` of them (`None`: all). An error before the first row comes
    /// back here.
    pub async fn run(
        &self,
        db: Arc<Db>,
        name: &str,
        req: SqlRequest,
        max_rows: Option<usize>,
    ) -> Result<SqlAnswer, SqlError> {
        if req.params.len() > MAX_PARAMS {
            return Err(SqlError::Invalid(format!("a statement takes at most {MAX_PARAMS} parameters")));
        }
        let params = req.params.iter().map(param).collect();
        let query =
            Query { sql: req.sql, params, pushdown: req.pushdown, max_rows, writer: Arc::new(JsonRows), hold: None };
        self.run_query(db, name, query).await
    }

    /// Runs `query` over `db` (named `name`): its columns once it planned, then its rows as its
    /// writer writes them. An error before the first row comes back here.
    pub async fn run_query(&self, db: Arc<Db>, name: &str, query: Query) -> Result<SqlAnswer, SqlError> {
        let (run, runtime) = self.prepare(db, name, query)?;
        let (first_tx, first_rx) = oneshot::channel();
        let (tx, rx) = mpsc::channel(2);
        runtime.spawn(run.drive(first_tx, tx));
        // Planning is synchronous inside DataFusion, so the statement's own timeout cannot
        // interrupt it: the answer is given here at the deadline all the same, and the
        // statement ends at its next await (`drive` sees its receiver gone).
        match tokio::time::timeout(self.limits.timeout, first_rx).await {
            Ok(Ok(Ok(fields))) => {
                let columns = fields.iter().map(|f| rows::column(f)).collect();
                Ok(SqlAnswer { columns, fields, pieces: rx })
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(SqlError::Failed("the statement was stopped".into())),
            Err(_) => Err(SqlError::Timeout(self.limits.timeout.as_secs())),
        }
    }

    /// The parameters `sql` takes and the columns it gives, planned over `db` (named `name`)
    /// but not run: table functions are not called (a statement whose shape depends on a
    /// parameter, `as_of($1, …)`, cannot be described).
    pub async fn describe(&self, db: Arc<Db>, name: &str, sql: &str) -> Result<Described, SqlError> {
        let query = Query {
            sql: sql.to_owned(),
            params: Vec::new(),
            pushdown: true,
            max_rows: None,
            writer: Arc::new(JsonRows),
            hold: None,
        };
        let (run, runtime) = self.prepare(db, name, query)?;
        let task = runtime.spawn(async move { run.logical(true).await.map(|(_, plan, _)| plan) });
        let plan = match tokio::time::timeout(self.limits.timeout, task).await {
            Ok(Ok(planned)) => planned?,
            Ok(Err(_)) => return Err(SqlError::Failed("the statement was stopped".into())),
            Err(_) => return Err(SqlError::Timeout(self.limits.timeout.as_secs())),
        };
        let types = plan.get_parameter_types().map_err(|e| error::classify(e, Phase::Plan, None, None))?;
        let mut params = Vec::new();
        for (id, ty) in types {
            let n = id.trim_start_matches('$').parse::<usize>().ok().filter(|n| (1..=MAX_PARAMS).contains(n));
            let Some(n) = n else {
                return Err(SqlError::Invalid(format!("{id} is not a parameter ($1 … ${MAX_PARAMS})")));
            };
            if params.len() < n {
                params.resize(n, None);
            }
            params[n - 1] = ty;
        }
        let fields = plan.schema().fields().iter().cloned().collect();
        Ok(Described { params, fields })
    }
}

impl SqlEngine {
    /// A statement ready to go on the engine's runtime: refused when its text is too long or
    /// it has too many parameters.
    fn prepare(&self, db: Arc<Db>, name: &str, query: Query) -> Result<(Run, &tokio::runtime::Runtime), SqlError> {
        if query.sql.len() > MAX_SQL_BYTES {
            return Err(SqlError::Invalid(format!("a statement is at most {MAX_SQL_BYTES} bytes")));
        }
        if query.params.len() > MAX_PARAMS {
            return Err(SqlError::Invalid(format!("a statement takes at most {MAX_PARAMS} parameters")));
        }
        let Some(runtime) = &self.runtime else { return Err(SqlError::Failed("the SQL engine is stopped".into())) };
        let pool = Arc::new(StatementPool::new(self.shared.clone(), self.limits.statement_memory));
        Ok((Run { db, catalog: name.to_owned(), query, limits: self.limits, pool }, runtime))
    }
}

/// One statement on its way.
struct Run {
    db: Arc<Db>,
    catalog: String,
    query: Query,
    limits: SqlLimits,
    pool: Arc<StatementPool>,
}

type First = oneshot::Sender<Result<Vec<FieldRef>, SqlError>>;
type Pieces = mpsc::Sender<Result<Piece, SqlError>>;

impl Run {
    async fn drive(self, mut first: First, tx: Pieces) {
        let deadline = Instant::now() + self.limits.timeout;
        let timeout = SqlError::Timeout(self.limits.timeout.as_secs());
        let planned = tokio::select! {
            () = first.closed() => return,
            planned = tokio::time::timeout_at(deadline, self.plan()) => planned,
        };
        let (mut stream, statement) = match planned {
            Ok(Ok(planned)) => planned,
            Ok(Err(e)) => return drop(first.send(Err(e))),
            Err(_) => return drop(first.send(Err(timeout))),
        };
        let fields = stream.schema().fields().iter().cloned().collect();
        if first.send(Ok(fields)).is_err() {
            return;
        }
        let mut sent = 0usize;
        loop {
            let next = tokio::select! {
                () = tx.closed() => return,
                next = tokio::time::timeout_at(deadline, stream.next()) => next,
            };
            let batch = match next {
                Err(_) => return last(&tx, Err(timeout), deadline).await,
                Ok(None) => return last(&tx, Ok(Piece::Done { truncated: false }), deadline).await,
                Ok(Some(Err(e))) => {
                    let e = error::classify(e, Phase::Run, statement.take_service(), self.pool.refusal());
                    return last(&tx, Err(e), deadline).await;
                }
                Ok(Some(Ok(batch))) => batch,
            };
            if batch.num_rows() == 0 {
                continue;
            }
            if self.query.max_rows.is_some_and(|max| sent >= max) {
                return last(&tx, Ok(Piece::Done { truncated: true }), deadline).await;
            }
            let end = self.query.max_rows.map_or(batch.num_rows(), |max| batch.num_rows().min(max - sent));
            let mut row = 0;
            while row < end {
                let mut text = Vec::with_capacity(PIECE_BYTES.min(1 << 16));
                let next = match self.query.writer.write(&batch, row, end, &mut text, PIECE_BYTES) {
                    Ok(next) => next,
                    Err(e) => return last(&tx, Err(error::classify(e, Phase::Run, None, None)), deadline).await,
                };
                (sent, row) = (sent + next - row, next);
                match tokio::time::timeout_at(deadline, tx.send(Ok(Piece::Rows(text)))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return,
                    Err(_) => return last(&tx, Err(SqlError::Timeout(self.limits.timeout.as_secs())), deadline).await,
                }
            }
            if end < batch.num_rows() {
                return last(&tx, Ok(Piece::Done { truncated: true }), deadline).await;
            }
        }
    }

    /// Parses, checks and plans the statement, and starts it.
    async fn plan(&self) -> Result<(SendableRecordBatchStream, Arc<Statement>), SqlError> {
        let (ctx, plan, statement) = self.logical(false).await?;
        let failed = |e| error::classify(e, Phase::Plan, statement.take_service(), self.pool.refusal());
        let frame = ctx.execute_logical_plan(plan).await.map_err(failed)?;
        let frame = frame.with_param_values(ParamValues::from(self.query.params.clone())).map_err(failed)?;
        let stream = frame
            .execute_stream()
            .await
            .map_err(|e| error::classify(e, Phase::Run, statement.take_service(), self.pool.refusal()))?;
        Ok((stream, statement))
    }

    /// Parses and checks the statement, and makes its logical plan (`describe`: for its shape
    /// only, the table functions not called).
    async fn logical(&self, describe: bool) -> Result<(SessionContext, LogicalPlan, Arc<Statement>), SqlError> {
        let fail = |e| error::classify(e, Phase::Plan, None, self.pool.refusal());
        let ctx = self.context().map_err(fail)?;
        let state = ctx.state();
        let parsed = state.sql_to_statement(&self.query.sql, &Dialect::PostgreSQL).map_err(fail)?;
        read_only(&parsed)?;
        let statement = Arc::new(Statement {
            pushdown: self.query.pushdown,
            explain: is_explain(&parsed),
            describe,
            params: self.query.params.clone(),
            service: Mutex::new(None),
        });
        for function in Function::ALL {
            let call = ModelFunction { function, db: self.db.clone(), statement: statement.clone() };
            ctx.register_udtf(function.name(), Arc::new(call));
        }
        ctx.register_udtf("as_of", Arc::new(AsOf { db: self.db.clone(), statement: statement.clone() }));
        let schema = catalog::DbSchema { db: self.db.clone(), statement: statement.clone() };
        let database = MemoryCatalogProvider::new();
        database.register_schema("public", Arc::new(schema)).map_err(fail)?;
        ctx.register_catalog(&self.catalog, Arc::new(database));
        let failed = |e| error::classify(e, Phase::Plan, statement.take_service(), self.pool.refusal());
        let plan = ctx.state().statement_to_plan(parsed).await.map_err(failed)?;
        SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false)
            .verify_plan(&plan)
            .map_err(|e| SqlError::ReadOnly(format!("SQL here only reads: {}", e.strip_backtrace())))?;
        Ok((ctx, plan, statement))
    }

    /// A session of its own for the statement: the PostgreSQL dialect, the JSON functions, the
    /// statement's memory pool, no disk.
    fn context(&self) -> datafusion::common::Result<SessionContext> {
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(self.pool.clone())
            .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled))
            .build_arc()?;
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(&self.catalog, "public")
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(true)
            .with_target_partitions(2)
            .with_batch_size(4096);
        config.options_mut().sql_parser.dialect = Dialect::PostgreSQL;
        let state =
            SessionStateBuilder::new().with_config(config).with_runtime_env(runtime).with_default_features().build();
        let mut ctx = SessionContext::new_with_state(state);
        datafusion_functions_json::register_all(&mut ctx)?;
        Ok(ctx)
    }
}

/// Hands over the last piece of an answer (its end, or an error) once there is room, waiting
/// until the deadline, and past it a second more so that a timeout still reaches a receiver
/// that reads (one that does not is gone, or will find the channel closed without an end).
async fn last(tx: &Pieces, piece: Result<Piece, SqlError>, deadline: Instant) {
    let until = deadline.max(Instant::now()) + Duration::from_secs(1);
    let _ = tokio::time::timeout_at(until, tx.send(piece)).await;
}

/// Refuses what is not a read: only queries (SELECT, WITH, VALUES), EXPLAIN of one, and SHOW /
/// DESCRIBE of the tables pass.
fn read_only(statement: &DfStatement) -> Result<(), SqlError> {
    fn ast(s: &AstStatement) -> bool {
        match s {
            AstStatement::Query(_)
            | AstStatement::ShowTables { .. }
            | AstStatement::ShowColumns { .. }
            | AstStatement::ExplainTable { .. } => true,
            AstStatement::Explain { statement, .. } => ast(statement),
            _ => false,
        }
    }
    let reads = match statement {
        DfStatement::Statement(s) => ast(s),
        DfStatement::Explain(e) => return read_only(&e.statement),
        _ => false,
    };
    match reads {
        true => Ok(()),
        false => Err(SqlError::ReadOnly(
            "SQL here only reads (SELECT, WITH, VALUES, EXPLAIN, SHOW): write and change tables with the REST routes"
                .into(),
        )),
    }
}

fn is_explain(statement: &DfStatement) -> bool {
    match statement {
        DfStatement::Explain(_) => true,
        DfStatement::Statement(s) => matches!(**s, AstStatement::Explain { .. }),
        _ => false,
    }
}

/// A JSON parameter as a SQL value.
pub fn param(v: &Value) -> ScalarValue {
    match v {
        Value::Null => ScalarValue::Null,
        Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => ScalarValue::Int64(Some(i)),
            (None, Some(u)) => ScalarValue::UInt64(Some(u)),
            _ => ScalarValue::Float64(n.as_f64()),
        },
        Value::String(s) => ScalarValue::Utf8(Some(s.clone())),
        other => ScalarValue::Utf8(Some(other.to_string())),
    }
}
