//! Cross-origin requests (`--cors-origins`): off by default (no CORS header on any answer, an
//! `OPTIONS` is no route); with origins, preflights answered without a key, the headers the API
//! reads allowed and the ones it sets exposed, errors readable by the page, other origins not.
//! Without keys: other host names than loopback ones refused (DNS rebinding), and writes from
//! pages of other origins.

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
    // without keys, on purpose only (see below)
    let s = TestServer::start_with(|c| {
        c.access.cors = CorsOrigins::Any;
        c.access.allow_unauthenticated = true;
    })
    .await;
    let r = preflight(&s, "/v1/tables", "https://anywhere.example", "POST", "content-type").await;
    assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-origin")), (200, "*"));
    let r = send(&s, Method::GET, "/v1/tables", None, &[("origin", "https://anywhere.example")]).await;
    assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-origin")), (200, "*"));
}

/// Sends `method path` with `Host: host` (and `Origin`, if given), a text body for a write.
async fn as_host(s: &TestServer, method: Method, path: &str, host: &str, origin: Option<&str>) -> reqwest::Response {
    let mut headers = vec![("host", host)];
    headers.extend(origin.map(|o| ("origin", o)));
    if method == Method::POST || method == Method::PUT {
        let mut req = s.anon.request(method, format!("{}{path}", s.base));
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let body = if path.starts_with("/write") { "cpu value=1 1000000000" } else { "{\"n\": 1}" };
        let content_type = if path.starts_with("/write") { "text/plain" } else { "application/json" };
        return req.header("content-type", content_type).body(body).send().await.unwrap();
    }
    send(s, method, path, None, &headers).await
}

/// Without keys, a page whose name an attacker points at 127.0.0.1 (DNS rebinding) reaches
/// nothing: only loopback names and addresses are answered.
#[tokio::test]
async fn without_keys_a_foreign_host_is_refused() {
    let s = TestServer::start().await;
    s.create_table("t").await;
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    for host in
        [format!("attacker.example:{port}"), "attacker.example".into(), format!("localhost.evil.example:{port}")]
    {
        for (method, path) in [(Method::GET, "/v1/tables"), (Method::POST, "/write"), (Method::GET, "/health")] {
            let r = as_host(&s, method.clone(), path, &host, None).await;
            assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST, "{host} {method} {path}");
            // a problem; on Influx's `/write`, in the shape Influx clients read
            let problem = if path == "/write" { "application/json" } else { "application/problem+json" };
            assert_eq!(header(&r, "content-type"), problem);
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["code"], "host_not_allowed", "{body}");
        }
    }
    assert_eq!(s.get("/v1/timeseries").await.1["metrics"], serde_json::json!([]), "nothing was written");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "LOCALHOST".into(),
        format!("[::1]:{port}"),
        "app.localhost".into(),
        "127.0.0.2".into(),
        "10.1.2.3:8080".into(),
    ] {
        let r = as_host(&s, Method::GET, "/v1/tables", &host, None).await;
        assert_eq!(r.status(), 200, "{host}");
    }
    // a name the operator allows
    let named = TestServer::start_with(|c| c.access.allowed_hosts = vec!["db.internal".into()]).await;
    assert_eq!(as_host(&named, Method::GET, "/v1/tables", "db.internal:8080", None).await.status(), 200);
    assert_eq!(as_host(&named, Method::GET, "/v1/tables", "db.external", None).await.status(), 421);
    // with keys, the keys protect: a foreign host with a key is answered, without one refused as ever
    let keyed = TestServer::start_with_keys(|_| {}).await;
    let r = send(&keyed, Method::GET, "/v1/tables", Some(ADMIN_KEY), &[("host", "attacker.example")]).await;
    assert_eq!(r.status(), 200);
    let r = send(&keyed, Method::GET, "/v1/tables", None, &[("host", "attacker.example")]).await;
    assert_eq!(r.status(), 401);
}

/// Without keys, a page of another origin cannot write (a `text/plain` line-protocol POST needs
/// no preflight): a write carrying a foreign `Origin` is refused, the server's own origin and
/// the configured ones pass, and reads pass (their answers are the browser's to hide).
#[tokio::test]
async fn without_keys_writes_from_foreign_origins_are_refused() {
    let s = TestServer::start().await;
    s.create_table("t").await;
    let own = s.base.clone();
    let host = own.strip_prefix("http://").unwrap().to_owned();
    for origin in ["https://evil.example", "null", "http://localhost:1", "http://127.0.0.1:1"] {
        for (method, path) in [
            (Method::POST, "/write"),
            (Method::PUT, "/v1/tables/t/documents/a"),
            (Method::DELETE, "/v1/tables/t"),
            (Method::POST, "/v1/admin/check"),
        ] {
            let r = as_host(&s, method.clone(), path, &host, Some(origin)).await;
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{origin} {method} {path}");
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["code"], "origin_not_allowed", "{body}");
        }
        assert_eq!(as_host(&s, Method::GET, "/v1/tables/t", &host, Some(origin)).await.status(), 200);
    }
    assert_eq!(s.get("/v1/tables/t/documents/a").await.0, 404, "nothing was written");
    assert_eq!(s.get("/v1/timeseries").await.1["metrics"], serde_json::json!([]));
    // the server's own pages (its Swagger UI) write
    assert_eq!(as_host(&s, Method::PUT, "/v1/tables/t/documents/a", &host, Some(&own)).await.status(), 201);
    assert_eq!(as_host(&s, Method::POST, "/write", &host, Some(&own)).await.status(), 204);
    // a configured origin too (allowed without keys on purpose only)
    let cors = TestServer::start_with(|c| {
        c.access.cors = CorsOrigins::parse(APP).unwrap();
        c.access.allow_unauthenticated = true;
    })
    .await;
    let host = cors.base.strip_prefix("http://").unwrap().to_owned();
    assert_eq!(as_host(&cors, Method::POST, "/write", &host, Some(APP)).await.status(), 204);
    assert_eq!(as_host(&cors, Method::POST, "/write", &host, Some("https://evil.example")).await.status(), 403);
    // with keys: a page needs the key anyway, and sends it only where CORS lets it
    let keyed = TestServer::start_with_keys(|_| {}).await;
    keyed.create_table("t").await;
    let r = send(&keyed, Method::DELETE, "/v1/tables/t", Some(ADMIN_KEY), &[("origin", "https://evil.example")]).await;
    assert_eq!(r.status(), 204);
}

/// `--cors-origins` without keys lets every page of those origins do everything: refused at
/// start unless `--allow-unauthenticated` says it is meant.
#[tokio::test]
async fn cors_origins_without_keys_need_allow_unauthenticated() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = mosaicdb::server::ServerConfig::new(dir.path().join("db"));
    config.addr = "127.0.0.1:0".parse().unwrap();
    config.access.cors = CorsOrigins::parse(APP).unwrap();
    let Err(refused) = mosaicdb::server::Server::start(config.clone()).await else { panic!("it started") };
    let message = refused.to_string();
    assert!(message.contains("--cors-origins") && message.contains("--allow-unauthenticated"), "{message}");
    assert!(!dir.path().join("db").exists(), "the data directory was opened before the refusal");
    config.access.allow_unauthenticated = true;
    assert!(config.access.check_exposure(config.addr).is_ok());
    config.access.allow_unauthenticated = false;
    config.access.keys = mosaicdb::api::auth::KeySet::parse_env("a:admin:0123456789abcdef").unwrap();
    assert!(config.access.check_exposure(config.addr).is_ok());
}
