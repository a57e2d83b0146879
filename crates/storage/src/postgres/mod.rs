//! The PostgreSQL backend: one table per keyspace (`k bytea PRIMARY KEY, v bytea`; bytea
//! compares as unsigned bytes, shorter first, which is the store's key order), in the database
//! the URL names.
//!
//! - **Writes.** The committer has a connection of its own. A group's writes run in one
//!   transaction on it, so each write reads what the earlier ones of its group wrote, and the
//!   group's `COMMIT` (with `synchronous_commit = on`: after PostgreSQL's WAL flush) is what makes
//!   it durable; only then is any of it answered. The same transaction sets the row of
//!   `mosaic_store` to the number of the state the group publishes (see [`Postgres::end_group`]).
//! - **Read views.** Each view is a `REPEATABLE READ READ ONLY` transaction on a pooled
//!   connection; its first statement reads that row back, which names the published state (and
//!   so the derived state) its snapshot is exactly (see `Store::snapshot`).
//! - **Point reads** outside a view are single statements on a pooled connection: the latest
//!   committed value, which is durable.
//! - **Scans** page by key (`scan.rs`).
//!
//! Limits: a B-tree index entry holds at most 2704 bytes (a third of an 8 KiB page, less its
//! headers), so keys are kept to 2560; a value is a `bytea`, at most 1 GiB, and one protocol
//! message must hold it: values to 512 MiB.

mod conn;
mod lead;
mod scan;

pub(super) use conn::Lease;
pub(crate) use conn::blocking;
pub(super) use scan::PgIter;

use super::cluster::{Leadership, Role};
use super::config::Durability;
use super::error::{Result, StorageError};
use super::limits::Limits;
use super::range::KeyRange;
use super::slice::Slice;
use super::space::Space;
use super::stats::{FamilyStats, StoreStats};
use conn::{Conn, Pool, Query, table};
use lead::STORE_TABLE;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

/// Most pooled connections for reads.
const MAX_READERS: usize = 64;

/// Tables with fewer rows than this (by PostgreSQL's estimate) are counted for their statistics.
const EXACT_COUNT: u64 = 100_000;

/// Most key and value bytes one statement of a batch carries (a larger value goes alone).
const STATEMENT_BYTES: usize = 32 << 20;

/// An open PostgreSQL backend (cheap to clone).
#[derive(Clone)]
pub(super) struct Postgres {
    pool: Arc<Pool>,
    /// the committer's connection
    writer: Arc<Lease>,
    /// the committer's thread (a view taken on it reads through the committer's connection)
    committer: Arc<OnceLock<std::thread::ThreadId>>,
    /// how to connect, and the committer's session settings (for a reconnection)
    reconnect: Arc<(postgres::Config, String)>,
    /// what this server is on the database
    role: Role,
    /// the epoch this server took as it took the lead (0 for a follower)
    epoch: u64,
    /// see [`Postgres::found_state`]
    found_state: u64,
    /// a cluster leader's: the state of the last group whose document keys it logged
    last_logged: Arc<std::sync::atomic::AtomicU64>,
    /// the advisory lock of this server's database (see [`lead::lock_key`])
    lock_key: i64,
}

