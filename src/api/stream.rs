//! Response bodies written on the blocking pool: the writer fills pieces and hands them through a
//! bounded channel that the body drains, so a slow client slows the writer (backpressure) and the
//! server holds a few pieces, never the whole answer. Used by the backup archive and by NDJSON
//! streams of query results and exports.

use super::{AppState, ClientGone};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
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
/// not below that of an explicit `application/json` (`*/*` alone is not a wish for a stream).
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
    ndjson > 0.0 && ndjson >= json
}

/// The writer side of a stream: fills a piece, then hands it over, waiting while the connection
/// is behind (backpressure) — but at most `stall` for one piece.
pub(super) struct Pipe {
    tx: mpsc::Sender<Bytes>,
    runtime: tokio::runtime::Handle,
    stall: Duration,
    piece: Vec<u8>,
}

impl Pipe {
    fn hand_over(&mut self) -> io::Result<()> {
        if self.piece.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(&mut self.piece, Vec::with_capacity(PIECE)));
        match self.runtime.block_on(tokio::time::timeout(self.stall, self.tx.send(piece))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client went away")),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {} s", self.stall.as_secs()),
            )),
        }
    }
}

impl io::Write for Pipe {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.piece.extend_from_slice(bytes);
        if self.piece.len() >= PIECE {
            self.hand_over()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

/// A response whose body `write` produces on the blocking pool through a [`Pipe`]. `write`
/// returns `Ok` once it has written everything: only then does the body end cleanly. Any error
/// (of the writer or the store, a client that read nothing for `stall`, or one that went away —
/// seen through `gone` even while hyper is not writing) cuts the body short, so the client sees
/// an incomplete answer (no final chunk), never a clean end. `keep` lives as long as the body
/// (e.g. a guard whose drop stops the writer).
pub(super) fn piped<K: Send + 'static>(
    state: &AppState,
    gone: Option<ClientGone>,
    keep: K,
    write: impl FnOnce(&mut Pipe) -> io::Result<()> + Send + 'static,
) -> Response {
    let (tx, rx) = mpsc::channel(AHEAD);
    // set once the whole body is handed over: a channel closed without it is a failure
    let whole = Arc::new(AtomicBool::new(false));
    let (stall, runtime, done) = (state.import.window, tokio::runtime::Handle::current(), whole.clone());
    tokio::task::spawn_blocking(move || {
        let mut pipe = Pipe { tx, runtime, stall, piece: Vec::with_capacity(PIECE) };
        match write(&mut pipe) {
            // marked whole before the channel closes (with the pipe, below)
            Ok(()) => done.store(true, Ordering::Release),
            Err(e) => tracing::warn!(error = %e, "a streamed answer ended early"),
        }
        drop(pipe);
    });
    // the state is None once the stream has failed; fused, since the compression layer polls
    // once more after the end
    let body = futures_util::stream::unfold(Some((rx, gone, whole, keep)), |state| async move {
        let (mut rx, gone, whole, keep) = state?;
        let next = tokio::select! {
            piece = rx.recv() => match piece {
                Some(piece) => Ok(piece),
                None if whole.load(Ordering::Acquire) => return None,
                None => Err(io::Error::other("the answer ended early (see the server log)")),
            },
            () = ClientGone::wait(gone.clone()) => {
                Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the client went away"))
            }
        };
        match next {
            Ok(piece) => Some((Ok(piece), Some((rx, gone, whole, keep)))),
            // dropping the receiver stops the writer at its next piece
            Err(e) => Some((Err(e), None)),
        }
    })
    .fuse();
    Response::new(Body::from_stream(body))
}

/// An NDJSON response written by `write` (see [`piped`]).
pub(super) fn ndjson<K: Send + 'static>(
    state: &AppState,
    gone: Option<ClientGone>,
    keep: K,
    write: impl FnOnce(&mut Pipe) -> io::Result<()> + Send + 'static,
) -> Response {
    let mut response = piped(state, gone, keep, write);
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
        assert!(!wants_ndjson(&HeaderMap::new()));
    }
}
