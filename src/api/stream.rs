//! Response bodies written on the blocking pool: the writer fills pieces and hands them through a
//! bounded channel that the body drains, so a slow client slows the writer (backpressure) and the
//! server holds a few pieces, never the whole answer. Used by the backup archive and by NDJSON
//! streams of query results and exports.

use super::error::ApiError;
use super::{AppState, ClientGone};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version, header};
use axum::response::Response;
use futures_util::StreamExt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// Bytes handed to the connection at a time.
pub(super) const PIECE: usize = 64 << 10;
/// Pieces written ahead of the connection: with the piece being filled, what a stream holds in
/// memory besides the snapshot's current blocks.
pub(super) const AHEAD: usize = 8;

/// A streamed answer: one compact JSON document per line, each ending in `\n`.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, example = "{\"_id\":\"a\",\"age\":30}\n{\"_id\":\"b\",\"age\":41}\n")]
#[allow(dead_code)] // only its schema is used
pub(super) struct NdjsonDocuments(String);

/// The NDJSON media types a client may ask for (the first is the one answered).
pub const NDJSON_TYPES: [&str; 3] = ["application/x-ndjson", "application/ndjson", "application/jsonl"];

/// True when the request's `Accept` prefers NDJSON: an NDJSON type is listed with a q above 0 and
/// above that of an explicit `application/json` (a tie goes to JSON; `*/*` alone is not a wish
/// for a stream).
pub fn wants_ndjson(headers: &HeaderMap) -> bool {
    let (mut ndjson, mut json) = (0.0f32, 0.0f32);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()))
                .next()
                .unwrap_or(1.0);
            if NDJSON_TYPES.iter().any(|t| t.eq_ignore_ascii_case(media)) {
                ndjson = ndjson.max(q);
            } else if media.eq_ignore_ascii_case("application/json") {
                json = json.max(q);
            }
        }
    }
    ndjson > 0.0 && ndjson > json
}

/// One of the `--max-streams` answers the server writes at once (NDJSON streams and backups):
/// each holds a thread of the blocking pool and a snapshot while its client reads, so without a
/// cap a few slow clients could take every thread and stall every query. Held until the writer
/// ends.
pub(super) struct StreamSlot(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

/// Takes a stream slot, or refuses with 503 `too_many_streams` (and `Retry-After`) when all are
/// taken.
pub(super) fn slot(state: &AppState) -> Result<StreamSlot, ApiError> {
    state.streams.clone().try_acquire_owned().map(StreamSlot).map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("the server already writes {} streamed answers (--max-streams); retry shortly", state.max_streams),
        )
        .retry_after(1)
    })
}

/// Refuses an NDJSON stream over HTTP/1.0 (406 `not_acceptable`): without chunked encoding the
/// body ends when the connection closes, so a stream cut short would look whole.
pub(super) fn check_version(version: Version) -> Result<(), ApiError> {
    if version < Version::HTTP_11 {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "an NDJSON stream needs HTTP/1.1 (chunked encoding tells a whole answer from a cut one): use HTTP/1.1, or read pages",
        ));
    }
    Ok(())
}

/// Marks a page answer of a route that also streams (by `Accept`) as depending on `Accept`.
pub(super) fn vary_accept(mut response: Response) -> Response {
    response.headers_mut().append(header::VARY, HeaderValue::from_static("accept"));
    response
}

/// The writer side of a stream: fills a piece, then hands it over, waiting while the connection
/// is behind (backpressure) — but while it waits, every window (the request timeout) must carry
/// at least `min_bytes` (`--import-min-bytes`, as an import body must bring), or the stream is cut.
/// It also stops at once when the server shuts down.
pub(super) struct Pipe {
    tx: mpsc::Sender<Bytes>,
    runtime: tokio::runtime::Handle,
    window: Duration,
    min_bytes: usize,
    /// the current window: when it ends, and the bytes handed over in it
    window_end: tokio::time::Instant,
    sent: usize,
    stopping: tokio::sync::watch::Receiver<bool>,
    piece: Vec<u8>,
}

