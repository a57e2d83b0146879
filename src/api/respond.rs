//! Small helpers of the handlers' answers: JSON text the service already wrote, and path segments
//! percent-encoded for `Location` headers.

/// A 200 response whose body is JSON text the service already wrote.
pub(crate) fn json_text(body: Vec<u8>) -> axum::response::Response {
    use axum::response::IntoResponse;
    ([(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"))], body)
        .into_response()
}

/// A 200 response of `value` as JSON, written into a buffer of `capacity` bytes to start with:
/// for answers whose size the handler can guess (a traversal's vertices), so the text is not
/// copied as its buffer grows.
pub(crate) fn json_sized<T: serde::Serialize>(value: &T, capacity: usize) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut body = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut body, value) {
        Ok(()) => json_text(body),
        Err(e) => super::error::ApiError::from(crate::service::ServiceError::Internal(e.to_string())).into_response(),
    }
}

/// Percent-encodes one path segment (everything but RFC 3986 unreserved characters).
pub fn encode_path(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `response` with the `ETag` header `etag`.
pub(crate) fn with_etag(mut response: axum::response::Response, etag: &str) -> axum::response::Response {
    if let Ok(v) = axum::http::HeaderValue::from_str(etag) {
        response.headers_mut().insert(axum::http::header::ETAG, v);
    }
    response
}
