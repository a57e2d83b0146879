//! The web console at `/console/`: a handful of static files (HTML, CSS, plain ES modules, no
//! build step) embedded in the binary, served with their content type, a weak ETag (xxh3 of the
//! bytes; `If-None-Match` answers 304), `Cache-Control: no-cache` (a browser revalidates, so a
//! new binary's files are seen at once) and a strict Content-Security-Policy: scripts, styles and
//! requests of this origin only, no inline script, no eval, no framing. The compression layer
//! gzips them like any answer. The files describe no data and need no key (the page asks for
//! one); the API calls the page makes need what they always need. Not in the OpenAPI document:
//! these are pages, not API. What the console does: `docs/console.md`.

use super::error::ApiError;
use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use std::sync::OnceLock;

/// One embedded file.
struct Asset {
    /// its name under `/console/`
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset { name: $name, content_type: $type, bytes: include_bytes!(concat!("console/", $name)) }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `src/api/console/` (`tests/api/console.rs` asks for each file of the folder).
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("tables.js", JS),
    asset!("document.js", JS),
    asset!("query.js", JS),
    asset!("search.js", JS),
    asset!("graph.js", JS),
    asset!("force.js", JS),
    asset!("timeseries.js", JS),
    asset!("chart.js", JS),
    asset!("changes.js", JS),
    asset!("server.js", JS),
];

/// The policy of every console file: nothing but this origin's own files and API; no inline
/// script or style attribute, no eval, no plugin, no framing, no form posting elsewhere.
pub(super) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The routes: `/console` (a redirect to `/console/`), `/console/` (the page) and its files.
pub(super) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/console", get(|| async { Redirect::permanent("/console/") }))
        .route("/console/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/console/{*file}",
            get(|Path(file): Path<String>, headers: HeaderMap| async move { serve(&file, &headers) }),
        )
}

/// The ETag of each asset, in the order of [`ASSETS`], computed once.
fn etags() -> &'static [HeaderValue] {
    static ETAGS: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                // weak: the compression layer may send other bytes of the same file
                let tag = format!("W/\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(a.bytes));
                HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("W/\"0\""))
            })
            .collect()
    })
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        let shown: String = name.chars().take(100).collect();
        return ApiError::new(StatusCode::NOT_FOUND, "route_not_found", format!("the console has no file {shown:?}"))
            .into_response();
    };
    let asset = &ASSETS[i];
    let etag = etags()[i].clone();
    let common = [
        (header::ETAG, etag.clone()),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ];
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| matches(v, &etag)) {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (common, [(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type))], asset.bytes).into_response()
}

/// Whether an `If-None-Match` list names `etag` (weak comparison, as RFC 9110 wants for it).
fn matches(list: &str, etag: &HeaderValue) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let ours = opaque(etag.to_str().unwrap_or_default());
    list.split(',').any(|tag| tag.trim() == "*" || opaque(tag) == ours)
}