/// Why a hand-over failed.
enum Fail {
    Gone,
    Slow,
    Stopping,
}

impl Pipe {
    fn hand_over(&mut self) -> io::Result<()> {
        if self.piece.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(&mut self.piece, Vec::with_capacity(PIECE)));
        let len = piece.len();
        let (tx, window, min_bytes) = (&self.tx, self.window, self.min_bytes);
        let (window_end, sent, stopping) = (&mut self.window_end, &mut self.sent, &mut self.stopping);
        let outcome = self.runtime.block_on(async move {
            if *stopping.borrow() {
                return Err(Fail::Stopping);
            }
            let now = tokio::time::Instant::now();
            if now >= *window_end {
                // the writer itself took the window (a slow scan): not the client's fault
                (*window_end, *sent) = (now + window, 0);
            }
            let send = tx.send(piece);
            tokio::pin!(send);
            loop {
                tokio::select! {
                    done = &mut send => return done.map_err(|_| Fail::Gone),
                    () = tokio::time::sleep_until(*window_end) => {
                        if *sent < min_bytes {
                            return Err(Fail::Slow);
                        }
                        (*window_end, *sent) = (*window_end + window, 0);
                    }
                    _ = stopping.wait_for(|s| *s) => return Err(Fail::Stopping),
                }
            }
        });
        match outcome {
            Ok(()) => {
                self.sent += len;
                Ok(())
            }
            Err(Fail::Gone) => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client went away")),
            Err(Fail::Slow) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read less than {} bytes in {} s", self.min_bytes, self.window.as_secs()),
            )),
            Err(Fail::Stopping) => Err(io::Error::new(io::ErrorKind::Interrupted, "the server is shutting down")),
        }
    }
}

