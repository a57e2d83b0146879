//! Cluster mode over HTTP (see `service::cluster`): every answer says the state the server has
//! applied (`X-Mosaic-Seq`), a request may ask for one first (`X-Mosaic-Min-Seq`), and a
//! follower's refusal of a write becomes a redirect to the leader. The wait and the refusal come
//! after the key check; a 401 and the open routes (`/health`, `/ready`, …) carry no state.

use super::AppState;
use super::error::{ApiError, ToLeader};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// The state the server had applied when it answered: after a write, at least the write's.
pub const SEQ: HeaderName = HeaderName::from_static("x-mosaic-seq");
/// A state the request must see: the server waits until it has applied it.
pub const MIN_SEQ: HeaderName = HeaderName::from_static("x-mosaic-min-seq");
/// Longest a request waits for the state it asks for.
const MIN_SEQ_WAIT: Duration = Duration::from_secs(5);

/// Whether a follower sends `req` to the leader without running it.
fn goes_to_leader(req: &Request) -> bool {
    use axum::http::Method;
    match *req.method() {
        Method::PUT | Method::PATCH | Method::DELETE => true,
        Method::POST => !req
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .is_some_and(|route| crate::api::db_path::READ_ONLY_POSTS.contains(&route.as_str())),
        _ => false,
    }
}

/// Whether `req`'s route needs no key (liveness, readiness, the document): such answers carry
/// no state number, which would tell anyone when the server is written.
fn open_route(req: &Request) -> bool {
    req.extensions()
        .get::<axum::extract::MatchedPath>()
        .is_some_and(|route| super::auth::required(req.method(), route.as_str(), false) == super::auth::Need::Open)
}

/// The route layer, inside the key check (a request without a valid key is refused before it
/// may make the server wait, and learns nothing of the cluster): waits for the state the
/// request asks for, then turns a follower's write away (the outer [`layer`] makes that a
/// redirect to the leader).
pub(super) async fn gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if open_route(&req) {
        return next.run(req).await;
    }
    // `default`'s states, whatever database the request names: cluster mode serves only `default`
    let db = state.databases.default_db();
    if let Some(value) = req.headers().get(&MIN_SEQ) {
        let Some(wanted) = value.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) else {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_header",
                "X-Mosaic-Min-Seq must be a state number, as an earlier answer's X-Mosaic-Seq gave it",
            )
            .into_response();
        };
        if let Err(e) = db.cluster.wait_for_state(wanted, MIN_SEQ_WAIT).await {
            return ApiError::from(e).into_response();
        }
    }
    if db.cluster.role() == crate::storage::Role::Follower && goes_to_leader(&req) {
        return ApiError::from(crate::service::ServiceError::NotLeader).into_response();
    }
    next.run(req).await
}

/// The layer around every route: the state applied on each answer but a 401's and an open
/// route's, and a follower's refusal of a write (see [`gate`]) made a redirect to the leader.
pub(super) async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    // The states are `default`'s, whatever database the request names: cluster mode serves
    // only `default`, and a database's own state would tell a caller it may not reach that the
    // database exists, and when it is written.
    let db = state.databases.default_db().clone();
    let named = req.extensions().get::<crate::api::db_path::Named>().map(|n| n.0.clone());
    let open = open_route(&req);
    // where a redirect goes: the leader, at this request's path (as the client sent it) and query
    let target = req.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let target = match &named {
        Some(name) => crate::api::db_path::path_in(name, &target),
        None => target,
    };
    let mut response = next.run(req).await;
    if response.extensions().get::<ToLeader>().is_some() {
        let leader = db.cluster.cluster_status().leader;
        let location = HeaderValue::from_str(&format!("{}{target}", leader.trim_end_matches('/')));
        response = match location {
            Ok(location) if !leader.is_empty() => {
                let mut redirect = response;
                redirect.headers_mut().insert(header::LOCATION, location);
                redirect
            }
            _ => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no_leader",
                "this server follows, and no leader is known now (one is being chosen): retry shortly",
            )
            .retry_after(1)
            .into_response(),
        };
    } else if let Some(name) = &named {
        // a resource made in a named database is at its path under `/v1/db/{db}/`
        let moved = response
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(|l| crate::api::db_path::path_in(name, l));
        if let Some(Ok(location)) = moved.map(|l| HeaderValue::from_str(&l)) {
            response.headers_mut().insert(header::LOCATION, location);
        }
    }
    // a request without a valid key learns nothing of the writes
    if !open && response.status() != StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(SEQ, HeaderValue::from(db.cluster.applied_state()));
    }
    response
}
