//! Running the server: configuration, start, graceful shutdown.

mod conn;

use crate::api::auth::Access;
use crate::api::{self, HttpLimits};
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
            },
            options: DbOptions::default(),
            tasks: TaskConfig::default(),
            access: Access::default(),
            listener: None,
            max_databases: crate::service::databases::DEFAULT_MAX_DATABASES,
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
}

/// A running server (tests and benches start it in-process).
pub struct Server {
    addr: SocketAddr,
    databases: std::sync::Arc<Databases>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl Server {
    /// Opens the store and starts serving; returns once the socket listens.
    pub async fn start(config: ServerConfig) -> Result<Server, ServerError> {
        config.access.check_exposure(config.addr).map_err(ServerError::Unprotected)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let listener = match &config.listener {
            Some(shared) => tokio::net::TcpListener::from_std(shared.try_clone()?)?,
            None => tokio::net::TcpListener::bind(config.addr).await?,
        };
        let addr = listener.local_addr()?;
        // A query's scan stops when its request times out (unless configured otherwise).
        let options =
            DbOptions { query_timeout: config.options.query_timeout.or(Some(config.limits.timeout)), ..config.options };
        // every database gets its periodic tasks, stopped before it closes
        let tasks = config.tasks;
        let attach: Attach = std::sync::Arc::new(move |db: &std::sync::Arc<Db>| {
            let scheduler = Scheduler::start(db.clone(), tasks);
            Box::new(move || Box::pin(scheduler.stop()) as _)
        });
        let databases = Databases::open(config.storage, options, config.max_databases, attach)?;
        let app = api::app(databases.clone(), config.limits, &config.access);
        tracing::info!("{}", config.access.describe());
        let handle = databases.clone();
        let done = tokio::spawn(async move {
            accept_until(listener, app, stopped, &databases, config.limits.timeout).await;
            // In-flight requests have finished: stop the periodic tasks (each at its next step)
            // and the background jobs, flush and fsync, database by database.
            databases.shutdown().await.map_err(ServerError::Close)?;
            Ok(())
        });
        Ok(Server { addr, databases: handle, stop: Some(stop), done })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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

/// Accepts connections until `stopped` fires, then lets every connection finish the request under
/// way (idle ones close at once; long-polls, change streams and NDJSON streams end at once) and
/// returns when all are closed — or once `grace` (the request timeout) has passed: a connection
/// still open then (a client that stopped reading a response, an import still running) is
/// dropped.
async fn accept_until(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    mut stopped: oneshot::Receiver<()>,
    databases: &Databases,
    grace: Duration,
) {
    let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    // Small responses go out at once instead of waiting for Nagle's timer.
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::warn!(error = %e, "cannot set TCP_NODELAY");
                    }
                    connections.spawn(conn::serve_connection(tcp, app.clone(), shutdown_rx.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
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
            Err(e @ ServerError::Unprotected(_)) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the database: trying again in a second");
                tokio::select! {
                    () = &mut signal => return Ok(()),
                    () = tokio::time::sleep(REOPEN_EVERY) => continue,
                }
            }
        };
        let status = server.db().cluster_status();
        tracing::info!(addr = %server.addr(), role = ?status.role, epoch = status.epoch, "mosaicdb listening; Swagger UI at /docs");
        let db = server.db().clone();
        tokio::select! {
            () = &mut signal => {
                tracing::info!("shutting down: finishing in-flight requests");
                return server.shutdown().await;
            }
            () = db.reopen_wanted() => {
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
