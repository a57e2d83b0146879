//! Liveness, readiness and server information.

use super::AppState;
use super::auth::{Caller, Role};
use super::error::{ApiError, Problem};
use crate::api::db_path::Database;
use crate::service::cluster::ClusterStatus;
use crate::service::{Health, Info};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

/// A status answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// `ready`
    #[schema(example = "ready")]
    pub status: &'static str,
    /// cluster mode: this server's role and how far behind it is; the leader, the epoch and the
    /// state applied only to a caller with a valid API key (or with `--ready-details`, or when
    /// no keys are configured)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ReadyCluster>,
}

/// What `/ready` says of the cluster.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyCluster {
    /// `leader` or `follower`
    pub role: crate::storage::Role,
    /// how far behind the leader's last state the follower is, in milliseconds (0: caught up)
    pub lag_ms: u64,
    /// the leader's advertised URL (empty: none known); only to a caller with a key
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// the backend's epoch; only to a caller with a key
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// the last state this server has applied; only to a caller with a key
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied: Option<u64>,
}

impl ReadyCluster {
    /// `status`, whole when `details`, else its role and lag only.
    fn of(status: ClusterStatus, details: bool) -> ReadyCluster {
        let ClusterStatus { role, leader, epoch, applied, lag_ms } = status;
        if details {
            ReadyCluster { role, lag_ms, leader: Some(leader), epoch: Some(epoch), applied: Some(applied) }
        } else {
            ReadyCluster { role, lag_ms, leader: None, epoch: None, applied: None }
        }
    }
}

/// The liveness answer, in the shape of InfluxDB's `/health` (which InfluxDB 2.x clients call).
#[derive(Debug, Serialize, ToSchema)]
pub struct Liveness {
    /// `influxdb`, as InfluxDB names itself here
    #[schema(example = "influxdb")]
    pub name: &'static str,
    /// `ready for queries and writes`, as InfluxDB says (whether the store takes writes is
    /// `/ready`'s answer)
    #[schema(example = "ready for queries and writes")]
    pub message: &'static str,
    /// `pass`
    pub status: LivenessStatus,
    /// no component checks: always empty
    #[schema(value_type = Vec<Object>, max_items = 0)]
    pub checks: Vec<serde_json::Value>,
    /// the InfluxDB version mosaicdb answers as (`1.8.10`, also `X-Influxdb-Version` of `/ping`)
    #[schema(example = "1.8.10")]
    pub version: &'static str,
    /// the mosaicdb build that answers: `mosaicdb-{version}`
    #[schema(example = "mosaicdb-0.1.0")]
    pub commit: &'static str,
}

/// The one status `/health` answers: `pass`, the process is up and answers. InfluxDB's other
/// value, `fail`, is never sent: a store that refuses writes is `/ready`'s 503.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LivenessStatus {
    /// up
    Pass,
}

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(health)).routes(routes!(ready)).routes(routes!(info))
}

/// The process is up. Answered in the shape of InfluxDB's `/health`, for InfluxDB 2.x clients.
#[utoipa::path(get, path = "/health", tag = "service", responses((status = 200, description = "up", body = Liveness,
    example = json!({"name": "influxdb", "message": "ready for queries and writes", "status": "pass", "checks": [],
        "version": "1.8.10", "commit": "mosaicdb-0.1.0"}))))]
async fn health() -> Json<Liveness> {
    Json(Liveness {
        name: "influxdb",
        message: "ready for queries and writes",
        status: LivenessStatus::Pass,
        checks: Vec::new(),
        version: super::influx::INFLUXDB_VERSION,
        commit: concat!("mosaicdb-", env!("CARGO_PKG_VERSION")),
    })
}

/// The store is open and takes writes (in cluster mode: here, or, on a follower, at the leader;
/// the answer says the role; the leader, the epoch and the state applied only to a caller with
/// an API key, unless `--ready-details` or no keys are configured). When it does not, the problem says why: `store_failed` (a write to
/// disk failed, or in cluster mode another server took the lead: writes are refused until a
/// restart, which cluster mode does on its own), `store_recovering` (the storage engine stopped
/// for a cause that passes, such as too many open files, named in the detail: the store opens
/// it again on its own; with `Retry-After`), `insufficient_storage` (the disk is nearly full;
/// writes resume once space is freed) or `unavailable` (shutting down).
#[utoipa::path(get, path = "/ready", tag = "service", responses(
    (status = 200, description = "ready", body = Status),
    (status = 503, description = "the store refuses writes: `store_failed`, `store_recovering`, `insufficient_storage` or `unavailable`",
        body = Problem, content_type = "application/problem+json"),
))]
async fn ready(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Database(db): Database,
) -> Result<Json<Status>, ApiError> {
    // the leader's address and epoch tell an outsider where to go next: a key's holder only
    let details = state.ready_details || caller.is_some();
    let cluster = (db.cluster.role() != crate::storage::Role::Sole)
        .then(|| ReadyCluster::of(db.cluster.cluster_status(), details));
    let (code, detail) = match db.core.health() {
        Health::Ok => return Ok(Json(Status { status: "ready", cluster })),
        Health::DiskFull { free, reserve } => (
            "insufficient_storage",
            format!(
                "the disk holding the data directory is nearly full ({free} bytes free, {reserve} kept in reserve): \
                 writes are refused until space is freed, and resume on their own"
            ),
        ),
        Health::Failed { reason } => (
            "store_failed",
            format!("a write to disk failed ({reason}): writes are refused until a restart; check the disk first"),
        ),
        Health::Recovering { reason, attempts } => (
            "store_recovering",
            format!(
                "the storage engine stopped for a cause that passes ({reason}): writes are refused while the store \
                 opens it again, on its own, once the cause is gone ({attempts} attempt(s) failed so far)"
            ),
        ),
        _ => ("unavailable", "the store is shutting down or its write path stopped: restart the server".to_owned()),
    };
    let problem = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, detail);
    // a recovery ends on its own: ask again soon
    Err(if code == "store_recovering" { problem.retry_after(1) } else { problem })
}

/// Version, uptime, data directory (to an admin key of every database only), durability and key
/// counts per family.
#[utoipa::path(get, path = "/v1/info", tag = "service", responses((status = 200, description = "server information", body = Info)))]
async fn info(caller: Option<Extension<Caller>>, Database(db): Database) -> Result<Json<Info>, ApiError> {
    let mut info = crate::service::info(&db).await?;
    // where the files are is the server's operator's business: an admin key of every database
    // (or no keys configured) sees it
    let admin = caller.is_none_or(|Extension(c)| c.role == Role::Admin && c.databases.is_none());
    if !admin {
        info.data_dir = None;
    }
    Ok(Json(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_tells_the_leader_with_details_only() {
        let status = || ClusterStatus {
            role: crate::storage::Role::Follower,
            leader: "http://10.0.0.1:8080".into(),
            epoch: 7,
            applied: 42,
            lag_ms: 3,
        };
        let open = serde_json::to_value(ReadyCluster::of(status(), false)).unwrap_or_default();
        assert_eq!(open, serde_json::json!({"role": "follower", "lag_ms": 3}));
        let told = serde_json::to_value(ReadyCluster::of(status(), true)).unwrap_or_default();
        assert_eq!(
            told,
            serde_json::json!({"role": "follower", "lag_ms": 3, "leader": "http://10.0.0.1:8080", "epoch": 7, "applied": 42})
        );
    }
}
