//! `POST /v1/batch`: several writes, all or nothing.

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::ApiJson;
use super::spec::BatchBody;
use crate::api::db_path::Database;
use crate::service::{BatchOp, BatchOutcome};
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(batch))
}

/// The body of `POST /v1/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// 1 to 10 000 operations, applied in order in one atomic write
    pub operations: Vec<BatchOp>,
}

/// Applies put / patch / delete operations on any tables atomically: if one fails, none is written
/// and the problem names it (`operation`).
#[utoipa::path(post, path = "/v1/batch", tag = "batch", request_body = BatchBody, responses(
    (status = 200, description = "every operation was written", body = BatchOutcome),
    (status = 400, description = "malformed JSON, no or too many operations, or an invalid id", body = Problem, content_type = "application/problem+json"),
    (status = 404, description = "an operation names a missing table or document; nothing was written", body = Problem,
        content_type = "application/problem+json",
        example = json!({"type": "urn:mosaicdb:problem:document_not_found", "title": "Not Found", "status": 404,
            "detail": "operation 1 failed, nothing was written: document \"x\" not found in table \"users\"",
            "code": "document_not_found", "operation": 1})),
    (status = 409, description = "an operation breaks a unique index, names a table being dropped, or deletes a vertex \
        with edges in a `reject` edge table (`vertex_has_edges`); nothing was written",
        body = Problem, content_type = "application/problem+json"),
    (status = 413, description = "body too large", body = Problem, content_type = "application/problem+json"),
    (status = 415, description = "not JSON", body = Problem, content_type = "application/problem+json"),
    (status = 422, description = "the body has the wrong shape, or an operation's document is invalid for its table; \
        nothing was written", body = Problem, content_type = "application/problem+json"),
    (status = 503, description = "the store refuses writes", body = Problem, content_type = "application/problem+json"),
))]
async fn batch(Database(db): Database, ApiJson(req): ApiJson<BatchRequest>) -> Result<Json<BatchOutcome>, ApiError> {
    Ok(Json(db.pipeline.batch(req.operations).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schema_fields::properties;

    /// The described body (`spec.rs`) names exactly the fields this one reads (which refuses
    /// unknown fields): a field added to one and not the other fails here.
    #[test]
    fn described_body_has_the_fields_the_handler_reads() {
        assert_eq!(properties::<BatchBody>(), properties::<BatchRequest>());
    }
}