impl io::Write for Pipe {
    /// Takes at most what fills the current piece, so a piece never exceeds [`PIECE`] bytes
    /// (`write_all` hands over the rest in further calls).
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = bytes.len().min(PIECE - self.piece.len());
        self.piece.extend_from_slice(&bytes[..n]);
        if self.piece.len() >= PIECE {
            self.hand_over()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

/// True for the errors of a client that went away or read too slowly, or of a shutdown: the
/// ordinary ends of a stream, logged at debug (anything else, e.g. a store error, at warn).
fn ordinary(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::TimedOut
    )
}

/// A response whose body `write` produces on the blocking pool through a [`Pipe`]. `write`
/// returns `Ok` once it has written everything: only then does the body end cleanly. Any error
/// (of the writer or the store, a client that read too little for a window, one that went away —
/// seen through `gone` even while hyper is not writing — or a shutdown) cuts the body short, so
/// the client sees an incomplete answer (no final chunk), never a clean end; the writer then
/// shuts the connection's socket down, so that a write hyper has pending to a client that reads
/// nothing fails instead of waiting forever. `keep` lives as long as the body (e.g. a guard whose
/// drop stops the writer); `slot` as long as the writer.
pub(super) fn piped<K: Send + 'static>(
    state: &AppState,
    db: &crate::service::Db,
    slot: StreamSlot,
    gone: Option<ClientGone>,
    keep: K,
    write: impl FnOnce(&mut Pipe) -> io::Result<()> + Send + 'static,
) -> Response {
    let (tx, rx) = mpsc::channel(AHEAD);
    // set once the whole body is handed over: a channel closed without it is a failure
    let whole = Arc::new(AtomicBool::new(false));
    let (window, min_bytes, runtime, done) =
        (state.import.window, state.import.min_bytes.max(1), tokio::runtime::Handle::current(), whole.clone());
    let stopping = db.changefeed.stopping();
    let cut = gone.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let window_end = tokio::time::Instant::now() + window;
        let mut pipe =
            Pipe { tx, runtime, window, min_bytes, window_end, sent: 0, stopping, piece: Vec::with_capacity(PIECE) };
        match write(&mut pipe) {
            // marked whole before the channel closes (with the pipe, below)
            Ok(()) => done.store(true, Ordering::Release),
            Err(e) => {
                if ordinary(&e) {
                    tracing::debug!(error = %e, "a streamed answer ended early");
                } else {
                    tracing::warn!(error = %e, "a streamed answer ended early");
                }
                if let Some(gone) = &cut {
                    gone.cut();
                }
            }
        }
        drop(pipe);
    });
    // the state is None once the stream has failed; fused, since the compression layer polls
    // once more after the end
    let stopping = db.changefeed.stopping();
    let body = futures_util::stream::unfold(Some((rx, gone, whole, keep, stopping)), |state| async move {
        let (mut rx, gone, whole, keep, mut stopping) = state?;
        let next = tokio::select! {
            piece = rx.recv() => match piece {
                Some(piece) => Ok(piece),
                None if whole.load(Ordering::Acquire) => return None,
                None => Err(io::Error::other("the answer ended early (see the server log)")),
            },
            () = ClientGone::wait(gone.clone()) => {
                Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the client went away"))
            }
            // the server is shutting down: dropping `keep` stops a scan between two pieces
            Ok(_) = stopping.wait_for(|s| *s) => Err(io::Error::other("the server is shutting down")),
        };
        match next {
            Ok(piece) => Some((Ok(piece), Some((rx, gone, whole, keep, stopping)))),
            // dropping the receiver stops the writer at its next piece
            Err(e) => Some((Err(e), None)),
        }
    })
    .fuse();
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An NDJSON response written by `write` (see [`piped`]).
pub(super) fn ndjson<K: Send + 'static>(
    state: &AppState,
    db: &crate::service::Db,
    slot: StreamSlot,
    gone: Option<ClientGone>,
    keep: K,
    write: impl FnOnce(&mut Pipe) -> io::Result<()> + Send + 'static,
) -> Response {
    let mut response = piped(state, db, slot, gone, keep, write);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON_TYPES[0]));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        wants_ndjson(&h)
    }

    /// A write longer than a piece is taken a piece at a time: no piece handed to the connection
    /// is over [`PIECE`], whatever the length of one document.
    #[test]
    fn pieces_are_bounded() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (tx, mut rx) = mpsc::channel(64);
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        let window = Duration::from_secs(30);
        let window_end = runtime.block_on(async { tokio::time::Instant::now() + window });
        let mut pipe = Pipe {
            tx,
            runtime: runtime.handle().clone(),
            window,
            min_bytes: 1,
            window_end,
            sent: 0,
            stopping,
            piece: Vec::with_capacity(PIECE),
        };
        let doc = vec![b'x'; 3 * PIECE + 100];
        io::Write::write_all(&mut pipe, b"{}\n").unwrap();
        io::Write::write_all(&mut pipe, &doc).unwrap();
        io::Write::flush(&mut pipe).unwrap();
        drop(pipe);
        let mut sizes = Vec::new();
        while let Ok(piece) = rx.try_recv() {
            sizes.push(piece.len());
        }
        assert_eq!(sizes.iter().sum::<usize>(), doc.len() + 3);
        assert!(sizes.iter().all(|&n| n <= PIECE), "{sizes:?}");
    }

    #[test]
    fn accept_negotiation() {
        assert!(accept("application/x-ndjson"));
        assert!(accept("application/jsonl"));
        assert!(accept("Application/NDJSON; charset=utf-8"));
        assert!(accept("application/json;q=0.5, application/x-ndjson"));
        assert!(accept("*/*, application/x-ndjson"));
        assert!(!accept("*/*"));
        assert!(!accept("application/json"));
        assert!(!accept("application/x-ndjson;q=0"));
        assert!(!accept("application/x-ndjson;q=0.5, application/json"));
        // a tie goes to JSON
        assert!(!accept("application/json, application/x-ndjson"));
        assert!(!accept("application/x-ndjson;q=0.8, application/json;q=0.8"));
        assert!(!wants_ndjson(&HeaderMap::new()));
    }
}
