//! A small HTTP/1.1 client for the commands that talk to a running server (`health`, `backup`):
//! one request per connection over plain TCP, the response body left to stream.

use axum::body::Bytes;
use axum::http::{HeaderValue, Method, Request, Response, Uri, header};
use http_body_util::Full;
use hyper::body::Incoming;
use std::time::Duration;

/// Why a request to the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// the URL is not `http://host[:port][/path]`
    #[error("{0:?} is not an http:// URL")]
    Url(String),
    /// the API key holds characters a header cannot carry
    #[error("the API key may hold only visible ASCII characters")]
    Key,
    /// the server could not be reached
    #[error("cannot reach {0}: {1}")]
    Connect(String, std::io::Error),
    /// no answer within the time allowed
    #[error("no answer from {0} within {1:?}")]
    Timeout(String, Duration),
    /// the HTTP exchange failed
    #[error("HTTP error: {0}")]
    Http(#[from] hyper::Error),
}

/// Sends one request to `url` (with `Authorization: Bearer {key}` when a key is given) and returns
/// the response once its head has arrived, within `timeout`; its body streams from the socket.
pub async fn send(
    method: Method,
    url: &str,
    key: Option<&str>,
    body: Bytes,
    timeout: Duration,
) -> Result<Response<Incoming>, ClientError> {
    let uri: Uri = url.parse().map_err(|_| ClientError::Url(url.to_owned()))?;
    if uri.scheme_str() != Some("http") {
        return Err(ClientError::Url(url.to_owned()));
    }
    let host = uri.host().ok_or_else(|| ClientError::Url(url.to_owned()))?.to_owned();
    let port = uri.port_u16().unwrap_or(80);
    let authority = format!("{host}:{port}");
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let exchange = async {
        // brackets of an IPv6 literal are not part of the address
        let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| ClientError::Connect(authority.clone(), e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        let mut request = Request::builder().method(method).uri(path);
        if let Some(h) = request.headers_mut() {
            h.insert(header::HOST, HeaderValue::from_str(&authority).map_err(|_| ClientError::Url(url.to_owned()))?);
            if let Some(key) = key {
                let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| ClientError::Key)?;
                h.insert(header::AUTHORIZATION, value);
            }
        }
        let request = request.body(Full::new(body)).map_err(|_| ClientError::Url(url.to_owned()))?;
        Ok(sender.send_request(request).await?)
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| ClientError::Timeout(authority.clone(), timeout))?
}
