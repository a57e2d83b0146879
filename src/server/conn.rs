//! Serving connections with hyper directly, so that the requests hyper's HTTP/1 parser refuses
//! before the application sees them (a malformed `Content-Length` or header, a URI over hyper's
//! 64 KiB limit, a head over its buffer) are answered with a problem document like every other
//! error, instead of hyper's bare status line.
//!
//! Hyper answers such a request by itself, writing a body-less response head (400, 414 or 431)
//! and closing the connection; no hook changes that response. Each connection therefore counts
//! the requests the application is answering (from the service call until hyper drops the
//! response body): a response head written while that count is zero can only be hyper's own,
//! and [`Conn`] writes the problem document in its place. The count costs one atomic increment
//! and decrement per request and no allocation.
//!
//! hyper does not say why it refused a request. One refusal is common enough to be worth telling
//! apart: a request target holding a character a URL must percent-encode (a `<cursor>` placeholder
//! pasted from a doc, a space, a `"`). So the request line that starts each new head (a read while
//! no request is being answered) is scanned against the http crate's own rules, and the problem
//! document names the character and where it is.

use crate::api::{ApiError, ClientGone};
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use hyper::body::{Frame, Incoming, SizeHint};
use std::cell::RefCell;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Serves one accepted connection until it closes or `shutdown` fires (then gracefully: the
/// request under way is finished first).
pub(super) async fn serve_connection(tcp: TcpStream, app: Router, shutdown: tokio::sync::watch::Receiver<bool>) {
    let answering = Arc::new(AtomicUsize::new(0));
    let tcp = Arc::new(tcp);
    let peer = Peer::of(&tcp);
    let io = hyper_util::rt::TokioIo::new(Conn { tcp, answering: answering.clone(), replacement: None, refused: None });
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        // `/v1/db/{db}/…` to the route it names, before routing
        let mut req = crate::api::database::scope(req);
        let guard = Answering::start(&answering);
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
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(hyper_util::rt::TokioTimer::new());
    // hyper's header read timeout arms a timer for every request head: measured with
    // `MOSAIC_BENCH_ONLY=ceiling,identity cargo bench --bench http`, point GETs went from 69.7%
    // of the HTTP ceiling without it to 58.9% with it. As with `axum::serve` before, there is none.
    builder.header_read_timeout(None);
    // a client may shut its write side down after its request and still read the answer (HTTP/1.1
    // allows it); without this, hyper drops the connection at that FIN
    builder.half_close(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut shutdown = shutdown;
    let stopping = async {
        while !*shutdown.borrow_and_update() {
            if shutdown.changed().await.is_err() {
                // the server is gone without a signal: keep serving this connection
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        result = conn.as_mut() => log(result),
        () = stopping => {
            conn.as_mut().graceful_shutdown();
            log(conn.await);
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
        Method::GET if path.ends_with("/documents") => crate::api::wants_ndjson(req.headers()).then_some(false),
        _ => None,
    }
}

/// What it takes to see the client go away while hyper does not read (it reads nothing while the
/// body it holds is still being worked through, as with a small gzip body that inflates to a long
/// import, or while a backup waits for a client that stopped reading): the connection's socket,
/// shared with [`Conn`] but not kept open by this handle. Only an import, a backup or a stream
/// duplicates the socket's descriptor, for its watch; other requests cost no descriptor. Unix only;
/// elsewhere imports stop when hyper next reads, backups when hyper's next write fails.
struct Peer {
    #[cfg(unix)]
    socket: std::sync::Weak<TcpStream>,
}

impl Peer {
    fn of(tcp: &Arc<TcpStream>) -> Peer {
        #[cfg(unix)]
        {
            Peer { socket: Arc::downgrade(tcp) }
        }
        #[cfg(not(unix))]
        {
            let _ = tcp;
            Peer {}
        }
    }

    /// Starts watching the socket for the client's close (a reset; its FIN too if `fin_is_gone`);
    /// the signal's receivers see `true` then. The watch ends when every receiver is dropped (the
    /// request is over).
    fn watch(&self, fin_is_gone: bool) -> Option<ClientGone> {
        #[cfg(unix)]
        {
            use std::os::fd::AsFd;
            // the watch has its own descriptor, so that the socket closes when the connection
            // ends, whatever the watch is doing
            let socket = self.socket.upgrade()?.as_fd().try_clone_to_owned().ok()?;
            let socket = Arc::new(TcpStream::from_std(std::net::TcpStream::from(socket)).ok()?);
            let (tx, rx) = tokio::sync::watch::channel(false);
            tokio::spawn(watch_peer(socket.clone(), tx, fin_is_gone));
            Some(ClientGone(rx, Some(socket)))
        }
        #[cfg(not(unix))]
        {
            let _ = fin_is_gone;
            None
        }
    }
}

/// Waits for the client to close the connection without reading anything hyper has to read:
/// the socket's readiness says "read closed" once the client's FIN (or reset) arrived, even with
/// body bytes still waiting in front of it. Readable-but-open readiness is cleared and waited on
/// again, so the watch sleeps until the socket changes. Unless `fin_is_gone`, a FIN alone (a
/// half-close: the client still reads) ends the watch without a signal.
#[cfg(unix)]
async fn watch_peer(socket: Arc<TcpStream>, gone: tokio::sync::watch::Sender<bool>, fin_is_gone: bool) {
    use tokio::io::Interest;
    loop {
        tokio::select! {
            () = gone.closed() => return,
            ready = socket.ready(Interest::READABLE) => match ready {
                Ok(ready) if !ready.is_read_closed() => {
                    // nothing to take from the socket: only forget this readiness
                    let _ = socket.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
                }
                Ok(_) if !fin_is_gone && !matches!(socket.take_error(), Ok(Some(_))) => return,
                _ => {
                    let _ = gone.send(true);
                    return;
                }
            },
        }
    }
}

fn log(result: Result<(), hyper::Error>) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Counts one request as being answered by the application, until dropped.
struct Answering(Arc<AtomicUsize>);

impl Answering {
    fn start(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Answering(count.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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

/// The TCP stream of a connection, which writes a problem document in place of hyper's own
/// body-less error response. The stream is shared (by reference, through `Arc`) with the
/// connection's [`Peer`], which holds it weakly: this is its only owner.
struct Conn {
    tcp: Arc<TcpStream>,
    answering: Arc<AtomicUsize>,
    /// the problem response being written, and how much of it is out
    replacement: Option<(Vec<u8>, usize)>,
    /// a character the request line of the head being read holds in its target, which the http
    /// crate refuses: what hyper's 400 is about, if it comes
    refused: Option<Refused>,
}

/// A byte of a request target that a URL must percent-encode, and its 0-based offset in the
/// target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refused {
    byte: u8,
    at: usize,
}

/// Which bytes the http crate takes in a request target's path, and in its query: asked of the
/// crate itself, byte by byte, once, so that these rules are exactly the ones hyper applies.
/// Bytes of 0x80 and above are taken (a target must be UTF-8 as a whole, which is another check).
fn target_rules() -> &'static [[bool; 256]; 2] {
    static RULES: std::sync::OnceLock<[[bool; 256]; 2]> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let mut rules = [[true; 256]; 2];
        for b in 0..=0x7fu8 {
            let takes = |prefix: &[u8]| {
                let mut target = prefix.to_vec();
                target.push(b);
                axum::http::uri::PathAndQuery::try_from(target.as_slice()).is_ok()
            };
            rules[0][usize::from(b)] = takes(b"/");
            rules[1][usize::from(b)] = takes(b"/?");
        }
        rules
    })
}

/// The first byte of the request target in `head`'s first line that the http crate refuses, if
/// the line is there whole (method, target, version). A `#` ends the scan: hyper drops a fragment.
fn refused_in_target(head: &[u8]) -> Option<Refused> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line.iter().position(|&b| b == b' ')? + 1;
    let end = start + line.get(start..)?.iter().rposition(|&b| b == b' ')?;
    let target = line.get(start..end)?;
    if !target.starts_with(b"/") {
        // `*`, or an absolute form: not the common case this is for
        return None;
    }
    let rules = target_rules();
    let mut part = 0;
    for (at, &byte) in target.iter().enumerate() {
        match byte {
            b'#' => return None,
            b'?' if part == 0 => part = 1,
            _ if !rules[part][usize::from(byte)] => return Some(Refused { byte, at }),
            _ => {}
        }
    }
    None
}

/// The status of a response head hyper writes by itself, if `bytes` is one: a 400, 414 or 431
/// head alone, without a content type (every error the application sends has one, even to HEAD).
fn hypers_own(bytes: &[u8]) -> Option<StatusCode> {
    let rest = bytes.strip_prefix(b"HTTP/1.1 ")?;
    if !bytes.ends_with(b"\r\n\r\n") || bytes.windows(15).any(|w| w.eq_ignore_ascii_case(b"\ncontent-type: ")) {
        return None;
    }
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    matches!(status, StatusCode::BAD_REQUEST | StatusCode::URI_TOO_LONG | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        .then_some(status)
}

/// The whole HTTP/1.1 response, a problem document, that replaces hyper's `status`; `refused`,
/// what the request target held that the http crate refuses, if anything.
fn problem_response(status: StatusCode, refused: Option<Refused>) -> Vec<u8> {
    let (code, detail) = match (status, refused) {
        (StatusCode::URI_TOO_LONG, _) => {
            ("uri_too_long", "the request target is longer than the server accepts (64 KiB)".to_owned())
        }
        (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, _) => {
            ("headers_too_large", "the request head is larger than the server accepts".to_owned())
        }
        (_, Some(Refused { byte, at })) => (
            "malformed_request",
            format!(
                "the request target holds {} at byte {at}, which a URL must percent-encode (as %{byte:02X}); \
                 a placeholder such as <cursor> left in a URL does this",
                shown(byte)
            ),
        ),
        _ => (
            "malformed_request",
            "the request line or a header is malformed (e.g. an invalid Content-Length)".to_owned(),
        ),
    };
    let body = serde_json::to_vec(&ApiError::new(status, code, detail).problem()).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

/// A byte as a reader would name it: `'<'`, or `a space`, or `byte 0x01`.
fn shown(byte: u8) -> String {
    match byte {
        b' ' => "a space".to_owned(),
        0x21..=0x7e => format!("'{}'", char::from(byte)),
        _ => format!("byte 0x{byte:02x}"),
    }
}

impl Conn {
    /// Takes over `bytes` if they are hyper's own error response; true when it did.
    fn intercept(&mut self, bytes: &[u8]) -> bool {
        if self.replacement.is_some() {
            return true;
        }
        if self.answering.load(Ordering::Acquire) != 0 {
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
            let n = ready!(poll_write(&self.tcp, cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *sent += n;
        }
        Poll::Ready(Ok(()))
    }
}

/// Writes `buf` through a shared reference, as `TcpStream`'s own `poll_write` does.
fn poll_write(tcp: &TcpStream, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
    loop {
        ready!(tcp.poll_write_ready(cx))?;
        match tcp.try_write(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            done => return Poll::Ready(done),
        }
    }
}

/// The most one read of a connection takes from the socket.
const MAX_READ: usize = 64 << 10;

thread_local! {
    /// Where a runtime thread's socket reads land before they are copied into hyper's buffer:
    /// one per thread rather than per connection, since a read is copied out before the poll
    /// returns, so idle connections hold no extra memory.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(self.as_mut().read_socket(cx, buf))?;
        // a read while no request is being answered starts the next head
        if self.answering.load(Ordering::Acquire) == 0 {
            let head = buf.filled().get(before..).unwrap_or_default();
            self.refused = refused_in_target(head);
        }
        Poll::Ready(Ok(()))
    }
}

impl Conn {
    /// Reads from the socket into `buf`.
    fn read_socket(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        // hyper hands over its read buffer (8 KiB and more) uninitialised each time, and zeroing
        // it before every `recv` cost more than the `recv` (a profile of point GETs: 2.3% of the
        // server's time). So the socket is read into the thread's scratch buffer, zeroed once as
        // it grows, and only what arrived is copied over.
        let want = buf.remaining().min(MAX_READ);
        SCRATCH.with_borrow_mut(|scratch| {
            if scratch.len() < want {
                scratch.resize(want, 0);
            }
            loop {
                ready!(self.tcp.poll_read_ready(cx))?;
                match self.tcp.try_read(&mut scratch[..want]) {
                    Ok(n) => {
                        buf.put_slice(&scratch[..n]);
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        })
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.intercept(buf) {
            // hyper's bytes are dropped: the replacement says the same, with a body
            ready!(this.drive(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        poll_write(&this.tcp, cx, buf)
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
        loop {
            ready!(this.tcp.poll_write_ready(cx))?;
            match this.tcp.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // a TCP stream has nothing to flush
        self.drive(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drive(cx))?;
        // what `TcpStream`'s own `poll_shutdown` does, through a shared reference
        Poll::Ready(socket2::SockRef::from(&*self.tcp).shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_error_head_is_taken_for_hypers_own() {
        assert_eq!(
            hypers_own(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: x\r\n\r\n"),
            Some(StatusCode::URI_TOO_LONG)
        );
        assert_eq!(hypers_own(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), None);
        // the application's own errors carry a content type (a HEAD answer has no body)
        assert_eq!(hypers_own(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\n\r\n"), None);
        assert_eq!(hypers_own(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"), None);
        assert_eq!(hypers_own(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nhello"), None);
        assert_eq!(hypers_own(b"{\"HTTP/1.1 400\":1}"), None);
        let response = String::from_utf8(problem_response(StatusCode::BAD_REQUEST, None)).unwrap_or_default();
        assert!(response.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\n"));
        assert!(response.ends_with("\"code\":\"malformed_request\"}"), "{response}");
    }

    #[test]
    fn a_target_character_a_url_must_encode_is_found() {
        let refused = |head: &[u8]| refused_in_target(head).map(|r| (char::from(r.byte), r.at));
        let head = b"GET /v1/tables/users/documents?limit=100&cursor=<cursor> HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(refused(head), Some(('<', 44)));
        assert_eq!(refused(b"GET /a>b HTTP/1.1\r\n"), Some(('>', 2)));
        assert_eq!(refused(b"GET /a?m=\"b\" HTTP/1.1\r\n"), Some(('"', 5)), "taken in a path, not in a query");
        assert_eq!(refused(b"GET /a?b=c d HTTP/1.1\r\n"), Some((' ', 6)), "the version is after the last space");
        // what the http crate takes is not reported: percent-encoded, braces in a query, UTF-8
        for fine in [
            &b"GET /v1/x?cursor=%3Ccursor%3E HTTP/1.1\r\n"[..],
            b"GET /v1/x?match={host=~h.} HTTP/1.1\r\n",
            b"GET /a\"b HTTP/1.1\r\n",
            "GET /v1/tables/caf\u{e9} HTTP/1.1\r\n".as_bytes(),
            b"GET /a#<frag> HTTP/1.1\r\n",
            b"GET /v1/x?cursor=<cur",
        ] {
            assert_eq!(refused(fine), None, "{}", String::from_utf8_lossy(fine));
        }
        let response =
            String::from_utf8(problem_response(StatusCode::BAD_REQUEST, refused_in_target(head))).unwrap_or_default();
        assert!(response.contains("holds '<' at byte 44, which a URL must percent-encode (as %3C)"), "{response}");
    }
}
