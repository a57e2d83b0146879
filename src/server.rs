//! Running the server: configuration, start, the accept loop under the connection cap, graceful
//! shutdown.

mod conn;
pub mod limits;
mod timeouts;
mod tls;

pub use timeouts::ConnTimeouts;
pub use tls::TlsFiles;

use crate::api::auth::Access;
use crate::api::{self, ConnectionMetrics, HttpLimits};
use crate::background::{Scheduler, TaskConfig};
use crate::service::databases::{Attach, Databases};
use crate::service::{Db, DbOptions, ServiceError};
use crate::storage::StorageConfig;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;

/// Default of `--max-streams`: streamed answers written at once (each holds a blocking-pool
/// thread, of tokio's 512, while its client reads).
pub const DEFAULT_MAX_STREAMS: usize = 16;

/// Everything `mosaicdb serve` needs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// address to listen on (port 0 picks a free one)
    pub addr: SocketAddr,
    /// the store
    pub storage: StorageConfig,
    /// HTTP limits
    pub limits: HttpLimits,
    /// service settings
    pub options: DbOptions,
    /// intervals of the periodic background tasks
    pub tasks: TaskConfig,
    /// API keys and the rules around them (default: no keys, loopback only)
    pub access: Access,
    /// a socket already listening on `addr`, served instead of binding one (cluster mode keeps
    /// one across the reopens of its database, so that clients queue rather than meet a closed
    /// port)
    pub listener: Option<std::sync::Arc<std::net::TcpListener>>,
    /// most databases the server holds, `default` among them (`--max-databases`)
    pub max_databases: usize,
    /// most connections served at once (`--max-connections`; `None`: sized from the open-file
    /// limit), always kept under that limit less a reserve for the store (see [`limits`])
    pub max_connections: Option<usize>,
    /// the header-read and keep-alive timeouts of connections
    pub timeouts: ConnTimeouts,
    /// TLS on the listener (`--tls-cert`, `--tls-key`); `None`: plain TCP. The PostgreSQL wire
    /// listener offers the same certificate.
    pub tls: Option<TlsFiles>,
    /// the PostgreSQL wire listener's address (`--pg-addr`); `None`: none
    pub pg_addr: Option<SocketAddr>,
    /// most connections of the PostgreSQL wire at once (`--pg-max-connections`)
    pub pg_max_connections: usize,
}

