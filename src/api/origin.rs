//! Browsers against a server without keys: the defence against DNS rebinding and against writes
//! sent across sites. Installed only when no API keys are configured (with keys, a page can send
//! nothing a key does not allow: a browser never adds the `Authorization` header on its own).
//!
//! **Host.** A page of `attacker.example` whose name the attacker then points at 127.0.0.1 (DNS
//! rebinding) calls this server as its own origin: same-origin, so no CORS rule stops it. Its
//! requests still carry `Host: attacker.example`, so a request is answered only when its host is
//! a loopback name (`localhost`, `*.localhost`), an IP address (a rebinding needs a name: a page
//! that calls an address is cross-origin, which the `Origin` rule below covers) or a name of
//! `--allowed-hosts`; else 421 `host_not_allowed`.
//!
//! **Origin.** A page of another origin may still *send* a request a browser thinks harmless (a
//! `text/plain` POST, such as a line-protocol write, needs no preflight): its answer is hidden
//! from the page, but the write would be done. So a request other than GET, HEAD or OPTIONS whose
//! `Origin` is neither this server's own (its scheme and the request's `Host`) nor one of
//! `--cors-origins` is refused: 403 `origin_not_allowed`. Requests without `Origin` (every
//! client but a browser) pass.

use super::CorsOrigins;
use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{FromFnLayer, Next};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What the check allows besides the loopback names and IP addresses.
#[derive(Debug)]
pub(super) struct Allowed {
    /// `--allowed-hosts`, lowercased
    hosts: Vec<String>,
    /// `--cors-origins`
    cors: CorsOrigins,
}

type Check = fn(State<Arc<Allowed>>, Request, Next) -> std::pin::Pin<Box<dyn Future<Output = Response> + Send>>;
/// The middleware layer of [`check`].
pub(super) type OriginLayer = FromFnLayer<Check, Arc<Allowed>, (State<Arc<Allowed>>, Request)>;

/// The layer, or `None` when keys are configured (they are the protection then).
pub(super) fn layer(access: &super::auth::Access) -> Option<OriginLayer> {
    if access.enabled() {
        return None;
    }
    let allowed = Arc::new(Allowed { hosts: access.allowed_hosts.clone(), cors: access.cors.clone() });
    let check: Check = |state, req, next| Box::pin(check(state, req, next));
    Some(axum::middleware::from_fn_with_state(allowed, check))
}

async fn check(State(allowed): State<Arc<Allowed>>, req: Request, next: Next) -> Response {
    // HTTP/2 names the host in the request's authority, HTTP/1.1 in `Host`
    let host = match req.uri().authority() {
        Some(authority) => Some(authority.as_str().to_owned()),
        None => req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned),
    };
    // no host at all (HTTP/1.0): no browser sends such a request
    if let Some(host) = &host
        && !host_allowed(host, &allowed.hosts)
    {
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            format!(
                "this server has no API keys and answers only requests to localhost, to an IP address or to a \
                 name of --allowed-hosts, not to {:?} (the defence against DNS rebinding): configure API keys, \
                 or add the name to --allowed-hosts",
                truncated(host)
            ),
        )
        .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe
        && let Some(origin) = req.headers().get(header::ORIGIN)
        && !origin_allowed(origin, host.as_deref(), &allowed.cors)
    {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            format!(
                "this server has no API keys and takes writes from web pages of its own origin only, or of \
                 --cors-origins, not from {:?}",
                truncated(origin.to_str().unwrap_or("?"))
            ),
        )
        .into_response();
    }
    next.run(req).await
}

/// At most 100 characters of a header, for a message.
fn truncated(text: &str) -> &str {
    text.char_indices().nth(100).map_or(text, |(i, _)| &text[..i])
}

/// Whether `host` (a `Host` header: a name or address, maybe a port) is one to answer.
pub(super) fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim();
    // `[::1]:8080`, `[::1]`: an IPv6 address
    if let Some(rest) = host.strip_prefix('[') {
        let Some((address, port)) = rest.split_once(']') else { return false };
        return address.parse::<std::net::Ipv6Addr>().is_ok() && (port.is_empty() || valid_port(port));
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if valid_port(port) => name,
        Some(_) => return false,
        None => host,
    };
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    let name = name.to_ascii_lowercase();
    // `localhost` and its subdomains resolve to loopback without DNS (RFC 6761; browsers keep to it)
    name == "localhost" || name.ends_with(".localhost") || allowed.contains(&name)
}

fn valid_port(port: &str) -> bool {
    port.strip_prefix(':').unwrap_or(port).parse::<u16>().is_ok()
}

/// Whether a write from a page of `origin` is taken: this server's own origin (an http or
/// https origin whose host is the request's `host`), or one of `--cors-origins`.
fn origin_allowed(origin: &HeaderValue, host: Option<&str>, cors: &CorsOrigins) -> bool {
    match cors {
        CorsOrigins::Any => return true,
        CorsOrigins::List(list) if list.iter().any(|o| o.as_bytes().eq_ignore_ascii_case(origin.as_bytes())) => {
            return true;
        }
        _ => {}
    }
    let Ok(origin) = origin.to_str() else { return false };
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    matches!((authority, host), (Some(a), Some(h)) if a.eq_ignore_ascii_case(h.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_are_allowed_other_names_not() {
        let none: &[String] = &[];
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "app.localhost:3000",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
            "10.231.0.21:8080",
            "[fe80::1]:80",
        ] {
            assert!(host_allowed(host, none), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "localhost:port",
            "[::1",
            "[not-v6]:80",
            "",
            "db.internal",
        ] {
            assert!(!host_allowed(host, none), "{host}");
        }
        let listed = ["db.internal".to_owned()];
        assert!(host_allowed("DB.internal:8080", &listed));
        assert!(!host_allowed("other.internal", &listed));
    }

    #[test]
    fn own_origin_and_cors_origins_are_allowed() {
        let v = |s: &'static str| HeaderValue::from_static(s);
        let off = CorsOrigins::Off;
        assert!(origin_allowed(&v("http://127.0.0.1:8080"), Some("127.0.0.1:8080"), &off));
        assert!(origin_allowed(&v("https://LOCALHOST:8080"), Some("localhost:8080"), &off));
        assert!(!origin_allowed(&v("http://127.0.0.1:8081"), Some("127.0.0.1:8080"), &off));
        assert!(!origin_allowed(&v("http://localhost:8080"), Some("127.0.0.1:8080"), &off));
        assert!(!origin_allowed(&v("null"), Some("127.0.0.1:8080"), &off));
        assert!(!origin_allowed(&v("https://evil.example"), Some("127.0.0.1:8080"), &off));
        assert!(!origin_allowed(&v("http://127.0.0.1:8080"), None, &off));
        let list = CorsOrigins::parse("https://app.example.com").unwrap();
        assert!(origin_allowed(&v("https://app.example.com"), Some("127.0.0.1:8080"), &list));
        assert!(!origin_allowed(&v("https://evil.example"), Some("127.0.0.1:8080"), &list));
        assert!(origin_allowed(&v("https://evil.example"), Some("127.0.0.1:8080"), &CorsOrigins::Any));
    }
}
