//! `POST /v1/admin/backup`: the online backup, streamed. Kept apart from the timed routes: a
//! backup takes as long as the data takes to send.

use super::{AppState, ClientGone};
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The route (the OpenAPI document lists it with the admin routes).
pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(backup))
}

/// A backup archive (binary): magic `MOSAICBK`, format version, JSON header, length-prefixed
/// records, a trailer with record counts and a SHA-256 (the README describes the format).
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // only its schema is used
struct BackupArchive(Vec<u8>);

/// Bytes handed to the connection at a time.
const PIECE: usize = 64 << 10;
/// Pieces written ahead of the connection: with the piece being filled, what a backup holds in
/// memory besides the snapshot's current blocks.
const AHEAD: usize = 8;

/// Streams a consistent snapshot of the whole database — every table, index, edge, time series
/// and expiry entry as of one instant, the snapshot point, taken before the answer starts —
/// while writes go on. The body is a versioned archive (magic `MOSAICBK`, format version, a JSON
/// header, length-prefixed records, a trailer with record counts and a SHA-256 over everything
/// before it); `mosaicdb backup` verifies it as it arrives and `mosaicdb restore` loads it. The
/// request timeout does not apply; a client that reads nothing for that long, or goes away, ends
/// the backup, and the body is cut short (an archive without its trailer, which every reader
/// refuses).
#[utoipa::path(post, path = "/v1/admin/backup", tag = "admin", responses(
    (status = 200, description = "the archive, streamed", content_type = "application/octet-stream", body = BackupArchive,
        headers(
            ("Content-Disposition" = String,
                description = "`attachment; filename=\"mosaicdb-20260102T030405Z.backup\"` (the snapshot time, UTC)"),
            ("X-Mosaic-Backup-Format" = u16, description = "the archive's format version (1)"),
            ("X-Mosaic-Snapshot-At" = String, description = "the snapshot point, RFC 3339 (UTC)"),
        )),
))]
async fn backup(State(state): State<AppState>, gone: Option<Extension<ClientGone>>) -> Response {
    // the snapshot point: before the answer's head is sent
    let backup = state.db.backup();
    let snapshot_at = backup.header().created_at.clone();
    let logged_at = snapshot_at.clone();
    let disposition = format!("attachment; filename=\"{}\"", backup.file_name());
    let (tx, rx) = mpsc::channel(AHEAD);
    // set once the whole archive is handed over: a channel closed without it is a failure, and
    // the body is then cut short rather than ended as if whole
    let whole = Arc::new(AtomicBool::new(false));
    let (stall, runtime, done) = (state.import.window, tokio::runtime::Handle::current(), whole.clone());
    tokio::task::spawn_blocking(move || {
        let pipe = Pipe { tx, runtime, stall, piece: Vec::with_capacity(PIECE) };
        match backup.write_to(pipe) {
            Ok((pipe, summary)) => {
                done.store(true, Ordering::Release);
                drop(pipe);
                tracing::info!(
                    snapshot_at = logged_at,
                    records = summary.records,
                    bytes = summary.bytes,
                    sha256 = %summary.sha256_hex(),
                    "backup written"
                );
            }
            Err(e) => tracing::warn!(error = %e, "backup ended early"),
        }
    });
    let gone = gone.map(|g| g.0);
    // the state is None once the stream has failed; fused, since the compression layer polls
    // once more after the end
    let body = futures_util::stream::unfold(Some((rx, gone, whole)), |state| async move {
        let (mut rx, gone, whole) = state?;
        let next = tokio::select! {
            piece = rx.recv() => match piece {
                Some(piece) => Ok(piece),
                None if whole.load(Ordering::Acquire) => return None,
                None => Err(io::Error::other("the backup ended early (see the server log)")),
            },
            () = ClientGone::wait(gone.clone()) => {
                Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the client went away"))
            }
        };
        match next {
            Ok(piece) => Some((Ok(piece), Some((rx, gone, whole)))),
            // dropping the receiver stops the writer at its next piece
            Err(e) => Some((Err(e), None)),
        }
    })
    .fuse();
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-mosaic-backup-format", HeaderValue::from(crate::service::backup::FORMAT_VERSION));
    for (name, value) in [(header::CONTENT_DISPOSITION.as_str(), disposition), ("x-mosaic-snapshot-at", snapshot_at)] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
    response
}

/// The writer side of the stream: fills a piece, then hands it over, waiting while the connection
/// is behind (backpressure) — but at most `stall` for one piece.
struct Pipe {
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
