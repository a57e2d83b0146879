//! Connections to PostgreSQL: one client with the statements it prepared, a pool of them for
//! reads, and the lease a read view holds its connection by.
//!
//! The client is the `postgres` crate's blocking one (over `tokio-postgres`): the store's calls
//! are blocking by contract (the committer's thread, the blocking pool). It runs each call on a
//! small runtime of its own, which tokio refuses to start on a thread that drives async tasks;
//! [`blocking`] moves such a call off the worker first.

use super::super::error::{Result, StorageError};
use super::super::space::Space;
use postgres::{Client, NoTls, Statement};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Runs `f`, which blocks on the network, where blocking is allowed: on a worker thread of a
/// multi-threaded tokio runtime (a request's handler) the worker hands its tasks to another
/// first (`block_in_place`); inside a single-threaded runtime (a tool's, a test's), on a thread
/// of its own; elsewhere (the committer, the blocking pool) it just runs.
pub(crate) fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread => {
            std::thread::scope(|scope| match scope.spawn(f).join() {
                Ok(value) => value,
                Err(panic) => std::panic::resume_unwind(panic),
            })
        }
        _ => off_worker(f),
    }
}

/// Runs `f`, a wait that needs no runtime of its own, off a multi-threaded runtime's async
/// worker (see [`blocking`]); elsewhere in place.
fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Which statement of a keyspace (each prepared once per connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Query {
    Get,
    Contains,
    Upsert,
    Delete,
    /// a page of a scan: the bound kinds below and above, and the order
    Page {
        lower: Bound,
        upper: Bound,
        descending: bool,
    },
}

/// How a scan's page is bounded on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Bound {
    None,
    Inclusive,
    Exclusive,
}

/// The table holding a keyspace.
pub(super) fn table(space: Space) -> String {
    format!("mosaic_{}", space.name())
}

impl Query {
    fn sql(self, space: Space) -> String {
        let t = table(space);
        match self {
            Query::Get => format!("SELECT v FROM {t} WHERE k = $1"),
            Query::Contains => format!("SELECT 1 FROM {t} WHERE k = $1"),
            Query::Upsert => format!(
                "INSERT INTO {t} (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            ),
            Query::Delete => format!("DELETE FROM {t} WHERE k = ANY($1::bytea[])"),
            Query::Page { lower, upper, descending } => {
                // $1 the lower bound, $2 the upper, $3 the page's length (unused bounds unused)
                let mut conditions = Vec::new();
                match lower {
                    Bound::None => {}
                    Bound::Inclusive => conditions.push("k >= $1"),
                    Bound::Exclusive => conditions.push("k > $1"),
                }
                match upper {
                    Bound::None => {}
                    Bound::Inclusive => conditions.push("k <= $2"),
                    Bound::Exclusive => conditions.push("k < $2"),
                }
                // every parameter appears, so that each has a type: unused ones are compared
                // with themselves
                if lower == Bound::None {
                    conditions.push("$1::bytea IS NOT DISTINCT FROM $1::bytea");
                }
                if upper == Bound::None {
                    conditions.push("$2::bytea IS NOT DISTINCT FROM $2::bytea");
                }
                let order = if descending { "DESC" } else { "ASC" };
                format!("SELECT k, v FROM {t} WHERE {} ORDER BY k {order} LIMIT $3", conditions.join(" AND "))
            }
        }
    }
}

/// One connection and the statements it prepared.
pub(super) struct Conn {
    /// `None` only while the connection is dropped (see `Drop`)
    client: Option<Client>,
    statements: HashMap<(Space, Query), Statement>,
    /// a read view's transaction is open on it (rolled back before anything else uses it)
    pub(super) in_view: bool,
    /// the committer's: a group's transaction is open on it
    pub(super) in_group: bool,
    /// a statement of the open group failed: the group can only be rolled back
    pub(super) failed: bool,
    /// the keyspaces the open group wrote, a bit per `Space as usize`
    pub(super) touched: u32,
    /// the document keys the open group wrote, each as its length (u32, big-endian) and bytes
    /// (cluster mode: followers evict them from their document caches; see `lead.rs`)
    pub(super) documents: Vec<u8>,
}

impl Conn {
    pub(super) fn connect(config: &postgres::Config) -> Result<Conn> {
        let client = blocking(|| config.connect(NoTls))?;
        Ok(Conn {
            client: Some(client),
            statements: HashMap::new(),
            in_view: false,
            in_group: false,
            failed: false,
            touched: 0,
            documents: Vec::new(),
        })
    }

    /// The client.
    pub(super) fn client(&mut self) -> &mut Client {
        self.client.as_mut().expect("a connection's client is taken only as it is dropped")
    }

    /// Whether the server closed the connection (or it broke).
    pub(super) fn is_closed(&self) -> bool {
        self.client.as_ref().is_none_or(Client::is_closed)
    }

