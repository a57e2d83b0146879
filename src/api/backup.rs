//! `POST /v1/admin/backup`: the online backup, streamed. Kept apart from the timed routes: a
//! backup takes as long as the data takes to send.

use super::{AppState, ClientGone};
use crate::api::db_path::Database;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::io;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The route (the OpenAPI document lists it with the admin routes).
pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(backup))
}

/// A backup archive (binary): magic `MOSAICBK`, format version, JSON header, length-prefixed
/// records, a trailer with record counts and a SHA-256 (docs/operations.md describes the format).
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // only its schema is used
struct BackupArchive(Vec<u8>);

/// Streams a consistent snapshot of the whole database — every table, index, edge, time series
/// and expiry entry as of one instant, the snapshot point, taken before the answer starts —
/// while writes go on. The body is a versioned archive (magic `MOSAICBK`, format version, a JSON
/// header, length-prefixed records, a trailer with record counts and a SHA-256 over everything
/// before it); `mosaicdb backup` verifies it as it arrives and `mosaicdb restore` loads it. The
/// request timeout does not apply; a client that reads nothing for that long, or goes away, ends
/// the backup, and the body is cut short (an archive without its trailer, which every reader
/// refuses).
#[utoipa::path(post, path = "/v1/admin/backup", tag = "admin", responses(
    (status = 503, description = "the server already writes `--max-streams` streamed answers (`too_many_streams`, with \
        `Retry-After`)", body = super::error::Problem, content_type = "application/problem+json"),
    (status = 200, description = "the archive, streamed", content_type = "application/octet-stream", body = BackupArchive,
        headers(
            ("Content-Disposition" = String,
                description = "`attachment; filename=\"mosaicdb-20260102T030405Z.backup\"` (the snapshot time, UTC)"),
            ("X-Mosaic-Backup-Format" = u16, description = "the archive's format version (1)"),
            ("X-Mosaic-Snapshot-At" = String, description = "the snapshot point, RFC 3339 (UTC)"),
        )),
))]
async fn backup(
    Database(db): Database,
    State(state): State<AppState>,
    gone: Option<Extension<ClientGone>>,
) -> Response {
    // a backup is a streamed answer like the others: it takes one of their slots
    let slot = match super::stream::slot(&state) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    // the snapshot point: before the answer's head is sent
    let backup = crate::service::backup::backup(&db);
    let snapshot_at = backup.header().created_at.clone();
    let logged_at = snapshot_at.clone();
    let disposition = format!("attachment; filename=\"{}\"", backup.file_name());
    // an archive that did not end is cut short rather than ended cleanly
    let mut response = super::stream::piped(&state, &db, slot, gone.map(|g| g.0), (), move |pipe| {
        let (_, summary) = backup.write_to(pipe).map_err(io::Error::other)?;
        tracing::info!(
            snapshot_at = logged_at,
            records = summary.records,
            bytes = summary.bytes,
            sha256 = %summary.sha256_hex(),
            "backup written"
        );
        Ok(())
    });
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
