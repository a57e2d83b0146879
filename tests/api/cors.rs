//! Cross-origin requests (`--cors-origins`): off by default (no CORS header on any answer, an
//! `OPTIONS` is no route); with origins, preflights answered without a key, the headers the API
//! reads allowed and the ones it sets exposed, errors readable by the page, other origins not.

use crate::common::{ADMIN_KEY, TestServer, bearer};
use mosaicdb::api::CorsOrigins;
use reqwest::{Method, StatusCode};

const APP: &str = "https://app.example.com";

/// Sends `method path` without a key (unless `key`), with the given headers.
async fn send(
    s: &TestServer,
    method: Method,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = s.anon.request(method, format!("{}{path}", s.base));
    if let Some(key) = key {
        req = req.header("authorization", bearer(key));
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

/// A preflight from `origin` for `method` with `headers` asked for.
async fn preflight(s: &TestServer, path: &str, origin: &str, method: &str, headers: &str) -> reqwest::Response {
    send(
        s,
        Method::OPTIONS,
        path,
        None,
        &[("origin", origin), ("access-control-request-method", method), ("access-control-request-headers", headers)],
    )
    .await
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The comma-separated items of a header, lowercased.
fn items(r: &reqwest::Response, name: &str) -> Vec<String> {
    header(r, name).split(',').map(|i| i.trim().to_ascii_lowercase()).filter(|i| !i.is_empty()).collect()
}

#[tokio::test]
async fn cors_is_off_by_default() {
    let s = TestServer::start().await;
    s.create_table("plain").await;
    let r = preflight(&s, "/v1/tables/plain/documents/a", APP, "PUT", "content-type").await;
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&r, "content-type"), "application/problem+json");
    assert!(r.headers().keys().all(|k| !k.as_str().starts_with("access-control-")), "{:?}", r.headers());
    let r = send(&s, Method::GET, "/v1/tables/plain", None, &[("origin", APP)]).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().keys().all(|k| !k.as_str().starts_with("access-control-")), "{:?}", r.headers());
    // with keys and CORS off, a preflight is a request like any other: it needs a key
    let keyed = TestServer::start_with_keys(|_| {}).await;
    let r = preflight(&keyed, "/v1/tables", APP, "GET", "authorization").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().keys().all(|k| !k.as_str().starts_with("access-control-")), "{:?}", r.headers());
}

#[tokio::test]
async fn preflights_need_no_key_and_answers_carry_the_headers_of_an_allowed_origin() {
    let origins = CorsOrigins::parse(&format!("{APP}, http://localhost:5173")).unwrap();
    let s = TestServer::start_with_keys(|c| c.access.cors = origins).await;
    s.create_table("cors").await;

    // a preflight, without a key: allowed, with what the API reads
    let r = preflight(&s, "/v1/tables/cors/documents/a", APP, "PUT", "authorization,content-type,if-match").await;
    assert_eq!(r.status(), 200, "{:?}", r.headers());
    assert_eq!(header(&r, "access-control-allow-origin"), APP);
    let methods = items(&r, "access-control-allow-methods");
    for m in ["get", "head", "post", "put", "patch", "delete"] {
        assert!(methods.contains(&m.to_owned()), "{methods:?}");
    }
    let allowed = items(&r, "access-control-allow-headers");
    for h in
        ["authorization", "content-type", "if-match", "if-none-match", "x-mosaic-min-seq", "accept", "last-event-id"]
    {
        assert!(allowed.contains(&h.to_owned()), "{h}: {allowed:?}");
    }
    assert_eq!(header(&r, "access-control-max-age"), "600");
    assert!(items(&r, "vary").contains(&"origin".to_owned()), "{:?}", r.headers());
    assert!(header(&r, "access-control-allow-credentials").is_empty(), "bearer keys, no cookies");
    // on any path, a database's and an unknown one too: the preflight does not tell routes apart
    for path in ["/v1/db/default/tables", "/v1/no/such/route"] {
        let r = preflight(&s, path, "http://localhost:5173", "POST", "content-type").await;
        assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-origin")), (200, "http://localhost:5173"));
    }

    // another origin: no allow-origin, so the browser refuses; the preflight still needs no key
    let r = preflight(&s, "/v1/tables/cors", "https://evil.example", "GET", "authorization").await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "access-control-allow-origin").is_empty(), "{:?}", r.headers());

    // an OPTIONS that is no preflight goes the usual way: the key check, no preflight answer
    let r = send(&s, Method::OPTIONS, "/v1/tables/cors", None, &[("origin", APP)]).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(header(&r, "access-control-allow-methods").is_empty(), "{:?}", r.headers());
    let r = send(&s, Method::OPTIONS, "/v1/tables/cors", Some(ADMIN_KEY), &[("access-control-request-method", "GET")])
        .await;
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "no Origin: no preflight");

    // the actual requests: with the key, the headers a page may read exposed
    let r = s
        .anon
        .put(format!("{}/v1/tables/cors/documents/a", s.base))
        .header("authorization", bearer(ADMIN_KEY))
        .header("origin", APP)
        .json(&serde_json::json!({"x": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "access-control-allow-origin"), APP);
    let exposed = items(&r, "access-control-expose-headers");
    for h in ["etag", "location", "x-mosaic-seq", "x-request-id", "retry-after"] {
        assert!(exposed.contains(&h.to_owned()), "{h}: {exposed:?}");
    }
    assert!(!header(&r, "etag").is_empty() && !header(&r, "x-mosaic-seq").is_empty());
    // an error is readable by the page too: a request without the key
    let r = send(&s, Method::GET, "/v1/tables/cors/documents/a", None, &[("origin", APP)]).await;
    assert_eq!(r.status(), 401);
    assert_eq!(header(&r, "access-control-allow-origin"), APP);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["code"], "unauthenticated");
    // no Origin, or another one: no CORS headers on the answer
    let r = send(&s, Method::GET, "/v1/tables/cors", Some(ADMIN_KEY), &[("origin", "https://evil.example")]).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "access-control-allow-origin").is_empty(), "{:?}", r.headers());
}

#[tokio::test]
async fn a_star_allows_every_origin() {
    let s = TestServer::start_with(|c| c.access.cors = CorsOrigins::Any).await;
    let r = preflight(&s, "/v1/tables", "https://anywhere.example", "POST", "content-type").await;
    assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-origin")), (200, "*"));
    let r = send(&s, Method::GET, "/v1/tables", None, &[("origin", "https://anywhere.example")]).await;
    assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-origin")), (200, "*"));
}