/// How long an open waits for the database's lock outside cluster mode (a server just stopped
/// may still be closing its connections).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The committer's connection: its session settings, and, if it got it, the database's lock,
/// which it holds for as long as it lives — so that one server (or tool) at a time writes the
/// database, as fjall locks its directory: the committer's caches are exact only for the one
/// writer. Outside cluster mode the lock is waited for ([`LOCK_WAIT`]) and required; in cluster
/// mode it is tried once, and a server without it follows.
fn writer_session(config: &postgres::Config, session: &str, cluster: bool, key: i64) -> Result<(Conn, bool)> {
    let mut conn = Conn::connect(config)?;
    blocking(|| conn.client().batch_execute(session))?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        if lead::try_lock(&mut conn, key)? {
            return Ok((conn, true));
        }
        if cluster {
            return Ok((conn, false));
        }
        if std::time::Instant::now() > deadline {
            return Err(StorageError::Engine(
                "another mosaicdb server (or tool) has this PostgreSQL database open: one at a time \
                 (or run every server in cluster mode, --advertise-url)"
                    .into(),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// One write's keys, deduplicated per keyspace (the last put or delete of a key wins).
pub(super) struct PgBatch {
    writer: Arc<Lease>,
    epoch: u64,
    /// cluster mode, the leader: the document keys are logged for the followers
    log: bool,
    ops: Vec<foldhash::HashMap<Vec<u8>, Option<Vec<u8>>>>,
}

impl Postgres {
    pub(super) const LIMITS: Limits = Limits { max_key: 2560, max_value: 512 << 20, max_commit: None };

    /// Connects to `url`, creating the tables that are missing, and takes the database's lock
    /// (see [`writer_session`]). `Buffered` durability commits with `synchronous_commit = off`
    /// (acknowledged before PostgreSQL's WAL flush: a crash of PostgreSQL may take back the last
    /// moments of writes, never leave them half done).
    ///
    /// In cluster mode (`advertise`: this server's URL) the lock is tried once: with it, the
    /// server leads; without, it follows (reads, and writes nothing). Either way the epoch moves
    /// on when a server takes the lead (see `storage/cluster.rs`).
    ///
    /// A database of the server other than the default one (`database` > 0) lives in its own
    /// schema (`mosaic_db_{id}`, made here if missing; every connection's `search_path` names it)
    /// under its own lock.
    pub(super) fn open(url: &str, durability: Durability, advertise: Option<&str>, database: u32) -> Result<Postgres> {
        let mut config = postgres::Config::from_str(url)
            .map_err(|e| StorageError::Engine(format!("the PostgreSQL URL is not valid: {e}")))?;
        config.application_name("mosaicdb");
        if let Some(schema) = super::config::database_schema(database) {
            let options = match config.get_options() {
                Some(given) => format!("{given} -c search_path={schema}"),
                None => format!("-c search_path={schema}"),
            };
            config.options(&options);
        }
        // an unreachable server is an error within seconds, not when TCP gives up
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        // a connection whose peer went silent (a cut network) fails within seconds rather than
        // when the kernel gives up on it (a quarter of an hour)
        config.keepalives_idle(std::time::Duration::from_secs(5));
        config.keepalives_interval(std::time::Duration::from_secs(1));
        config.keepalives_retries(3);
        config.tcp_user_timeout(std::time::Duration::from_secs(10));
        let synchronous = match durability {
            Durability::Sync => "on",
            Durability::Buffered => "off",
        };
        let session = format!("SET synchronous_commit = {synchronous}");
        let lock_key = lead::lock_key(database);
        let (mut writer, locked) = writer_session(&config, &session, advertise.is_some(), lock_key)?;
        let mut last_logged = 0;
        let (role, epoch, found_state) = if locked {
            let mut ddl = String::new();
            if let Some(schema) = super::config::database_schema(database) {
                ddl.push_str(&format!("CREATE SCHEMA IF NOT EXISTS {schema};"));
            }
            for space in Space::ALL {
                ddl.push_str(&format!(
                    "CREATE TABLE IF NOT EXISTS {} (k bytea PRIMARY KEY, v bytea NOT NULL);",
                    table(space)
                ));
            }
            ddl.push_str(&lead::store_ddl());
            blocking(|| writer.client().batch_execute(&ddl))?;
            let (epoch, state) = lead::take_lead(&mut writer, advertise.unwrap_or_default())?;
            last_logged = lead::last_logged(&mut writer)?;
            let role = if advertise.is_some() { Role::Leader } else { Role::Sole };
            tracing::info!(epoch, ?role, "took the lead of the PostgreSQL database");
            (role, epoch, state)
        } else {
            // the leader made the tables; a database no leader has opened yet is not followed
            let state = lead::leadership(&mut writer)?.state;
            (Role::Follower, 0, state)
        };
        Ok(Postgres {
            pool: Arc::new(Pool::new(config.clone(), MAX_READERS)),
            writer: Arc::new(Lease::own(writer)),
            committer: Arc::default(),
            reconnect: Arc::new((config, session)),
            role,
            epoch,
            found_state,
            last_logged: Arc::new(last_logged.into()),
            lock_key,
        })
    }

    /// The number of the state the database's row named as this server opened it: the last
    /// state a leader before this server published (this one numbers its states above it).
    pub(super) fn found_state(&self) -> u64 {
        self.found_state
    }

    /// What this server is on the database.
    pub(super) fn role(&self) -> Role {
        self.role
    }

    /// The epoch this server leads in (0: it follows).
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The database's leadership row, read now (on a pooled connection).
    pub(super) fn leadership(&self) -> Result<Leadership> {
        self.pool.take()?.with(lead::leadership)
    }

    /// Gives the database's lock back (at the store's close; nothing is written after it).
    pub(super) fn release_lead(&self) {
        if self.role == Role::Follower {
            return;
        }
        let released = self.writer.with(|conn| {
            if conn.is_closed() {
                return Ok(());
            }
            Ok(blocking(|| conn.client().batch_execute("SELECT pg_advisory_unlock_all()"))?)
        });
        if let Err(e) = released {
            tracing::debug!(error = %e, "giving the PostgreSQL lock back failed: it goes with the connection");
        }
    }

    /// The document keys the leader's groups after state `applied` up to `upto` wrote (`None`:
    /// not all of them are known; see `lead::documents_since`).
    pub(super) fn documents_since(&self, applied: u64, upto: u64) -> Result<Option<Vec<Vec<u8>>>> {
        self.pool.take()?.with(|conn| lead::documents_since(conn, applied, upto))
    }

    /// Whether no server leads the database now (its lock is free).
    pub(super) fn lock_free(&self) -> Result<bool> {
        let key = self.lock_key;
        self.pool.take()?.with(|conn| lead::lock_free(conn, key))
    }

    /// Before a group: a committer connection that PostgreSQL closed (a restart of the server, a
    /// lost network) while no group was open is opened again, its lock taken again; a failure is
    /// the group's writes' to meet.
    /// In cluster mode a leader whose session ended is not healed: the lock it held may be
    /// another's by now, and its next group fails (the store takes no more writes).
    pub(super) fn heal(&self) {
        if self.role != Role::Sole {
            return;
        }
        let healed = self.writer.with(|conn| {
            if conn.is_closed() && !conn.in_group {
                let (config, session) = &*self.reconnect;
                let (fresh, _) = writer_session(config, session, false, self.lock_key)?;
                *conn = fresh;
                tracing::info!("reconnected the committer to PostgreSQL");
            }
            Ok(())
        });
        if let Err(e) = healed {
            tracing::warn!(error = %e, "cannot reconnect the committer to PostgreSQL");
        }
    }

    /// Says which thread is the committer's.
    pub(super) fn set_committer(&self, thread: std::thread::ThreadId) {
        let _ = self.committer.set(thread);
    }

    /// True on the committer's thread.
    pub(super) fn on_committer(&self) -> bool {
        self.committer.get() == Some(&std::thread::current().id())
    }

    /// The committer's connection, for its reads (they see the group's earlier writes).
    pub(super) fn writer(&self) -> Arc<Lease> {
        self.writer.clone()
    }

    /// The latest committed value of `key` (durable).
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Slice>> {
        get(&self.pool.take()?, space, key)
    }

    /// A read view: a `REPEATABLE READ` transaction on a pooled connection, and the number of
    /// the state its snapshot shows (see the module's comment).
    ///
    /// Also says whether the view's epoch is this server's (a leader's view of another epoch
    /// shows another leader's writes: this one was deposed).
    pub(super) fn begin_view(&self) -> Result<(Arc<Lease>, u64, bool)> {
        let lease = self.pool.take()?;
        let (state, epoch) = lease.with(|conn| {
            conn.in_view = true;
            let sql = format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT state, epoch FROM {STORE_TABLE} WHERE id = 1"
            );
            let messages = blocking(|| conn.client().simple_query(&sql))?;
            messages
                .iter()
                .find_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(row) => {
                        let n = |i| row.get(i).and_then(|s: &str| s.parse::<u64>().ok());
                        n(0).zip(n(1))
                    }
                    _ => None,
                })
                .ok_or_else(|| StorageError::Engine(format!("{STORE_TABLE} has no state row")))
        })?;
        let own = self.role == Role::Follower || epoch == self.epoch;
        Ok((Arc::new(lease), state, own))
    }

    /// An empty batch on the committer's connection.
    pub(super) fn batch(&self) -> PgBatch {
        PgBatch {
            writer: self.writer.clone(),
            epoch: self.epoch,
            log: self.role == Role::Leader,
            ops: Space::ALL.iter().map(|_| Default::default()).collect(),
        }
    }

    /// Ends the committer's group: sets the state row to `state` (the number of the state it
    /// publishes, if it publishes one) and commits — durable once this returns. With no
    /// transaction open, a `state` is set on its own. A group in which a statement failed is
    /// rolled back and fails. Says whether a write was committed.
    pub(super) fn end_group(&self, state: Option<u64>) -> Result<bool> {
        self.writer.with(|conn| {
            let touched = std::mem::take(&mut conn.touched);
            let documents = std::mem::take(&mut conn.documents);
            let prev = self.last_logged.load(std::sync::atomic::Ordering::Acquire);
            let log = (!documents.is_empty()).then_some((&documents[..], prev));
            let set = state.map(|s| lead::publish_sql(s, touched, self.epoch, log));
            if conn.in_group {
                conn.in_group = false;
                if std::mem::take(&mut conn.failed) || set.is_none() {
                    // a failed statement, or a store halted mid-group (deposed, poisoned): what
                    // the group wrote is answered as failed, so none of it may commit
                    blocking(|| conn.client().batch_execute("ROLLBACK"))?;
                    return Err(StorageError::Engine(
                        "the group was rolled back (a statement failed, or the store stopped taking writes)".into(),
                    ));
                }
                let sql = format!("{}COMMIT", set.unwrap_or_default());
                if let Err(e) = blocking(|| conn.client().batch_execute(&sql)) {
                    // the transaction may be left open (aborted): end it
                    let _ = blocking(|| conn.client().batch_execute("ROLLBACK"));
                    return Err(e.into());
                }
                if let (Some(s), Some(_)) = (state, log) {
                    self.last_logged.store(s, std::sync::atomic::Ordering::Release);
                }
                return Ok(true);
            }
            match set {
                // no write of the group's: nothing to count as its flush
                Some(sql) => blocking(|| conn.client().batch_execute(&sql)).map(|()| false).map_err(StorageError::from),
                None => Ok(false),
            }
        })
    }

    /// Whether a restore into the database has not finished.
    pub(super) fn restoring(&self) -> Result<bool> {
        let sql = format!("SELECT restoring FROM {STORE_TABLE} WHERE id = 1");
        self.writer.with(|conn| Ok(blocking(|| conn.client().query_one(&sql, &[]))?.try_get(0)?))
    }

    /// Marks a restore as under way (`true`, refused unless every table is empty) or finished.
    pub(super) fn mark_restoring(&self, on: bool) -> Result<()> {
        if on {
            for space in Space::ALL {
                let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", table(space));
                let any: bool =
                    self.writer.with(|conn| Ok(blocking(|| conn.client().query_one(&sql, &[]))?.try_get(0)?))?;
                if any {
                    return Err(StorageError::Engine(format!(
                        "the PostgreSQL database is not empty ({} has rows): a restore goes only into an empty one",
                        table(space)
                    )));
                }
            }
        }
        // durable whatever the session's setting: the mark's end says the load is whole
        let sql = format!(
            "BEGIN; SET LOCAL synchronous_commit = on; UPDATE {STORE_TABLE} SET restoring = {on} WHERE id = 1; COMMIT"
        );
        self.writer.with(|conn| Ok(blocking(|| conn.client().batch_execute(&sql))?))
    }

    /// Empties every table and clears the restore mark.
    pub(super) fn empty_all(&self) -> Result<()> {
        let tables: Vec<String> = Space::ALL.iter().map(|&s| table(s)).collect();
        let sql = format!(
            "BEGIN; SET LOCAL synchronous_commit = on; TRUNCATE {}; UPDATE {STORE_TABLE} SET restoring = false WHERE id = 1; COMMIT",
            tables.join(", ")
        );
        self.writer.with(|conn| Ok(blocking(|| conn.client().batch_execute(&sql))?))
    }

    /// The bytes every keyspace's table takes with its TOAST and its index, in one query.
    pub(super) fn stored_bytes(&self) -> Result<u64> {
        let lease = self.pool.take()?;
        let names: Vec<String> = Space::ALL.iter().map(|&s| table(s)).collect();
        let sql = "SELECT coalesce(sum(pg_total_relation_size(oid)), 0)::bigint FROM pg_class \
                   WHERE relname = ANY($1) AND relkind = 'r' AND pg_table_is_visible(oid)";
        let bytes: i64 = lease.with(|conn| Ok(blocking(|| conn.client().query_one(sql, &[&names]))?.try_get(0)?))?;
        Ok(bytes.max(0) as u64)
    }

    /// The bytes a keyspace's table takes (its rows, in the heap and TOAST; not its index).
    pub(super) fn disk_space(&self, space: Space) -> u64 {
        self.families(&[space]).ok().and_then(|f| f.first().map(|f| f.disk_bytes)).unwrap_or(0)
    }

    /// PostgreSQL's estimate of a keyspace's rows (as of its last analyze).
    pub(super) fn approximate_len(&self, space: Space) -> usize {
        self.families(&[space]).ok().and_then(|f| f.first().map(|f| f.approximate_keys as usize)).unwrap_or(0)
    }

    /// Vacuums a keyspace's table (its dead row versions become free space) and refreshes its
    /// statistics.
    pub(super) fn compact(&self, space: Space) -> Result<()> {
        let lease = self.pool.take()?;
        let sql = format!("VACUUM (ANALYZE) {}", table(space));
        lease.with(|conn| Ok(blocking(|| conn.client().batch_execute(&sql))?))
    }

    /// The figures of `spaces`' tables, in that order.
    fn families(&self, spaces: &[Space]) -> Result<Vec<FamilyStats>> {
        let lease = self.pool.take()?;
        let names: Vec<String> = spaces.iter().map(|&s| table(s)).collect();
        let rows = lease.with(|conn| {
            let sql = "SELECT relname::text, pg_relation_size(oid) + COALESCE(pg_relation_size(NULLIF(reltoastrelid, 0)), 0), reltuples::float8 FROM pg_class \
                       WHERE relname = ANY($1) AND relkind = 'r' AND pg_table_is_visible(oid)";
            Ok(blocking(|| conn.client().query(sql, &[&names]))?)
        })?;
        let mut found = foldhash::HashMap::default();
        for row in rows {
            let (name, bytes, tuples): (String, i64, f64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let mut tuples = tuples.max(0.0) as u64;
            if tuples < EXACT_COUNT {
                // PostgreSQL's estimate is as of the last analyze (none yet for a new table):
                // a small table is counted
                let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {name} LIMIT {EXACT_COUNT}) AS t");
                let counted: i64 =
                    lease.with(|conn| Ok(blocking(|| conn.client().query_one(&sql, &[]))?.try_get(0)?))?;
                tuples = tuples.max(counted.max(0) as u64);
            }
            found.insert(name, (bytes.max(0) as u64, tuples));
        }
        Ok(spaces
            .iter()
            .map(|&space| {
                let (disk_bytes, approximate_keys) = found.get(&table(space)).copied().unwrap_or_default();
                FamilyStats { family: space.name(), disk_bytes, approximate_keys, table_files: 0, sealed_memtables: 0 }
            })
            .collect())
    }

    /// The store's figures that PostgreSQL keeps: per keyspace, its table's size and row estimate.
    pub(super) fn stats(&self, mut stats: StoreStats) -> StoreStats {
        match self.families(&Space::ALL) {
            Ok(families) => stats.families = families,
            Err(e) => tracing::warn!(error = %e, "cannot read the tables' sizes from PostgreSQL"),
        }
        stats
    }
}

/// The value of `key`, read on `lease`'s connection.
pub(super) fn get(lease: &Lease, space: Space, key: &[u8]) -> Result<Option<Slice>> {
    lease.with(|conn| {
        let statement = conn.statement(space, Query::Get)?;
        let row = blocking(|| conn.client().query_opt(&statement, &[&key]));
        let row = guard(conn, row)?;
        Ok(match row {
            Some(row) => Some(Slice::from(row.try_get::<_, Vec<u8>>(0)?)),
            None => None,
        })
    })
}

/// Whether `key` exists, read on `lease`'s connection.
pub(super) fn contains(lease: &Lease, space: Space, key: &[u8]) -> Result<bool> {
    lease.with(|conn| {
        let statement = conn.statement(space, Query::Contains)?;
        let row = blocking(|| conn.client().query_opt(&statement, &[&key]));
        Ok(guard(conn, row)?.is_some())
    })
}

/// The pairs in `range`, read on `lease`'s connection.
pub(super) fn scan(lease: &Arc<Lease>, space: Space, range: KeyRange) -> PgIter {
    PgIter::new(lease.clone(), space, range)
}

/// Marks the committer's group failed when a statement in it failed.
fn guard<T>(conn: &mut Conn, outcome: Result<T, postgres::Error>) -> Result<T> {
    if outcome.is_err() && conn.in_group {
        conn.failed = true;
    }
    Ok(outcome?)
}

impl PgBatch {
    /// Adds `key = value`.
    pub(super) fn insert(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.ops[space as usize].insert(key, Some(value));
    }

    /// Adds the removal of `key`.
    pub(super) fn remove(&mut self, space: Space, key: Vec<u8>) {
        self.ops[space as usize].insert(key, None);
    }

    /// Runs the batch's statements in the committer's group transaction (begun by the first
    /// batch of the group): committed with the group, by [`Postgres::end_group`].
    pub(super) fn commit(self) -> Result<()> {
        let PgBatch { writer, epoch, log, ops } = self;
        writer.with(|conn| {
            if !conn.in_group {
                conn.in_group = true;
                // the transaction stays open when the fence fails: the group's end rolls it back
                lead::begin_fenced(conn, epoch).inspect_err(|_| conn.failed = true)?;
            }
            for (space, ops) in Space::ALL.into_iter().zip(ops) {
                if ops.is_empty() {
                    continue;
                }
                conn.touched |= 1 << space as u32;
                if log && space == Space::Entity {
                    for key in ops.keys() {
                        conn.documents.extend_from_slice(&(key.len() as u32).to_be_bytes());
                        conn.documents.extend_from_slice(key);
                    }
                }
                let mut deletes: Vec<Vec<u8>> = Vec::new();
                let mut puts: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                for (key, value) in ops {
                    match value {
                        Some(v) => puts.push((key, v)),
                        None => deletes.push(key),
                    }
                }
                if !deletes.is_empty() {
                    let statement = conn.statement(space, Query::Delete)?;
                    let done = blocking(|| conn.client().execute(&statement, &[&deletes]));
                    guard(conn, done)?;
                }
                let statement = conn.statement(space, Query::Upsert)?;
                let mut rest = &puts[..];
                while !rest.is_empty() {
                    let (mut n, mut bytes) = (0, 0);
                    while n < rest.len() && (n == 0 || bytes + rest[n].0.len() + rest[n].1.len() <= STATEMENT_BYTES) {
                        bytes += rest[n].0.len() + rest[n].1.len();
                        n += 1;
                    }
                    let (chunk, after) = rest.split_at(n);
                    let keys: Vec<&[u8]> = chunk.iter().map(|(k, _)| k.as_slice()).collect();
                    let values: Vec<&[u8]> = chunk.iter().map(|(_, v)| v.as_slice()).collect();
                    let done = blocking(|| conn.client().execute(&statement, &[&keys, &values]));
                    guard(conn, done)?;
                    rest = after;
                }
            }
            Ok(())
        })
    }
}

/// Drops the schema of database `database` (> 0) with all its tables: see `storage::destroy`.
pub(super) fn destroy(url: &str, database: u32) -> Result<()> {
    let Some(schema) = super::config::database_schema(database) else {
        return Err(StorageError::Engine("the default database's tables cannot be dropped".into()));
    };
    let config = postgres::Config::from_str(url)
        .map_err(|e| StorageError::Engine(format!("the PostgreSQL URL is not valid: {e}")))?;
    let mut conn = Conn::connect(&config)?;
    // nobody may hold the database's lock: a server of it still open would write on
    if !lead::lock_free(&mut conn, lead::lock_key(database))? {
        return Err(StorageError::Engine(format!("the schema {schema} is still open")));
    }
    Ok(blocking(|| conn.client().batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")))?)
}

/// The ids of the schemas `mosaic_db_{id}` of the database `url` names: see
/// `storage::stored_databases`.
pub(super) fn stored_databases(url: &str) -> Result<Vec<u32>> {
    let config = postgres::Config::from_str(url)
        .map_err(|e| StorageError::Engine(format!("the PostgreSQL URL is not valid: {e}")))?;
    let mut conn = Conn::connect(&config)?;
    let rows = blocking(|| {
        conn.client().query("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'mosaic\\_db\\_%'", &[])
    })?;
    Ok(rows
        .iter()
        .filter_map(|row| row.try_get::<_, String>(0).ok())
        .filter_map(|name| name.strip_prefix("mosaic_db_").and_then(|id| id.parse::<u32>().ok()))
        .collect())
}
