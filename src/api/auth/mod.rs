//! Authentication and roles. A request brings an API key in `Authorization: Bearer <key>` (or
//! `Token <key>`, as Influx clients send it); the route it matched needs a role ([`roles`]); the
//! key's role must be at least that. Missing or unknown key: 401 `unauthenticated`; a key whose
//! role is too low: 403 `forbidden`.
//!
//! With no keys configured the layer is not installed at all: authentication costs nothing then.
//!
//! A CORS preflight never reaches this layer: with `--cors-origins` the CORS layer, outside the
//! routes, answers it (a browser sends no key with a preflight); an `OPTIONS` that is no preflight
//! is checked like any request (see `api/cors.rs`).

mod keys;
mod roles;

#[cfg(test)]
mod tests;

pub use keys::{Caller, ENV_KEYS, KeyError, KeySet, MIN_KEY_CHARS};
pub use roles::{Need, Role, required};

use super::error::ApiError;
use crate::service::ServiceError;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Who may do what: the keys, and the rules that depend on configuration.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// the configured keys; none: authentication is off
    pub keys: KeySet,
    /// `GET /metrics` answers without a key (`--metrics-public`)
    pub metrics_public: bool,
    /// serve on an address other than loopback with no keys (`--allow-unauthenticated`)
    pub allow_unauthenticated: bool,
    /// the browser origins that may call the API (`--cors-origins`); their preflights need no
    /// key (see `api/cors.rs`)
    pub cors: super::CorsOrigins,
    /// `GET /ready` names the leader and the epoch (and the state applied) to a caller without a
    /// key too (`--ready-details`); without keys configured it does anyway
    pub ready_details: bool,
    /// host names a server without keys answers besides loopback ones and IP addresses
    /// (`--allowed-hosts`; see `api/origin.rs`)
    pub allowed_hosts: Vec<String>,
}

impl Access {
    /// Whether requests must bring a key.
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Refuses to serve `addr` with no keys unless that is allowed or `addr` is loopback; and
    /// refuses cross-origin requests (`--cors-origins`) with no keys unless that is allowed.
    pub fn check_exposure(&self, addr: std::net::SocketAddr) -> Result<(), String> {
        if !self.enabled() && self.cors.enabled() && !self.allow_unauthenticated {
            return Err(format!(
                "refusing --cors-origins ({}) without authentication: every web page of those origins, opened in \
                 any browser that can reach this server, could read, write and drop everything. Configure API keys \
                 (--api-keys-file / MOSAIC_API_KEYS_FILE, or MOSAIC_API_KEYS=name:role:key), or pass \
                 --allow-unauthenticated (MOSAIC_ALLOW_UNAUTHENTICATED=true) to allow it on purpose",
                self.cors.describe()
            ));
        }
        if self.enabled() || self.allow_unauthenticated || addr.ip().to_canonical().is_loopback() {
            return Ok(());
        }
        Err(format!(
            "refusing to serve {addr} without authentication: anyone who can reach it could read, write and drop \
             everything. Configure API keys (--api-keys-file / MOSAIC_API_KEYS_FILE, or MOSAIC_API_KEYS=name:role:key), \
             listen on a loopback address, or pass --allow-unauthenticated (MOSAIC_ALLOW_UNAUTHENTICATED=true) to \
             serve without keys on purpose"
        ))
    }

    /// One line for the start-up log: the mode and the count of keys per role, never a key, and
    /// the origins allowed.
    pub fn describe(&self) -> String {
        if !self.enabled() {
            return format!(
                "authentication off (no API keys configured): every request is allowed; {}",
                self.cors.describe()
            );
        }
        let per_role: Vec<String> = Role::ALL.iter().map(|r| format!("{} {r}", self.keys.count(*r))).collect();
        format!(
            "authentication on: {} API key(s): {}; /metrics {}; {}",
            self.keys.len(),
            per_role.join(", "),
            if self.metrics_public { "public" } else { "needs the read role" },
            self.cors.describe()
        )
    }
}

/// What the middleware holds.
#[derive(Debug)]
pub(super) struct Guard {
    keys: KeySet,
    metrics_public: bool,
}

impl Guard {
    /// The guard of `access`, or `None` when authentication is off.
    pub(super) fn new(access: &Access) -> Option<Arc<Guard>> {
        access.enabled().then(|| Arc::new(Guard { keys: access.keys.clone(), metrics_public: access.metrics_public }))
    }
}

/// What the `Authorization` header holds.
enum Presented<'a> {
    /// no header, or not a Bearer / Token one
    Nothing,
    /// a key after a scheme we take
    Key(&'a [u8]),
}

fn presented(headers: &HeaderMap) -> Presented<'_> {
    let Some(value) = headers.get(header::AUTHORIZATION) else { return Presented::Nothing };
    let value = value.as_bytes().trim_ascii();
    let Some(space) = value.iter().position(|b| *b == b' ') else { return Presented::Nothing };
    let (scheme, key) = (&value[..space], value[space..].trim_ascii());
    if !(scheme.eq_ignore_ascii_case(b"bearer") || scheme.eq_ignore_ascii_case(b"token")) || key.is_empty() {
        return Presented::Nothing;
    }
    Presented::Key(key)
}

