//! Extractors whose rejections are problem documents.

use super::error::{ApiError, too_large};
use crate::service::{EtagMatch, Preconditions, ServiceError};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Deepest nesting of a request body: a document's own limit plus the envelope of the deepest
/// route (`/v1/batch`: `{"operations":[{"document": …}]}`). The document itself is held to
/// [`crate::entity::MAX_DEPTH`] when it is encoded.
const MAX_BODY_DEPTH: usize = crate::entity::MAX_DEPTH + 3;

/// A JSON body, parsed by serde_json after the text rules every write path shares (no repeated
/// keys, numbers exact or refused, `-0` is `0`, bounded nesting: see `entity::check_text`); its
/// rejections are problem documents.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

/// Bodies larger than this are checked and parsed on the blocking pool, so a big body does not
/// hold up a runtime worker (and the requests queued on it).
const PARSE_INLINE_MAX: usize = 256 << 10;

impl<T: DeserializeOwned + Send + 'static, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected a body with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large()
            } else {
                ApiError::new(r.status(), "invalid_body", r.body_text())
            }
        })?;
        if bytes.len() <= PARSE_INLINE_MAX {
            return parse_json(&bytes).map(ApiJson);
        }
        tokio::task::spawn_blocking(move || parse_json(&bytes))
            .await
            .map_err(|e| ApiError::from(ServiceError::Internal(format!("parsing a body failed: {e}"))))?
            .map(ApiJson)
    }
}

/// Answers 413 at once to a request whose `Content-Length` is over the body limit, instead of
/// waiting for a body it would refuse (imports stream and limit lines, not bodies: they are not
/// behind this). The connection is closed, since the body is not read. A plain layer rather than
/// `from_fn`: no boxed future and no service clone per request.
#[derive(Debug, Clone, Copy)]
pub struct RefuseOversizedLayer(pub usize);

impl<S> tower_layer::Layer<S> for RefuseOversizedLayer {
    type Service = RefuseOversized<S>;

    fn layer(&self, inner: S) -> RefuseOversized<S> {
        RefuseOversized { inner, max: self.0 }
    }
}

/// See [`RefuseOversizedLayer`].
#[derive(Debug, Clone)]
pub struct RefuseOversized<S> {
    inner: S,
    max: usize,
}

impl<S> tower_service::Service<Request> for RefuseOversized<S>
where
    S: tower_service::Service<Request, Response = axum::response::Response, Error = std::convert::Infallible>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::Either<std::future::Ready<Result<Self::Response, Self::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        use axum::response::IntoResponse;
        let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max as u64) {
            let mut response = too_large().into_response();
            response.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
            return futures_util::future::Either::Left(std::future::ready(Ok(response)));
        }
        futures_util::future::Either::Right(self.inner.call(req))
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Applies the text rules, then parses (serde_json's own recursion limit is off: the rules
/// bounded the depth already).
fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let checked =
        crate::entity::check_text(bytes, MAX_BODY_DEPTH).map_err(|e| ApiError::from(ServiceError::from(e)))?;
    let owned;
    let text = if checked.negative_zero {
        let mut copy = bytes.to_vec();
        crate::entity::rewrite_negative_zero(&mut copy);
        owned = copy;
        &owned[..]
    } else {
        bytes
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de).and_then(|v| de.end().map(|()| v)).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            format!("Failed to deserialize the JSON body into the target type: {e}"),
        ),
        _ => ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("Failed to parse the request body as JSON: {e}"),
        ),
    })?;
    Ok(value)
}

/// Put on import, backup and stream requests by the server: turns `true` when the client has
/// gone away, seen even while hyper holds body bytes the import is still working through; with
/// the connection's socket, which [`ClientGone::cut`] shuts down.
#[derive(Debug, Clone)]
pub struct ClientGone(pub tokio::sync::watch::Receiver<bool>, pub Option<Arc<tokio::net::TcpStream>>);

impl ClientGone {
    /// Shuts the connection's socket down both ways: a write hyper has pending (to a client that
    /// reads nothing) fails at once, and the connection ends.
    pub fn cut(&self) {
        if let Some(socket) = &self.1 {
            let _ = socket2::SockRef::from(&**socket).shutdown(std::net::Shutdown::Both);
        }
    }

    /// Resolves once the client is gone; never when nobody watches.
    pub async fn wait(gone: Option<Self>) {
        if let Some(ClientGone(mut rx, _)) = gone
            && rx.wait_for(|gone| *gone).await.is_ok()
        {
            return;
        }
        std::future::pending::<()>().await;
    }
}

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
                    ApiError::new(StatusCode::BAD_REQUEST, "invalid_header", format!("{name} is not ASCII"))
                })
            })
            .transpose()
    };
    Ok(Preconditions {
        if_match: get(axum::http::header::IF_MATCH)?,
        if_none_match: get(axum::http::header::IF_NONE_MATCH)?,
    })
}
