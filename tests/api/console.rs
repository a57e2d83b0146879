//! The web console's files (`/console/`): content types, the Content-Security-Policy, ETag and
//! 304, gzip, no key needed for the files (while the API still wants one), a redirect of
//! `/console`, and an unknown file as a problem. What the pages do is tested in a real browser
//! by `tests/console/run.py`.

use crate::common::{TestServer, bearer};
use reqwest::{Method, StatusCode};

const FILES: &[(&str, &str)] = &[
    ("/console/", "text/html; charset=utf-8"),
    ("/console/index.html", "text/html; charset=utf-8"),
    ("/console/style.css", "text/css; charset=utf-8"),
    ("/console/app.js", "text/javascript; charset=utf-8"),
    ("/console/dom.js", "text/javascript; charset=utf-8"),
    ("/console/icon.svg", "image/svg+xml"),
];

#[tokio::test]
async fn files_are_served_with_their_type_a_strict_policy_and_no_key() {
    // with keys configured: the page loads without one (it asks for it), the API still wants one
    let s = TestServer::start_with_keys(|_| {}).await;
    for (path, content_type) in FILES {
        let resp = s.anon.get(format!("{}{path}", s.base)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let headers = resp.headers().clone();
        assert_eq!(headers["content-type"], *content_type, "{path}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        for directive in ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["cache-control"], "no-cache");
        assert!(headers["etag"].to_str().unwrap().starts_with("W/\""), "{path}");
        assert!(!resp.bytes().await.unwrap().is_empty());
    }
    let page = s.anon.get(format!("{}/console/", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(r#"<script type="module" src="app.js"></script>"#), "{page}");
    // no inline script: every <script> of the page names its file
    assert_eq!(page.matches("<script").count(), page.matches("<script type=\"module\" src=").count());
    let r = s.send_as(None, Method::GET, "/v1/tables", None).await;
    assert!(r.is_problem(401, "unauthenticated"), "{}", r.body);
    let r = s.send_as(Some(&bearer(crate::common::ADMIN_KEY)), Method::GET, "/v1/tables", None).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn every_file_of_the_folder_is_served() {
    let s = TestServer::start().await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/api/console");
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        let resp = s.client.get(format!("{}/console/{name}", s.base)).send().await.unwrap();
        assert_eq!(
            resp.status(),
            200,
            "{name} is in the folder but not served: add it to ASSETS in src/api/console.rs"
        );
        let on_disk = std::fs::read(format!("{dir}/{name}")).unwrap();
        assert_eq!(resp.bytes().await.unwrap(), on_disk, "{name}");
    }
}

#[tokio::test]
async fn an_unchanged_file_answers_304_and_a_changed_tag_the_file() {
    let s = TestServer::start().await;
    let url = format!("{}/console/app.js", s.base);
    let first = s.client.get(&url).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let again = s.client.get(&url).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"], etag.as_str());
    assert!(again.bytes().await.unwrap().is_empty());
    // the strong form of the same tag, and a list holding it, match too (weak comparison)
    let strong = etag.trim_start_matches("W/");
    let listed = format!("\"other\", {strong}");
    for tag in [strong, listed.as_str(), "*"] {
        assert_eq!(s.client.get(&url).header("if-none-match", tag).send().await.unwrap().status(), 304, "{tag}");
    }
    let other = s.client.get(&url).header("if-none-match", "W/\"0000\"").send().await.unwrap();
    assert_eq!(other.status(), 200);
    // each file its own tag
    let css = s.client.get(format!("{}/console/style.css", s.base)).send().await.unwrap();
    assert_ne!(css.headers()["etag"], etag.as_str());
    // HEAD: the headers without the body
    let head = s.client.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["etag"], etag.as_str());
}

#[tokio::test]
async fn files_are_gzipped_when_asked() {
    let s = TestServer::start().await;
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let url = format!("{}/console/app.js", s.base);
    let plain = raw.get(&url).send().await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.bytes().await.unwrap();
    let zipped = raw.get(&url).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    assert!(zipped.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'self'"));
    let zipped = zipped.bytes().await.unwrap();
    assert!(zipped.len() < plain.len(), "{} >= {}", zipped.len(), plain.len());
    // what reqwest (with gzip) decodes is the file
    assert_eq!(s.client.get(&url).send().await.unwrap().bytes().await.unwrap(), plain);
}

#[tokio::test]
async fn console_redirects_and_an_unknown_file_is_a_problem() {
    let s = TestServer::start().await;
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let resp = no_redirects.get(format!("{}/console", s.base)).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(resp.headers()["location"], "/console/");
    for path in ["/console/nothing.js", "/console/../Cargo.toml", "/console/views/app.js", "/console/%2e%2e/Cargo.toml"]
    {
        let r = s.send(Method::GET, path, None, &[]).await;
        assert!(r.is_problem(404, "route_not_found"), "{path}: {}", r.body);
    }
    // the files are read-only
    let r = s.send(Method::POST, "/console/app.js", None, &[]).await;
    assert!(r.is_problem(405, "method_not_allowed"), "{}", r.body);
}

#[tokio::test]
async fn the_console_is_not_in_the_openapi_document() {
    let s = TestServer::start().await;
    let (status, spec) = s.get("/openapi.json").await;
    assert_eq!(status, 200);
    assert!(spec["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/console")));
}
