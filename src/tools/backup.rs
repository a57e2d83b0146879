//! `mosaicdb backup`: asks a running server for a backup and writes the archive out as it
//! arrives, checking its framing and checksum on the way, so a cut or damaged stream is an error
//! rather than a file that only fails at restore time.

use super::client::{self, ClientError};
use crate::service::backup::archive::{ArchiveError, Decoder, Header, Item, Summary};
use axum::http::{Method, StatusCode};
use http_body_util::BodyExt;
use std::io::Write;
use std::time::Duration;

/// The path of the backup route, after the server's base URL.
pub const BACKUP_PATH: &str = "/v1/admin/backup";

/// Why a backup failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupClientError {
    /// The server could not be asked.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server answered with an error.
    #[error("the server answered {status}: {detail}")]
    Refused {
        /// the status
        status: StatusCode,
        /// the problem's detail and code, or the body as text
        detail: String,
    },
    /// The answer stopped coming.
    #[error("no data from the server for {0:?}")]
    Stalled(Duration),
    /// The connection broke during the answer.
    #[error("the backup stream broke: {0}")]
    Stream(hyper::Error),
    /// The archive is truncated or corrupt.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The archive could not be written out.
    #[error("cannot write the archive: {0}")]
    Output(std::io::Error),
}

/// The URL of the backup of database `database` (`None`: `default`) of the server at
/// `base_url` (`http://host:port`, maybe with a path prefix).
pub fn backup_url(base_url: &str, database: Option<&str>) -> String {
    let base = base_url.trim_end_matches('/');
    match database {
        Some(db) => format!("{base}/v1/db/{}/admin/backup", crate::api::encode_path(db)),
        None => format!("{base}{BACKUP_PATH}"),
    }
}

/// Streams a backup from `url` (see [`backup_url`]) into `out`, verifying it as it arrives; `key`
/// is sent as `Authorization: Bearer`. `timeout` bounds the wait for the answer to start and
/// for each piece of it. Returns the archive's header and summary once its trailer is verified;
/// on an error `out` holds a partial archive.
pub async fn backup(
    url: &str,
    key: Option<&str>,
    timeout: Duration,
    out: &mut impl Write,
) -> Result<(Header, Summary), BackupClientError> {
    let response = client::send(Method::POST, url, key, Default::default(), timeout).await?;
    let status = response.status();
    let mut body = response.into_body();
    if status != StatusCode::OK {
        return Err(BackupClientError::Refused { status, detail: problem_detail(&mut body, timeout).await });
    }
    let mut decoder = Decoder::new();
    let mut header = None;
    loop {
        let frame = match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => return Err(BackupClientError::Stalled(timeout)),
            Ok(None) => break,
            Ok(Some(frame)) => frame.map_err(BackupClientError::Stream)?,
        };
        let Ok(data) = frame.into_data() else { continue };
        out.write_all(&data).map_err(BackupClientError::Output)?;
        decoder.push(&data);
        while let Some(item) = decoder.next_item()? {
            if let Item::Header(h) = item {
                header = Some(h);
            }
        }
    }
    out.flush().map_err(BackupClientError::Output)?;
    let summary = decoder.finish()?;
    Ok((header.ok_or(ArchiveError::Truncated)?, summary))
}

/// The `detail` (and `code`) of a problem document, or the body as text (at most 64 KiB read).
async fn problem_detail(body: &mut hyper::body::Incoming, timeout: Duration) -> String {
    let mut text = Vec::new();
    while text.len() < 64 << 10 {
        match tokio::time::timeout(timeout, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    text.extend_from_slice(&data);
                }
            }
            _ => break,
        }
    }
    let problem: Option<serde_json::Value> = serde_json::from_slice(&text).ok();
    match problem.as_ref().and_then(|p| Some((p.get("detail")?.as_str()?, p.get("code")?.as_str()?))) {
        Some((detail, code)) => format!("{detail} ({code})"),
        None if text.is_empty() => "no details".to_owned(),
        None => String::from_utf8_lossy(&text).into_owned(),
    }
}
