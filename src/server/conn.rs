//! Serving connections with hyper directly: HTTP/1.1 over TCP, or over TLS HTTP/2 or HTTP/1.1 as
//! ALPN chose; each connection watched by the server's sweeper for its header-read and keep-alive
//! timeouts (`timeouts.rs`).
//!
//! Serving with hyper directly also lets the requests hyper's HTTP/1 parser refuses before the
//! application sees them (a malformed `Content-Length` or header, a URI over hyper's 64 KiB
//! limit, a head over its buffer) be answered with a problem document like every other error,
//! instead of hyper's bare status line. Hyper answers such a request by itself, writing a
//! body-less response head (400, 414 or 431) and closing the connection; no hook changes that
//! response. Each connection therefore counts the requests the application is answering (from the
//! service call until hyper drops the response body, [`Activity`]): a response head written while
//! that count is zero can only be hyper's own, and [`Conn`] writes the problem document in its
//! place, over TCP and TLS alike (it sits above TLS, seeing the plain bytes). The count costs one
//! atomic increment and decrement per request and no allocation; the same count tells the sweeper
//! whether the connection is answering (no timeout) or idle.
//!
//! hyper does not say why it refused a request. One refusal is common enough to be worth telling
//! apart: a request target holding a character a URL must percent-encode (a `<cursor>` placeholder
//! pasted from a doc, a space, a `"`). So the request line that starts each new head (a read while
//! no request is being answered) is scanned against the http crate's own rules, and the problem
//! document names the character and where it is (`problem.rs`).

mod problem;
mod socket;

use super::timeouts::{Activity, Answering};
use crate::api::ConnectionMetrics;
use axum::Router;
use axum::body::Body;
use axum::http::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use problem::{Refused, hypers_own, problem_response, refused_in_target};
use socket::{Peer, SharedTcp};
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What every connection of a server is served with.
#[derive(Clone)]
pub(super) struct Serving {
    pub(super) app: Router,
    /// becomes true when the server shuts down
    pub(super) shutdown: tokio::sync::watch::Receiver<bool>,
    /// TLS, when configured
    pub(super) tls: Option<tokio_rustls::TlsAcceptor>,
    pub(super) metrics: Arc<ConnectionMetrics>,
}

/// Serves one accepted connection until it closes, a timeout of the sweeper closes it, or
/// `shutdown` fires (then gracefully: the request under way is finished first).
pub(super) async fn serve_connection(tcp: TcpStream, serving: Serving, activity: Arc<Activity>) {
    let Serving { app, mut shutdown, tls, metrics } = serving;
    let tcp = Arc::new(tcp);
    let peer = Peer::of(&tcp);
    let io = SharedTcp(tcp);
    let answering = activity.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        // `/v1/db/{db}/…` to the route it names, before routing
        let mut req = crate::api::db_path::scope(req);
        let guard = answering.start();
        if let Some(fin_is_gone) = watched(&req)
            && let Some(gone) = peer.watch(fin_is_gone)
        {
            req.extensions_mut().insert(gone);
        }
        let mut app = app.clone();
        async move {
            let response = match tower_service::Service::call(&mut app, req).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| Guarded { body, _guard: guard }))
        }
    });
    let Some(tls) = tls else {
        let conn = http1().serve_connection(hyper_util::rt::TokioIo::new(Conn::new(io, &activity, true)), service);
        return drive(conn, |c| c.graceful_shutdown(), shutdown, &activity).await;
    };
    // the handshake is the start of the head: the header timeout covers it
    let stream = tokio::select! {
        accepted = tls.accept(io) => match accepted {
            Ok(stream) => stream,
            Err(e) => {
                metrics.refused(crate::api::RefusedConnection::TlsHandshake);
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
        },
        () = activity.expired() => return,
        () = stopping(&mut shutdown) => return,
    };
    if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
        let mut builder = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
        builder.timer(hyper_util::rt::TokioTimer::new());
        let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(Conn::new(stream, &activity, false)), service);
        drive(conn, |c| c.graceful_shutdown(), shutdown, &activity).await;
    } else {
        let conn = http1().serve_connection(hyper_util::rt::TokioIo::new(Conn::new(stream, &activity, true)), service);
        drive(conn, |c| c.graceful_shutdown(), shutdown, &activity).await;
    }
}

/// hyper's HTTP/1 connection settings.
fn http1() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(hyper_util::rt::TokioTimer::new());
    // hyper's header read timeout arms a timer for every request head: measured with
    // `MOSAIC_BENCH_ONLY=ceiling,identity cargo bench --bench http`, point GETs went from 69.7%
    // of the HTTP ceiling without it to 58.9% with it. The server's sweeper keeps the header and
    // keep-alive timeouts instead (`timeouts.rs`).
    builder.header_read_timeout(None);
    // a client may shut its write side down after its request and still read the answer (HTTP/1.1
    // allows it); without this, hyper drops the connection at that FIN
    builder.half_close(true);
    builder
}