impl ServerConfig {
    /// Defaults: `127.0.0.1:8080`, sync durability, 32 MiB bodies, 30 s timeout.
    pub fn new(data_dir: impl Into<std::path::PathBuf>) -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            storage: StorageConfig::new(data_dir),
            limits: HttpLimits {
                max_body_bytes: 32 << 20,
                timeout: Duration::from_secs(30),
                min_import_bytes: crate::service::DEFAULT_MIN_IMPORT_BYTES,
                max_streams: DEFAULT_MAX_STREAMS,
                heavy_reads: crate::api::admission::HeavyReads::default(),
                sql: crate::service::sql::SqlLimits::default(),
            },
            options: DbOptions::default(),
            tasks: TaskConfig::default(),
            access: Access::default(),
            listener: None,
            max_databases: crate::service::databases::DEFAULT_MAX_DATABASES,
            max_connections: None,
            timeouts: ConnTimeouts::default(),
            tls: None,
            pg_addr: None,
            pg_max_connections: api::pg::DEFAULT_PG_MAX_CONNECTIONS,
        }
    }
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// the data directory could not be opened
    #[error("cannot open the data directory: {0}")]
    Open(#[from] ServiceError),
    /// the shutdown's final fsync and flush failed (a store poisoned by a failed write to disk
    /// ends here too): what was acknowledged is durable, the next start replays the journal
    #[error("closing the data directory: {0}")]
    Close(ServiceError),
    /// the address could not be bound, or serving failed
    #[error("network error: {0}")]
    Io(#[from] std::io::Error),
    /// a non-loopback address with no API keys, not explicitly allowed
    #[error("{0}")]
    Unprotected(String),
    /// the TLS certificate or key cannot be used
    #[error("{0}")]
    Tls(String),
}

/// A running server (tests and benches start it in-process).
pub struct Server {
    addr: SocketAddr,
    pg_addr: Option<SocketAddr>,
    databases: std::sync::Arc<Databases>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl Server {
    /// Opens the store and starts serving; returns once the socket listens.
    pub async fn start(config: ServerConfig) -> Result<Server, ServerError> {
        config.access.check_exposure(config.addr).map_err(ServerError::Unprotected)?;
        let tls = config.tls.as_ref().map(tls::acceptor).transpose().map_err(ServerError::Tls)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let listener = match &config.listener {
            Some(shared) => tokio::net::TcpListener::from_std(shared.try_clone()?)?,
            None => tokio::net::TcpListener::bind(config.addr).await?,
        };
        let addr = listener.local_addr()?;
        let pg_tls = match config.pg_addr {
            Some(_) => config.tls.as_ref().map(tls::pg_acceptor).transpose().map_err(ServerError::Tls)?,
            None => None,
        };
        let pg = match config.pg_addr {
            Some(pg_addr) => Some(
                api::pg::PgListener::bind(pg_addr, &config.access, pg_tls.is_some())
                    .await
                    .map_err(ServerError::Unprotected)?,
            ),
            None => None,
        };
        let pg_addr = pg.as_ref().map(api::pg::PgListener::addr);
        if config.access.enabled() && tls.is_none() && !addr.ip().to_canonical().is_loopback() {
            tracing::warn!(
                %addr,
                "API keys are configured but TLS is not: keys and data cross the network in clear text unless a \
                 proxy in front terminates TLS (--tls-cert and --tls-key serve HTTPS)"
            );
        }
        // The connection cap leaves descriptors for the store, which keeps at most so many
        // table files open.
        let open_files = limits::open_file_limit();
        let (max_connections, note) = limits::connection_cap(config.max_connections, open_files);
        if let Some(note) = note {
            tracing::warn!("{note}");
        }
        tracing::info!(
            max_connections,
            open_file_limit = open_files.map_or_else(|| "unlimited".to_owned(), |l| l.to_string()),
            header_timeout = ?config.timeouts.header,
            idle_timeout = ?config.timeouts.idle,
            "connections"
        );
        let mut storage = config.storage;
        storage.max_table_files = storage.max_table_files.min(limits::table_files(open_files));
        // A query's scan stops when its request times out (unless configured otherwise).
        let options =
            DbOptions { query_timeout: config.options.query_timeout.or(Some(config.limits.timeout)), ..config.options };
        // every database gets its periodic tasks, stopped before it closes
        let tasks = config.tasks;
        let attach: Attach = std::sync::Arc::new(move |db: &std::sync::Arc<Db>| {
            let scheduler = Scheduler::start(db.clone(), tasks);
            Box::new(move || Box::pin(scheduler.stop()) as _)
        });
        let databases = Databases::open(storage, options, config.max_databases, attach)?;
        let metrics = std::sync::Arc::new(ConnectionMetrics::default());
        metrics.set_max(max_connections);
        // SQL statements run on a runtime of their own, made once
        let sql = std::sync::Arc::new(crate::service::sql::SqlEngine::new(config.limits.sql).map_err(ServerError::Io)?);
        let admission = std::sync::Arc::new(api::admission::Admission::new(config.limits.heavy_reads));
        let app =
            api::app(databases.clone(), config.limits, &config.access, metrics.clone(), sql.clone(), admission.clone());
        tracing::info!("{}", config.access.describe());
        let (pg_stop, pg_stopped) = tokio::sync::watch::channel(false);
        let pg_task = pg.map(|pg| {
            let shared =
                api::pg::PgShared { databases: databases.clone(), sql, admission, access: config.access.clone() };
            tokio::spawn(pg.serve(shared, pg_tls, config.pg_max_connections, pg_stopped))
        });
        let handle = databases.clone();
        let accepting =
            Accepting { max_connections, timeouts: config.timeouts, grace: config.limits.timeout, tls, metrics };
        let done = tokio::spawn(async move {
            accept_until(listener, app, stopped, &databases, accepting).await;
            // the wire's connections end (their statements stop) before the databases close
            let _ = pg_stop.send(true);
            if let Some(pg) = pg_task {
                let _ = pg.await;
            }
            // In-flight requests have finished: stop the periodic tasks (each at its next step)
            // and the background jobs, flush and fsync, database by database.
            databases.shutdown().await.map_err(ServerError::Close)?;
            Ok(())
        });
        Ok(Server { addr, pg_addr, databases: handle, stop: Some(stop), done })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the PostgreSQL wire listener, when there is one (`--pg-addr`).
    pub fn pg_addr(&self) -> Option<SocketAddr> {
        self.pg_addr
    }

    /// The default database.
    pub fn db(&self) -> &std::sync::Arc<Db> {
        self.databases.default_db()
    }

    /// Every database of the server.
    pub fn databases(&self) -> &std::sync::Arc<Databases> {
        &self.databases
    }

    /// Stops accepting, lets in-flight requests finish, flushes the store.
    pub async fn shutdown(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.wait().await
    }

    /// Waits until the server stops.
    pub async fn wait(self) -> Result<(), ServerError> {
        self.done.await.map_err(|e| ServerError::Io(std::io::Error::other(e)))?
    }
}

/// How the accept loop serves its connections.
struct Accepting {
    max_connections: usize,
    timeouts: ConnTimeouts,
    /// how long in-flight requests may take to finish at shutdown (the request timeout)
    grace: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
    metrics: std::sync::Arc<ConnectionMetrics>,
}

/// An accepted connection, counted open and holding its place under the cap until dropped.
struct Open {
    metrics: std::sync::Arc<ConnectionMetrics>,
    _place: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics.closed();
    }
}

/// How often at most a failing `accept` (out of descriptors) or the cap is logged.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Accepts connections until `stopped` fires, then lets every connection finish the request under
/// way (idle ones close at once; long-polls, change streams and NDJSON streams end at once) and
/// returns when all are closed — or once the grace period (the request timeout) has passed: a
/// connection still open then (a client that stopped reading a response, an import still running)
/// is dropped.
///
/// At `max_connections` open connections the loop stops accepting until one closes: new
/// connections wait in the kernel's listen queue (its backlog; past it the client's connect
/// waits or fails), and the descriptors the cap leaves stay free for the store.
async fn accept_until(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    mut stopped: oneshot::Receiver<()>,
    databases: &Databases,
    accepting: Accepting,
) {
    let Accepting { max_connections, timeouts, grace, tls, metrics } = accepting;
    let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    let serving = conn::Serving { app, shutdown: shutdown_rx, tls, metrics: metrics.clone() };
    let places = std::sync::Arc::new(tokio::sync::Semaphore::new(max_connections));
    let sweeper = timeouts::Sweeper::new(timeouts, metrics.clone());
    let sweeping = tokio::spawn(sweeper.clone().run());
    let mut connections = tokio::task::JoinSet::new();
    let mut logged: Option<std::time::Instant> = None;
    let mut log_due = move || {
        let due = logged.is_none_or(|at| at.elapsed() >= LOG_EVERY);
        if due {
            logged = Some(std::time::Instant::now());
        }
        due
    };
    loop {
        // a place under the cap first: without one, nothing is accepted
        let place = match places.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(_) => {
                metrics.limit_reached();
                if log_due() {
                    tracing::warn!(
                        max_connections,
                        "connection limit reached: new connections wait in the listen queue until one closes \
                         (--max-connections)"
                    );
                }
                tokio::select! {
                    _ = &mut stopped => break,
                    place = places.clone().acquire_owned() => match place {
                        Ok(place) => place,
                        Err(_) => break,
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                }
            }
        };
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    // Small responses go out at once instead of waiting for Nagle's timer.
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                    }
                    metrics.accepted();
                    let open = Open { metrics: metrics.clone(), _place: place };
                    let activity = sweeper.watch();
                    let serving = serving.clone();
                    connections.spawn(async move {
                        conn::serve_connection(tcp, serving, activity).await;
                        drop(open);
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: the connection stays queued; wait
                    // instead of spinning, and say why.
                    metrics.refused(crate::api::RefusedConnection::AcceptError);
                    if log_due() {
                        tracing::error!(error = %e, open = metrics.open(), "accepting a connection failed: waiting");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    sweeping.abort();
    databases.stop_change_waits();
    let _ = shutdown.send(true);
    let finished = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(open = connections.len(), "connections still open after the shutdown grace period: dropped");
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
}

/// Serves until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn run(config: ServerConfig) -> Result<(), ServerError> {
    // every connection and every file of the store takes a descriptor: take all the system allows
    match limits::raise_open_file_limit() {
        Some((before, after)) if after > before => {
            tracing::info!(from = before, to = after, "raised the open-file limit (ulimit -n) to the hard limit");
        }
        Some((limit, _)) => tracing::info!(limit, "open-file limit (ulimit -n)"),
        None => {}
    }
    // caught from before the first request is served: a SIGTERM right after the start (a
    // container stopped at once) shuts down gracefully too, rather than killing the process
    let signal = shutdown_signal();
    if config.storage.advertise.is_none() {
        let server = Server::start(config).await?;
        tracing::info!(addr = %server.addr(), "mosaicdb listening; Swagger UI at /docs");
        signal.await;
        tracing::info!("shutting down: finishing in-flight requests");
        return server.shutdown().await;
    }
    // Cluster mode: the database is opened again whenever the role may change — a follower that
    // saw the lead free, a leader deposed or cut off from the backend (see `service::cluster`)
    // — and, while it cannot be opened (the backend down or being failed over), tried again
    // every second, nothing served meanwhile.
    tokio::pin!(signal);
    let mut config = config;
    config.access.check_exposure(config.addr).map_err(ServerError::Unprotected)?;
    let listener = std::net::TcpListener::bind(config.addr)?;
    listener.set_nonblocking(true)?;
    config.listener = Some(std::sync::Arc::new(listener));
    loop {
        let server = match Server::start(config.clone()).await {
            Ok(server) => server,
            Err(e @ (ServerError::Unprotected(_) | ServerError::Tls(_))) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the database: trying again in a second");
                tokio::select! {
                    () = &mut signal => return Ok(()),
                    () = tokio::time::sleep(REOPEN_EVERY) => continue,
                }
            }
        };
        let status = server.db().cluster.cluster_status();
        tracing::info!(addr = %server.addr(), role = ?status.role, epoch = status.epoch, "mosaicdb listening; Swagger UI at /docs");
        let db = server.db().clone();
        tokio::select! {
            () = &mut signal => {
                tracing::info!("shutting down: finishing in-flight requests");
                return server.shutdown().await;
            }
            () = db.cluster.reopen_wanted() => {
                drop(db);
                if let Err(e) = server.shutdown().await {
                    tracing::warn!(error = %e, "closing the database before opening it again");
                }
            }
        }
    }
}

/// How often cluster mode tries to open a database it could not open.
const REOPEN_EVERY: Duration = Duration::from_secs(1);

/// Resolves at SIGTERM or SIGINT; the handlers are in place once this returns.
#[cfg(unix)]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let (term, int) = (signal(SignalKind::terminate()).ok(), signal(SignalKind::interrupt()).ok());
    async fn received(signal: Option<Signal>) {
        match signal {
            Some(mut s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    async move {
        tokio::select! {
            () = received(term) => {},
            () = received(int) => {},
        }
    }
}

/// Resolves at Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
