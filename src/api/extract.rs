//! Extractors whose rejections are problem documents.

use super::error::ApiError;
use crate::service::{EtagMatch, Preconditions};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::HeaderMap;

/// `Json<T>` whose rejection is our problem+json error.
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// `Path<T>` whose rejection is our problem+json error.
#[derive(Debug, Clone, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `Query<T>` whose rejection is our problem+json error.
#[derive(Debug, Clone, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// The `If-Match` / `If-None-Match` headers of a request.
pub fn preconditions(headers: &HeaderMap) -> Result<Preconditions, ApiError> {
    let get = |name: axum::http::HeaderName| -> Result<Option<EtagMatch>, ApiError> {
        headers
            .get(&name)
            .map(|v| {
                v.to_str().map(EtagMatch::parse).map_err(|_| {
                    ApiError::new(axum::http::StatusCode::BAD_REQUEST, "invalid_header", format!("{name} is not ASCII"))
                })
            })
            .transpose()
    };
    Ok(Preconditions {
        if_match: get(axum::http::header::IF_MATCH)?,
        if_none_match: get(axum::http::header::IF_NONE_MATCH)?,
    })
}
