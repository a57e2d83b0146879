//! The request metrics: a tower layer that counts every request and observes its latency by
//! method, route template and status, and counts the requests in flight. Being the outermost
//! layer of every route, it also turns a panic of the layers and handler under it into the 500
//! problem the client gets (and counts that 500), which saves a layer of its own.
//!
//! `Router::layer` wraps each route (each method of each path, and the fallback) in a service of
//! its own, so each gets its own [`Endpoint`]: a few cells holding the series of the
//! (method, status) pairs it has answered, filled once from the shared table and read without a
//! lock after that, and its own in-flight count (summed at the scrape), so no counter is shared by
//! every request. A request then costs two clock reads, a look-up of its matched path, a string
//! comparison with the endpoint's template, one reference count taken and dropped (the endpoint,
//! held by the response future), and four relaxed atomic additions (in flight up and down, a
//! bucket, the sum) — no allocation, no lock.

use super::histogram::{self, Histogram};
use crate::api::error::panic_response;
use axum::BoxError;
use axum::body::HttpBody;
use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use bytes::Bytes;
use pin_project_lite::pin_project;
use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Instant;

/// The route label of a request no route matched (404s, whatever their path), so that the number
/// of series stays bounded.
pub(super) const UNMATCHED: &str = "unmatched";

/// The method labels; any other method counts as `other`.
const METHODS: [&str; 10] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "other"];

fn method_index(method: &Method) -> u8 {
    match *method {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::DELETE => 4,
        Method::PATCH => 5,
        Method::OPTIONS => 6,
        Method::CONNECT => 7,
        Method::TRACE => 8,
        _ => 9,
    }
}

/// The status of a request whose client left (or that was dropped otherwise) before the answer.
const ABANDONED: u16 = 0;

/// One label set: requests of one method to one route answered with one status.
#[derive(Debug)]
pub(super) struct Series {
    method: u8,
    route: Box<str>,
    /// [`ABANDONED`] for requests that got no answer
    status: u16,
    latency: Histogram,
}

/// What one series held at a scrape.
pub(super) struct SeriesSnapshot {
    /// the method label
    pub method: &'static str,
    /// the route template, or [`UNMATCHED`]
    pub route: Box<str>,
    /// the status code; `None` for abandoned requests
    pub status: Option<u16>,
    /// latencies (for abandoned requests only the count means something)
    pub latency: histogram::Snapshot,
}

/// The request metrics of one server.
#[derive(Debug, Default)]
pub(crate) struct HttpMetrics {
    /// every label set seen so far
    series: Mutex<Vec<Arc<Series>>>,
    /// every endpoint, for the in-flight sum
    endpoints: Mutex<Vec<Weak<Endpoint>>>,
}

impl HttpMetrics {
    /// The layer that records every request into these metrics.
    pub(super) fn layer(self: &Arc<Self>) -> RecordLayer {
        RecordLayer { metrics: self.clone() }
    }

    /// The series of this label set, created on first use.
    fn series(&self, method: u8, route: &str, status: u16) -> Arc<Series> {
        let mut all = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = all.iter().find(|s| s.method == method && s.status == status && *s.route == *route) {
            return found.clone();
        }
        let created = Arc::new(Series { method, route: route.into(), status, latency: Histogram::default() });
        all.push(created.clone());
        created
    }

    /// Every series, sorted by route, method and status.
    pub(super) fn snapshot(&self) -> Vec<SeriesSnapshot> {
        let all: Vec<Arc<Series>> = self.series.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let mut out: Vec<SeriesSnapshot> = all
            .iter()
            .map(|s| SeriesSnapshot {
                method: METHODS[usize::from(s.method)],
                route: s.route.clone(),
                status: (s.status != ABANDONED).then_some(s.status),
                latency: s.latency.snapshot(),
            })
            .collect();
        out.sort_by(|a, b| (&a.route, a.method, a.status).cmp(&(&b.route, b.method, b.status)));
        out
    }

    /// Requests under way.
    pub(super) fn in_flight(&self) -> i64 {
        let mut endpoints = self.endpoints.lock().unwrap_or_else(PoisonError::into_inner);
        endpoints.retain(|e| e.strong_count() > 0);
        endpoints.iter().filter_map(Weak::upgrade).map(|e| e.in_flight.load(Ordering::Relaxed)).sum()
    }
}

/// Handles a route's endpoint keeps: one per (method, status) it answered, up to this many;
/// more (never seen: a route answers a handful of statuses) go through the shared table.
const CELLS: usize = 16;

/// What one endpoint (a route's method, or the fallback) knows.
#[derive(Debug)]
struct Endpoint {
    metrics: Arc<HttpMetrics>,
    /// the route template of its requests (`None`: the fallback), taken from the first one
    route: OnceLock<Option<Box<str>>>,
    cells: [OnceLock<Arc<Series>>; CELLS],
    in_flight: AtomicI64,
}

