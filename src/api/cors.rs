//! Cross-origin requests from browsers (`--cors-origins`), off unless origins are configured.
//!
//! With origins, tower-http's `CorsLayer` sits outside the routes, so it answers a preflight (an
//! `OPTIONS` with `Origin` and `Access-Control-Request-Method`) before authentication: a browser
//! sends a preflight without the page's `Authorization` header, so it must not need a key. It
//! reveals nothing but this configuration. Every other request — an `OPTIONS` that is no
//! preflight among them — takes the usual way through the key check and the route, and its
//! answer (an error too, so that a page can read a 401's problem document) carries the CORS
//! headers when its `Origin` is allowed. Without origins no layer is there: a preflight is a
//! request like any other (401 without a key where keys are configured, else 405), and no answer
//! carries CORS headers.

use axum::http::{HeaderName, HeaderValue, Method, Request, Response, header};
use futures_util::future::Either;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Which browser origins may call the API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// no cross-origin requests (the default): no CORS headers at all
    #[default]
    Off,
    /// any origin (`*`)
    Any,
    /// these origins (`https://app.example.com`), exactly
    List(Vec<HeaderValue>),
}

/// The request headers the API reads, which a page may send.
const ALLOWED_HEADERS: [HeaderName; 9] = [
    header::AUTHORIZATION,
    header::ACCEPT,
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    HeaderName::from_static("last-event-id"),
    HeaderName::from_static("x-mosaic-min-seq"),
    HeaderName::from_static("x-request-id"),
];

/// The answer headers a page may read beyond the safelisted ones.
const EXPOSED_HEADERS: [HeaderName; 5] = [
    header::ETAG,
    header::LOCATION,
    header::RETRY_AFTER,
    HeaderName::from_static("x-mosaic-seq"),
    HeaderName::from_static("x-request-id"),
];

/// How long a browser may keep a preflight's answer.
const MAX_AGE: Duration = Duration::from_secs(600);

impl CorsOrigins {
    /// Reads `--cors-origins`: empty (off), `*`, or origins separated by commas, each a scheme,
    /// a host and maybe a port (`https://app.example.com:8443`), without a path.
    ///
    /// # Errors
    /// What is wrong with the text, for the command line.
    pub fn parse(text: &str) -> Result<CorsOrigins, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(CorsOrigins::Off);
        }
        if text == "*" {
            return Ok(CorsOrigins::Any);
        }
        let mut origins = Vec::new();
        for origin in text.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            if origin == "*" {
                return Err("`*` allows every origin: give it alone, not in a list".into());
            }
            // a browser sends an origin without a trailing slash
            let origin = origin.strip_suffix('/').unwrap_or(origin);
            let Some((scheme, host)) = origin.split_once("://") else {
                return Err(format!("{origin:?} is not an origin such as https://app.example.com"));
            };
            let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if !scheme_ok || host.is_empty() || host.contains(['/', '?', '#', ' ']) {
                return Err(format!(
                    "{origin:?} is not an origin: a scheme, a host and maybe a port, without a path \
                     (https://app.example.com:8443)"
                ));
            }
            let value =
                HeaderValue::from_str(&origin.to_ascii_lowercase()).map_err(|_| format!("{origin:?} is not ASCII"))?;
            if !origins.contains(&value) {
                origins.push(value);
            }
        }
        Ok(if origins.is_empty() { CorsOrigins::Off } else { CorsOrigins::List(origins) })
    }

    /// Whether cross-origin requests are allowed at all.
    pub fn enabled(&self) -> bool {
        *self != CorsOrigins::Off
    }

    /// One phrase for the start-up log.
    pub fn describe(&self) -> String {
        match self {
            CorsOrigins::Off => "CORS off".into(),
            CorsOrigins::Any => "CORS: any origin".into(),
            CorsOrigins::List(list) => {
                let names: Vec<&str> = list.iter().filter_map(|o| o.to_str().ok()).collect();
                format!("CORS: {}", names.join(", "))
            }
        }
    }
}

/// The layer of `origins`, or `None` when CORS is off.
pub(super) fn layer(origins: &CorsOrigins) -> Option<PreflightFirst> {
    let allow = match origins {
        CorsOrigins::Off => return None,
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::List(list) => AllowOrigin::list(list.iter().cloned()),
    };
    let cors = CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
        .allow_headers(ALLOWED_HEADERS)
        .expose_headers(EXPOSED_HEADERS)
        .max_age(MAX_AGE);
    Some(PreflightFirst(cors))
}

/// Whether a request is a CORS preflight: `OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`.
fn is_preflight<B>(req: &Request<B>) -> bool {
    req.method() == Method::OPTIONS
        && req.headers().contains_key(header::ORIGIN)
        && req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// tower-http's `CorsLayer` takes every `OPTIONS` for a preflight and answers it itself; this one
/// hands it only real preflights, and routes any other `OPTIONS` as if CORS were off (the key
/// check where keys are configured, then 405).
#[derive(Debug, Clone)]
pub(super) struct PreflightFirst(CorsLayer);

impl<S: Clone> tower_layer::Layer<S> for PreflightFirst {
    type Service = Cors<S>;

    fn layer(&self, inner: S) -> Cors<S> {
        Cors { cors: self.0.layer(inner.clone()), plain: inner }
    }
}

/// See [`PreflightFirst`].
#[derive(Debug, Clone)]
pub(super) struct Cors<S> {
    cors: tower_http::cors::Cors<S>,
    plain: S,
}

impl<S, B, R> tower_service::Service<Request<B>> for Cors<S>
where
    S: tower_service::Service<Request<B>, Response = Response<R>> + Clone,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Either<tower_http::cors::ResponseFuture<S::Future>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        std::task::ready!(self.cors.poll_ready(cx))?;
        self.plain.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if req.method() == Method::OPTIONS && !is_preflight(&req) {
            return Either::Right(self.plain.call(req));
        }
        Either::Left(self.cors.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_read_and_checked() {
        assert_eq!(CorsOrigins::parse(""), Ok(CorsOrigins::Off));
        assert_eq!(CorsOrigins::parse(" * "), Ok(CorsOrigins::Any));
        let list =
            CorsOrigins::parse("https://App.example.com/, http://localhost:5173,https://app.example.com").unwrap();
        assert_eq!(
            list,
            CorsOrigins::List(vec![
                HeaderValue::from_static("https://app.example.com"),
                HeaderValue::from_static("http://localhost:5173"),
            ])
        );
        assert_eq!(list.describe(), "CORS: https://app.example.com, http://localhost:5173");
        for bad in
            ["*,https://a.example", "app.example.com", "https://a.example/path", "https://", "1x://a", "https://a b"]
        {
            assert!(CorsOrigins::parse(bad).is_err(), "{bad}");
        }
    }
}