/// The middleware, installed as a route layer (so the route template is known, and a request is
/// refused before its body is read).
pub(super) async fn authorize(State(guard): State<Arc<Guard>>, mut req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|r| r.as_str().to_owned());
    let need = match &route {
        Some(route) => required(req.method(), route, guard.metrics_public),
        None => Need::Role(Role::Admin),
    };
    let Need::Role(needed) = need else {
        // an open route answers anyone; a valid key still names its caller (`/ready` tells it more)
        if let Presented::Key(key) = presented(req.headers())
            && let Some(caller) = guard.keys.verify(key)
        {
            req.extensions_mut().insert(caller);
        }
        return next.run(req).await;
    };
    let caller = match presented(req.headers()) {
        Presented::Nothing => return unauthenticated(false),
        Presented::Key(key) => match guard.keys.verify(key) {
            Some(caller) => caller,
            None => return unauthenticated(true),
        },
    };
    tracing::Span::current().record("key_name", &*caller.name);
    let route = route.as_deref().unwrap_or_default();
    let role = if crate::api::db_path::is_database_route(route) {
        // a database the key may not reach is one it does not see
        let db = crate::api::db_path::name_of(req.extensions());
        match caller.role_in(db) {
            Some(role) => role,
            None => return ApiError::from(ServiceError::DatabaseNotFound(db.to_owned())).into_response(),
        }
    } else {
        caller.role
    };
    if role < needed {
        tracing::debug!(key_name = %caller.name, role = %role, needed = %needed, "forbidden");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this route needs the {needed} role; the API key presented has the {role} role"),
        )
        .into_response();
    }
    // what tells of every database: making and dropping them, the server's metrics
    let of_all = (needed == Role::Admin && route.starts_with("/v1/databases")) || route == "/metrics";
    if caller.databases.is_some() && of_all {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a key limited to some databases may not make or drop databases, nor read the server's metrics: \
             that needs a key of every database",
        )
        .into_response();
    }
    req.extensions_mut().insert(caller);
    req.extensions_mut().insert(Granted(role));
    next.run(req).await
}

/// The role a request's key has where it goes (in the database it names), for the handlers
/// whose answer depends on more than the route's role. Absent without keys configured: every
/// request may do everything then.
#[derive(Debug, Clone, Copy)]
pub struct Granted(pub Role);

/// Refuses (403 `forbidden`) a request whose key has less than `needed` where it goes, for
/// `what` (such as "deleting a whole metric"); without keys configured nothing is refused.
pub(super) fn require(granted: Option<Granted>, needed: Role, what: &str) -> Result<(), ApiError> {
    match granted {
        Some(Granted(role)) if role < needed => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{what} needs the {needed} role; the API key presented has the {role} role"),
        )),
        _ => Ok(()),
    }
}

/// 401 with the challenge (RFC 6750: `error="invalid_token"` when a key was presented).
fn unauthenticated(presented: bool) -> Response {
    let detail = if presented {
        "the API key presented is not one this server knows"
    } else {
        "this route needs an API key: send `Authorization: Bearer <key>` (or `Token <key>`)"
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", detail).into_response();
    let challenge = if presented {
        HeaderValue::from_static("Bearer realm=\"mosaicdb\", error=\"invalid_token\"")
    } else {
        HeaderValue::from_static("Bearer realm=\"mosaicdb\"")
    };
    response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    response
}

/// The span of a request: the default fields, and `key_name`, which [`authorize`] records.
pub(super) fn request_span(req: &Request) -> tracing::Span {
    tracing::debug_span!(
        "request",
        method = %req.method(),
        uri = %req.uri(),
        version = ?req.version(),
        key_name = tracing::field::Empty,
    )
}

/// Declares the bearer scheme in the OpenAPI document: required everywhere, except on the open
/// routes; 401 on every other operation, 403 where a read key is not enough, and the role in
/// each operation's description.
pub(super) fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    let problem = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/problem+json",
                ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
            )
            .build()
    };
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API key, sent as `Authorization: Bearer <key>` (`Token <key>` works too). Keys have a role: \
                     `read`, `write` (reads and every document, edge and point write) or `admin` (everything). \
                     Needed only when the server has keys configured.",
                ))
                .build(),
        ),
    );
    components.responses.insert(
        "unauthenticated".into(),
        RefOr::T(problem("no API key, or one the server does not know (`unauthenticated`)")),
    );
    components.responses.insert(
        "forbidden".into(),
        RefOr::T(problem("the API key's role is below the one this route needs (`forbidden`)")),
    );
    doc.security = Some(vec![SecurityRequirement::new("bearer", Vec::<String>::new())]);
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            (axum::http::Method::GET, &mut item.get),
            (axum::http::Method::PUT, &mut item.put),
            (axum::http::Method::POST, &mut item.post),
            (axum::http::Method::DELETE, &mut item.delete),
            (axum::http::Method::PATCH, &mut item.patch),
        ];
        for (method, op) in operations {
            let Some(op) = op.as_mut() else { continue };
            let note = match required(&method, path, false) {
                Need::Open => {
                    op.security = Some(Vec::new());
                    "Needs no API key.".to_owned()
                }
                Need::Role(role) => {
                    let responses = &mut op.responses.responses;
                    // a route that answers in another shape (the Influx writes) says so itself
                    let unauthenticated = RefOr::Ref(Ref::new("#/components/responses/unauthenticated"));
                    responses.entry("401".into()).or_insert(unauthenticated);
                    if role > Role::Read {
                        let forbidden = RefOr::Ref(Ref::new("#/components/responses/forbidden"));
                        responses.entry("403".into()).or_insert(forbidden);
                    }
                    format!("Role: `{role}`.")
                }
            };
            op.description = Some(match op.description.take() {
                Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
                _ => note,
            });
        }
    }
}