/// Which route a request matched, as far as its endpoint needs to know.
enum Route {
    /// the endpoint's own (all but never)
    Own,
    /// another one (an endpoint shared by several templates, which `Router::layer` never makes);
    /// `None`: no route matched
    Other(Option<MatchedPath>),
}

impl Endpoint {
    fn route_of(&self, request: &Request) -> Route {
        let matched = request.extensions().get::<MatchedPath>();
        let own = self.route.get_or_init(|| matched.map(|m| m.as_str().into()));
        match (own, matched) {
            (Some(own), Some(m)) if **own == *m.as_str() => Route::Own,
            (None, None) => Route::Own,
            (_, m) => Route::Other(m.cloned()),
        }
    }

    fn record(&self, method: u8, route: &Route, status: u16, took: std::time::Duration) {
        let own = || self.route.get().and_then(|r| r.as_deref()).unwrap_or(UNMATCHED);
        let route = match route {
            Route::Own => {
                for cell in &self.cells {
                    let series = cell.get_or_init(|| self.metrics.series(method, own(), status));
                    if series.method == method && series.status == status {
                        return series.latency.observe(took);
                    }
                }
                own()
            }
            Route::Other(m) => m.as_ref().map_or(UNMATCHED, MatchedPath::as_str),
        };
        self.metrics.series(method, route, status).latency.observe(took);
    }
}

/// Layers each route with a [`Record`] service.
#[derive(Debug, Clone)]
pub(crate) struct RecordLayer {
    metrics: Arc<HttpMetrics>,
}

impl<S> tower_layer::Layer<S> for RecordLayer {
    type Service = Record<S>;

    fn layer(&self, inner: S) -> Record<S> {
        let endpoint = Arc::new(Endpoint {
            metrics: self.metrics.clone(),
            route: OnceLock::new(),
            cells: Default::default(),
            in_flight: AtomicI64::new(0),
        });
        self.metrics.endpoints.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::downgrade(&endpoint));
        Record { inner, endpoint }
    }
}

/// Records the requests of one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Record<S> {
    inner: S,
    endpoint: Arc<Endpoint>,
}

impl<S, B> tower_service::Service<Request> for Record<S>
where
    S: tower_service::Service<Request, Response = axum::http::Response<B>, Error = Infallible>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RecordFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let method = method_index(request.method());
        let route = self.endpoint.route_of(&request);
        self.endpoint.in_flight.fetch_add(1, Ordering::Relaxed);
        let pending =
            Pending { endpoint: self.endpoint.clone(), method, route, started: Instant::now(), answered: false };
        let state = match panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
            Ok(inner) => State::Running { inner },
            Err(panicked) => State::Panicked { panicked: Some(panicked) },
        };
        RecordFuture { state, pending: Some(pending) }
    }
}

/// A request under way: leaves the in-flight count when dropped, and counts as abandoned if it
/// was not answered.
struct Pending {
    endpoint: Arc<Endpoint>,
    method: u8,
    route: Route,
    started: Instant,
    answered: bool,
}

