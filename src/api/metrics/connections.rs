//! The connection figures of `GET /metrics`: connections open and the cap on them, accepted,
//! closed by a timeout, refused, and how often the accept loop stopped at the cap. The server's
//! accept loop and connections count them (`src/server.rs`, `src/server/conn.rs`); a scrape reads
//! them. Each is one relaxed atomic, touched once per connection (never per request).

use super::collect::{counter, counters, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Why a connection was closed by the server before its client closed it.
#[derive(Debug, Clone, Copy)]
pub enum ConnectionTimeout {
    /// its request head (or TLS handshake) took longer than the header timeout
    Header,
    /// it stayed idle between requests longer than the keep-alive timeout
    Idle,
}

/// Why a connection the kernel had queued was not served.
#[derive(Debug, Clone, Copy)]
pub enum RefusedConnection {
    /// `accept` failed (out of descriptors and the like): it stays queued, tried again shortly
    AcceptError,
    /// its TLS handshake failed
    TlsHandshake,
}

/// One server's connection counts.
#[derive(Debug, Default)]
pub struct ConnectionMetrics {
    open: AtomicI64,
    max: AtomicU64,
    accepted: AtomicU64,
    timed_out: [AtomicU64; 2],
    refused: [AtomicU64; 2],
    limit_reached: AtomicU64,
}

impl ConnectionMetrics {
    /// Sets the cap (`--max-connections`), shown as a gauge.
    pub fn set_max(&self, max: usize) {
        self.max.store(u64::try_from(max).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// A connection was accepted: open until [`ConnectionMetrics::closed`].
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// An accepted connection is closed.
    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection was closed by a timeout.
    pub fn timed_out(&self, why: ConnectionTimeout) {
        self.timed_out[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was refused.
    pub fn refused(&self, why: RefusedConnection) {
        self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The accept loop stopped at the cap: new connections wait in the listen queue.
    pub fn limit_reached(&self) {
        self.limit_reached.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections open now.
    pub fn open(&self) -> i64 {
        self.open.load(Ordering::Relaxed)
    }
}

impl Collector for ConnectionMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        gauge(&mut encoder, "mosaicdb_http_connections", "HTTP connections open", None, self.open())?;
        gauge(
            &mut encoder,
            "mosaicdb_http_connections_max",
            "most HTTP connections served at once (--max-connections); more wait in the listen queue",
            None,
            i64::try_from(load(&self.max)).unwrap_or(i64::MAX),
        )?;
        counter(
            &mut encoder,
            "mosaicdb_http_connections_accepted",
            "HTTP connections accepted",
            None,
            load(&self.accepted),
        )?;
        counters(
            &mut encoder,
            "mosaicdb_http_connections_timed_out",
            "HTTP connections closed by the server, by phase: `header` (a request head or TLS handshake \
             slower than --header-timeout-secs), `idle` (no request for --idle-timeout-secs)",
            None,
            [("header", &self.timed_out[0]), ("idle", &self.timed_out[1])].map(|(p, n)| ([("phase", p)], load(n))),
        )?;
        counters(
            &mut encoder,
            "mosaicdb_http_connections_refused",
            "HTTP connections not served, by reason: `accept_error` (accept failed, e.g. out of file \
             descriptors: the connection stays queued), `tls_handshake` (the TLS handshake failed)",
            None,
            [("accept_error", &self.refused[0]), ("tls_handshake", &self.refused[1])]
                .map(|(r, n)| ([("reason", r)], load(n))),
        )?;
        counter(
            &mut encoder,
            "mosaicdb_http_connection_limit_reached",
            "times the server stopped accepting at --max-connections (new connections wait in the listen queue)",
            None,
            load(&self.limit_reached),
        )
    }
}
