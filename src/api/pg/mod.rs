//! The PostgreSQL wire protocol (`--pg-addr`), by the `pgwire` crate: psql, psycopg, JDBC,
//! pandas and BI tools connect unchanged and run the same read-only SQL as `POST /v1/sql`.
//!
//! - **Connecting** (`startup.rs`): the startup's `database` picks the database (none: `default`;
//!   an unknown one, or one the key may not reach: `3D000`). With API keys configured the
//!   password is a key (cleartext, so it must travel over TLS: a client off loopback must use
//!   TLS, `28000` otherwise; the server's `--tls-cert` serves both listeners); without keys
//!   (loopback only, as for HTTP) any user and password are taken.
//! - **Queries** (`query.rs`): the simple protocol (several statements in one string) and the
//!   extended one (Parse / Bind / Describe / Execute, parameters in text or binary, results in
//!   either, `max_rows` honoured by suspending the portal); session statements (`SET`, `BEGIN`,
//!   `SHOW` …) are answered here (`commands.rs`); values are written by the engine
//!   (`encode.rs`), parameters read by their types (`params.rs`).
//! - **Bounds**: the statement limits of `POST /v1/sql` (timeout covering the streamed rows,
//!   memory, the `sql` class of `--max-heavy-reads`); a CancelRequest stops the statement under
//!   way (`57014`), as does a client that goes away; at most `--pg-max-connections` connections.

mod commands;
mod encode;
mod params;
mod query;
mod startup;
mod state;

pub use state::PgShared;

use super::auth::Access;
use pgwire::api::PgWireServerHandlers;
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::messages::cancel::CancelRequest;
use state::{Cancels, PgState};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Default of `--pg-max-connections`, PostgreSQL's own default.
pub const DEFAULT_PG_MAX_CONNECTIONS: usize = 100;

/// The handlers of every connection.
struct Handlers {
    startup: Arc<startup::Startup>,
    query: Arc<query::Queries>,
    cancel: Arc<CancelSignals>,
}

/// Bumps the cancel signal a CancelRequest names.
struct CancelSignals(Arc<Cancels>);

#[async_trait::async_trait]
impl CancelHandler for CancelSignals {
    async fn on_cancel_request(&self, request: CancelRequest) {
        self.0.cancel(&(request.pid, request.secret_key.to_bytes()));
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.query.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.query.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancel.clone()
    }
}

/// A bound wire listener.
pub struct PgListener {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
}

impl PgListener {
    /// Binds `addr`; refuses an address off loopback without TLS (passwords are API keys, and
    /// travel in clear text without it), or without keys unless `--allow-unauthenticated`.
    pub async fn bind(addr: SocketAddr, access: &Access, tls: bool) -> Result<PgListener, String> {
        access.check_exposure(addr)?;
        if !tls && !addr.ip().to_canonical().is_loopback() {
            return Err(format!(
                "refusing to serve the PostgreSQL wire on {addr} without TLS: passwords are API keys and would cross \
                 the network in clear text. Give --tls-cert and --tls-key, or listen on a loopback address"
            ));
        }
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("--pg-addr {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        Ok(PgListener { listener, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves connections until `stop` turns true: then stops accepting and ends every
    /// connection (a statement under way stops with it).
    pub async fn serve(
        self,
        shared: PgShared,
        tls: Option<tokio_rustls::TlsAcceptor>,
        max_connections: usize,
        mut stop: watch::Receiver<bool>,
    ) {
        let cancels = Arc::new(Cancels::default());
        let state = Arc::new(PgState { shared, cancels: cancels.clone() });
        let handlers = Arc::new(Handlers {
            startup: Arc::new(startup::Startup::new(state.clone())),
            query: Arc::new(query::Queries::new(state)),
            cancel: Arc::new(CancelSignals(cancels)),
        });
        let places = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
        let mut connections = tokio::task::JoinSet::new();
        tracing::info!(addr = %self.addr, tls = tls.is_some(), max_connections, "PostgreSQL wire listening");
        loop {
            let place = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                place = places.clone().acquire_owned() => match place {
                    Ok(place) => place,
                    Err(_) => break,
                },
            };
            let accepted = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                accepted = self.listener.accept() => accepted,
            };
            let (socket, _) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a PostgreSQL wire connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            let handlers = handlers.clone();
            let tls = tls.clone();
            connections.spawn(async move {
                if let Err(e) = pgwire::tokio::process_socket(socket, tls, handlers).await {
                    tracing::debug!(error = %e, "a PostgreSQL wire connection ended with an error");
                }
                drop(place);
            });
            while connections.try_join_next().is_some() {}
        }
        connections.shutdown().await;
    }
}