impl Pending {
    fn answer(&mut self, status: u16) {
        self.endpoint.record(self.method, &self.route, status, self.started.elapsed());
        self.answered = true;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.answered {
            self.endpoint.record(self.method, &self.route, ABANDONED, self.started.elapsed());
        }
        self.endpoint.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running { #[pin] inner: F },
        /// the service panicked in `call`: answered with a 500 at the first poll
        Panicked { panicked: Option<Box<dyn Any + Send>> },
    }
}

pin_project! {
    /// The response future of [`Record`].
    pub(crate) struct RecordFuture<F> {
        #[pin]
        state: State<F>,
        pending: Option<Pending>,
    }
}

impl<F, B> Future for RecordFuture<F>
where
    F: Future<Output = Result<axum::http::Response<B>, Infallible>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let response = match this.state.as_mut().project() {
            StateProj::Running { inner } => match panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(Ok(response))) => response.map(axum::body::Body::new),
                Ok(Poll::Ready(Err(never))) => match never {},
                Err(panicked) => {
                    // never poll a future that panicked again
                    this.state.set(State::Panicked { panicked: None });
                    panic_response(panicked)
                }
            },
            StateProj::Panicked { panicked } => panic_response(panicked.take().unwrap_or_else(|| Box::new(()))),
        };
        if let Some(mut pending) = this.pending.take() {
            pending.answer(response.status().as_u16());
        }
        Poll::Ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower_service::Service;

    fn app(metrics: &Arc<HttpMetrics>) -> axum::Router {
        axum::Router::new()
            .route("/items/{id}", get(|| async { "item" }).delete(|| async { StatusCode::NO_CONTENT }))
            .route("/status/{code}", get(|Path(code): Path<u16>| async move { StatusCode::from_u16(code).unwrap() }))
            .route("/slow", get(std::future::pending::<&'static str>))
            .route("/panic", get(panics))
            .layer(metrics.layer())
    }

    async fn panics() -> &'static str {
        panic!("a handler bug")
    }

    fn request(method: &str, uri: &str) -> Request {
        Request::builder().method(method).uri(uri).body(Body::empty()).unwrap()
    }

    async fn send(app: &mut axum::Router, method: &str, uri: &str) -> u16 {
        app.call(request(method, uri)).await.unwrap().status().as_u16()
    }

    /// The count of one series; `None` status: abandoned requests.
    fn count(metrics: &HttpMetrics, method: &str, route: &str, status: Option<u16>) -> u64 {
        let found =
            metrics.snapshot().into_iter().filter(|s| s.method == method && &*s.route == route && s.status == status);
        found.map(|s| s.latency.count()).sum()
    }

    #[tokio::test]
    async fn requests_are_counted_by_method_route_template_and_status() {
        let metrics = Arc::new(HttpMetrics::default());
        let mut app = app(&metrics);
        assert_eq!(send(&mut app, "GET", "/items/1").await, 200);
        assert_eq!(send(&mut app, "GET", "/items/2").await, 200);
        assert_eq!(send(&mut app, "DELETE", "/items/1").await, 204);
        assert_eq!(send(&mut app, "POST", "/items/1").await, 405);
        assert_eq!(send(&mut app, "GET", "/nothing/here").await, 404);
        assert_eq!(send(&mut app, "PUT", "/elsewhere").await, 404);
        assert_eq!(send(&mut app, "PURGE", "/items/1").await, 405);
        assert_eq!(count(&metrics, "GET", "/items/{id}", Some(200)), 2);
        assert_eq!(count(&metrics, "DELETE", "/items/{id}", Some(204)), 1);
        assert_eq!(count(&metrics, "POST", "/items/{id}", Some(405)), 1);
        assert_eq!(count(&metrics, "other", "/items/{id}", Some(405)), 1);
        assert_eq!(count(&metrics, "GET", UNMATCHED, Some(404)), 1);
        assert_eq!(count(&metrics, "PUT", UNMATCHED, Some(404)), 1);
        // every request was answered: no series of abandoned ones, nothing in flight
        assert!(metrics.snapshot().iter().all(|s| s.status.is_some()));
        assert_eq!(metrics.in_flight(), 0);
    }

    /// More (method, status) pairs than an endpoint keeps cells for go through the shared table,
    /// counted all the same.
    #[tokio::test]
    async fn an_endpoint_with_many_statuses_counts_them_all() {
        let metrics = Arc::new(HttpMetrics::default());
        let mut app = app(&metrics);
        let codes: Vec<u16> = (200..200 + CELLS as u16 + 4).collect();
        for _ in 0..2 {
            for &code in &codes {
                assert_eq!(send(&mut app, "GET", &format!("/status/{code}")).await, code);
            }
        }
        for code in codes {
            assert_eq!(count(&metrics, "GET", "/status/{code}", Some(code)), 2, "{code}");
        }
    }

    #[tokio::test]
    async fn a_request_dropped_before_its_answer_is_in_flight_then_abandoned() {
        let metrics = Arc::new(HttpMetrics::default());
        let mut app = app(&metrics);
        let mut slow = Box::pin(app.call(request("GET", "/slow")));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(slow.as_mut().poll(&mut cx).is_pending());
        assert_eq!(metrics.in_flight(), 1);
        drop(slow);
        assert_eq!(metrics.in_flight(), 0);
        assert_eq!(count(&metrics, "GET", "/slow", None), 1);
        assert_eq!(count(&metrics, "GET", "/slow", Some(200)), 0);
    }

    /// A handler's panic is answered with the 500 problem and counted as that 500; the next
    /// request is served as usual.
    #[tokio::test]
    async fn a_panic_is_answered_with_a_counted_500() {
        let metrics = Arc::new(HttpMetrics::default());
        let mut app = app(&metrics);
        let response = app.call(request("GET", "/panic")).await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(response.headers()["content-type"], "application/problem+json");
        assert_eq!(send(&mut app, "GET", "/items/1").await, 200);
        assert_eq!(count(&metrics, "GET", "/panic", Some(500)), 1);
        assert_eq!(count(&metrics, "GET", "/panic", None), 0);
        assert_eq!(metrics.in_flight(), 0);
    }

    /// Two servers' metrics never mix.
    #[tokio::test]
    async fn each_metrics_instance_counts_only_its_own_requests() {
        let (one, two) = (Arc::new(HttpMetrics::default()), Arc::new(HttpMetrics::default()));
        let (mut a, mut b) = (app(&one), app(&two));
        send(&mut a, "GET", "/items/1").await;
        send(&mut a, "GET", "/items/1").await;
        send(&mut b, "GET", "/items/1").await;
        assert_eq!(count(&one, "GET", "/items/{id}", Some(200)), 2);
        assert_eq!(count(&two, "GET", "/items/{id}", Some(200)), 1);
    }
}