    /// The statement `query` of `space`, prepared on first use.
    pub(super) fn statement(&mut self, space: Space, query: Query) -> Result<Statement> {
        if let Some(s) = self.statements.get(&(space, query)) {
            return Ok(s.clone());
        }
        let prepared = blocking(|| self.client().prepare(&query.sql(space))).inspect_err(|_| {
            // in the committer's group, the failure aborted its transaction
            self.failed |= self.in_group;
        })?;
        self.statements.insert((space, query), prepared.clone());
        Ok(prepared)
    }

    /// Ends a read view's transaction if one is open.
    pub(super) fn end_view(&mut self) -> Result<()> {
        if self.in_view {
            blocking(|| self.client().batch_execute("ROLLBACK"))?;
            self.in_view = false;
        }
        Ok(())
    }
}

impl Drop for Conn {
    /// The client's own drop says goodbye to the server on the client's runtime, which tokio
    /// refuses to run inside another: inside one, it is dropped on a thread of its own.
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        if tokio::runtime::Handle::try_current().is_ok() {
            let _ = std::thread::Builder::new().name("mosaic-pg-close".into()).spawn(move || drop(client));
        }
    }
}

/// Connections for reads, opened as needed up to a bound; a caller past it waits for one.
pub(super) struct Pool {
    config: postgres::Config,
    idle: Mutex<PoolState>,
    freed: Condvar,
    max: usize,
}

struct PoolState {
    idle: Vec<Conn>,
    /// connections open (idle or leased)
    open: usize,
}

/// How long a read waits for a connection when all `max` are leased.
const CHECKOUT_WAIT: Duration = Duration::from_secs(30);

impl Pool {
    pub(super) fn new(config: postgres::Config, max: usize) -> Pool {
        Pool {
            config,
            idle: Mutex::new(PoolState { idle: Vec::new(), open: 0 }),
            freed: Condvar::new(),
            max: max.max(1),
        }
    }

    /// An idle connection, or a new one.
    pub(super) fn take(self: &Arc<Self>) -> Result<Lease> {
        let mut state = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Lease::pooled(conn, self.clone()));
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match Conn::connect(&self.config) {
                    Ok(conn) => Ok(Lease::pooled(conn, self.clone())),
                    Err(e) => {
                        self.closed_one();
                        Err(e)
                    }
                };
            }
            // a wait on a request's async worker hands the worker's tasks over first
            let (next, timeout) =
                off_worker(|| self.freed.wait_timeout(state, CHECKOUT_WAIT).unwrap_or_else(PoisonError::into_inner));
            state = next;
            if timeout.timed_out() && state.idle.is_empty() {
                return Err(StorageError::Backend(format!(
                    "no PostgreSQL connection came free within {CHECKOUT_WAIT:?} ({} in use)",
                    self.max
                )));
            }
        }
    }

    fn give_back(&self, conn: Conn) {
        let mut state = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        state.idle.push(conn);
        drop(state);
        self.freed.notify_one();
    }

    fn closed_one(&self) {
        let mut state = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        state.open -= 1;
        drop(state);
        self.freed.notify_one();
    }
}

/// A connection in use: the committer's own (never returned), or one taken from the pool and
/// given back when the lease ends — after its read view's transaction is rolled back, so that no
/// idle connection holds a snapshot (which would keep PostgreSQL's vacuum from old rows).
pub(crate) struct Lease {
    conn: Mutex<Option<Conn>>,
    pool: Option<Arc<Pool>>,
}

impl Lease {
    pub(super) fn own(conn: Conn) -> Lease {
        Lease { conn: Mutex::new(Some(conn)), pool: None }
    }

    fn pooled(conn: Conn, pool: Arc<Pool>) -> Lease {
        Lease { conn: Mutex::new(Some(conn)), pool: Some(pool) }
    }

    /// Runs `f` on the connection (one caller at a time).
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let conn = conn.as_mut().ok_or_else(|| StorageError::Engine("the PostgreSQL connection is gone".into()))?;
        f(conn)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else { return };
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        match conn {
            Some(mut conn) if !conn.is_closed() => match conn.end_view() {
                Ok(()) => pool.give_back(conn),
                Err(_) => pool.closed_one(),
            },
            _ => pool.closed_one(),
        }
    }
}

impl From<postgres::Error> for StorageError {
    /// The server's refusals of a statement are the engine's errors (a bug here); everything
    /// that says the server cannot serve — no connection, a lost one, a shutdown, no resources —
    /// is the backend's unavailability (503).
    fn from(e: postgres::Error) -> Self {
        if e.is_closed() {
            return StorageError::Backend(format!("the connection to PostgreSQL is closed: {e}"));
        }
        match e.as_db_error() {
            Some(db) => {
                let text = format!("PostgreSQL: {} ({})", db.message(), db.code().code());
                // classes 08 connection exception, 53 insufficient resources, 57 operator
                // intervention (a shutdown), 58 system error
                match &db.code().code()[..2] {
                    "08" | "53" | "57" | "58" => StorageError::Backend(text),
                    _ => StorageError::Engine(text),
                }
            }
            // I/O, a timeout, a protocol break: no answer from the server
            None => StorageError::Backend(format!("PostgreSQL: {e}")),
        }
    }
}