/// Runs a hyper connection until it ends, is dropped for a timeout (its socket closes), or the
/// server shuts down (then `graceful` lets the request under way finish).
async fn drive<C>(
    conn: C,
    graceful: impl FnOnce(Pin<&mut C>),
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    activity: &Activity,
) where
    C: Future<Output = Result<(), hyper::Error>>,
{
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => log(result),
        () = activity.expired() => {}
        () = stopping(&mut shutdown) => {
            graceful(conn.as_mut());
            log(conn.await);
        }
    }
}

/// Resolves once the server shuts down (never, if it is gone without a signal: the connection is
/// served on).
async fn stopping(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    while !*shutdown.borrow_and_update() {
        if shutdown.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// For the requests that may outlast the request timeout and so watch their client (an import, a
/// backup, and an NDJSON stream of query results or of a table's documents): whether the client's
/// FIN means it is gone. For an import it does (the import would otherwise go on until hyper next
/// reads); a backup or a stream answers a client that may have half-closed the connection after
/// its request (HTTP/1.1 allows it), so only a reset ends them — or their writes failing, which a
/// client that closed and reads no more soon causes.
fn watched(req: &Request<Incoming>) -> Option<bool> {
    use axum::http::Method;
    let path = req.uri().path();
    match *req.method() {
        Method::POST if path.ends_with("/import") => Some(true),
        Method::POST if path == "/v1/admin/backup" => Some(false),
        Method::POST if path.ends_with("/query") => crate::api::wants_ndjson(req.headers()).then_some(false),
        // a SQL statement: a client that goes away stops it (one that half-closes after its
        // request counts as gone while it waits for a whole answer, not for a stream)
        Method::POST
            if path == "/v1/sql" || (path.starts_with(crate::api::db_path::PREFIX) && path.ends_with("/sql")) =>
        {
            Some(!crate::api::wants_ndjson(req.headers()))
        }
        Method::GET if path.ends_with("/documents") => crate::api::wants_ndjson(req.headers()).then_some(false),
        _ => None,
    }
}

fn log(result: Result<(), hyper::Error>) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// A response body that keeps its request counted until hyper is done with it.
struct Guarded {
    body: Body,
    _guard: Answering,
}

impl hyper::body::Body for Guarded {
    type Data = <Body as hyper::body::Body>::Data;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream (TCP, or TLS over it), which writes a problem document in place of
/// hyper's own body-less HTTP/1 error response, and tells the sweeper when a request head starts.
struct Conn<S> {
    io: S,
    activity: Arc<Activity>,
    /// HTTP/1 (not HTTP/2): hyper's own error responses are replaced, and bytes read while no
    /// request is answered start a head
    http1: bool,
    /// the problem response being written, and how much of it is out
    replacement: Option<(Vec<u8>, usize)>,
    /// a character the request line of the head being read holds in its target, which the http
    /// crate refuses: what hyper's 400 is about, if it comes
    refused: Option<Refused>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    fn new(io: S, activity: &Arc<Activity>, http1: bool) -> Self {
        Conn { io, activity: activity.clone(), http1, replacement: None, refused: None }
    }

    /// Takes over `bytes` if they are hyper's own error response; true when it did.
    fn intercept(&mut self, bytes: &[u8]) -> bool {
        if self.replacement.is_some() {
            return true;
        }
        if !self.http1 || self.activity.answering() {
            return false;
        }
        match hypers_own(bytes) {
            Some(status) => {
                self.replacement = Some((problem_response(status, self.refused), 0));
                true
            }
            None => false,
        }
    }

    /// Writes what is left of the replacement.
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, sent)) = &mut self.replacement {
            let Some(rest) = bytes.get(*sent..).filter(|r| !r.is_empty()) else { return Poll::Ready(Ok(())) };
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *sent += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Conn<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.io).poll_read(cx, buf))?;
        // a read while no request is being answered starts the next head
        if self.http1 && !self.activity.answering() {
            let head = buf.filled().get(before..).unwrap_or_default();
            if !head.is_empty() {
                self.activity.head_bytes();
            }
            self.refused = refused_in_target(head);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Conn<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.intercept(buf) {
            // hyper's bytes are dropped: the replacement says the same, with a body
            ready!(this.drive(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        // hyper writes its own error head as one piece
        if (this.replacement.is_some() || bufs.iter().filter(|b| !b.is_empty()).count() == 1) && this.intercept(first) {
            ready!(this.drive(cx))?;
            return Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()));
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drive(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drive(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
