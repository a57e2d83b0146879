//! HTTPS on the binary (`--tls-cert`, `--tls-key`), with test certificates made here by rcgen: a
//! request over HTTP/1.1 and one over HTTP/2 (ALPN; hyper's client over tokio-rustls, since
//! reqwest's rustls wants a process-wide crypto provider that every other test's plain client
//! would then need too), a malformed HTTP/1.1 request over TLS that
//! gets the problem document, the certificate replaced while the server runs (new connections
//! present the new one, no restart), a broken replacement that leaves the previous one in use, and
//! the start-up warning about keys sent in clear text.

use crate::spawned::{Spawned, free_port};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

/// A test CA and a certificate it signed for `localhost` and 127.0.0.1, as PEM; and the leaf's DER.
struct TestCert {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
    leaf_der: Vec<u8>,
}

fn make_cert(name: &str) -> TestCert {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, format!("mosaicdb test CA {name}"));
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let leaf = params.signed_by(&key, &ca).unwrap();
    TestCert { ca_pem: ca.pem(), cert_pem: leaf.pem(), key_pem: key.serialize_pem(), leaf_der: leaf.der().to_vec() }
}

/// Replaces a file as a rotation does: written aside, then renamed over it.
fn replace(path: &Path, text: &str) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// A rustls client configuration trusting the given CAs (PEM), offering `alpn`.
fn client_config(cas: &[&str], alpn: &[&[u8]]) -> rustls::ClientConfig {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots.add(rustls_pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// An answer: status, HTTP version, body.
type Answer = (u16, axum::http::Version, String);

/// One HTTPS request on a new connection to `addr` (as `localhost`) trusting `ca`, offering
/// `alpn`; HTTP/2 when the server chose it.
async fn https(addr: &str, ca: &str, alpn: &[&[u8]], method: &str, path: &str, body: &str) -> Result<Answer, String> {
    use http_body_util::BodyExt;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(&[ca], alpn)));
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = hyper_util::rt::TokioIo::new(tls);
    let request = axum::http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body.to_owned())))
        .unwrap();
    let response = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        sender.send_request(request).await
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut request = request;
        *request.uri_mut() = path.parse().unwrap();
        request.headers_mut().insert("host", "localhost".parse().unwrap());
        sender.send_request(request).await
    }
    .map_err(|e| e.to_string())?;
    let (status, version) = (response.status().as_u16(), response.version());
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, version, String::from_utf8_lossy(&body).into_owned()))
}

/// A TLS connection to `addr` trusting `cas`, speaking HTTP/1.1.
async fn connect(addr: &str, cas: &[&str]) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(cas, &[b"http/1.1"])));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    connector.connect(rustls_pki_types::ServerName::try_from("localhost").unwrap(), tcp).await
}

/// The leaf certificate a new connection is shown.
async fn presented(addr: &str, cas: &[&str]) -> Option<Vec<u8>> {
    let tls = connect(addr, cas).await.ok()?;
    Some(tls.get_ref().1.peer_certificates()?.first()?.to_vec())
}

#[tokio::test]
async fn https_over_http1_and_http2_with_a_certificate_replaced_while_running() {
    let first = make_cert("one");
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    std::fs::write(&cert, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();
    let mut server = Spawned::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], None);
    server.wait_listening();
    let addr = server.addr.clone();

    // HTTP/1.1 and HTTP/2, as ALPN agrees; a write over HTTP/2 read back over HTTP/1.1
    let (h1, h2): (&[&[u8]], &[&[u8]]) = (&[b"http/1.1"], &[b"h2", b"http/1.1"]);
    let ca = first.ca_pem.as_str();
    let (status, version, _) = https(&addr, ca, h1, "GET", "/health", "").await.unwrap();
    assert_eq!((status, version), (200, axum::http::Version::HTTP_11));
    let (status, version, body) = https(&addr, ca, h2, "POST", "/v1/tables", r#"{"name": "t"}"#).await.unwrap();
    assert_eq!((status, version), (201, axum::http::Version::HTTP_2), "{body}");
    let (status, _, _) = https(&addr, ca, h2, "PUT", "/v1/tables/t/documents/a", r#"{"x": 1}"#).await.unwrap();
    assert_eq!(status, 201);
    let (status, _, body) = https(&addr, ca, h1, "GET", "/v1/tables/t/documents/a", "").await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["x"], 1);
    // plain HTTP on the TLS port gets no answer it could take for one
    let plain = reqwest::Client::new().get(format!("http://{addr}/health")).send().await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // hyper's own 400 to a malformed head is still a problem document over TLS
    let mut tls = connect(&addr, &[&first.ca_pem]).await.unwrap();
    tls.write_all(b"GET /v1/tables?cursor=<cursor> HTTP/1.1\r\nhost: localhost\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("application/problem+json") && answer.contains("malformed_request"), "{answer}");

    // the certificate replaced: new connections are shown the new one, without a restart
    assert_eq!(presented(&addr, &[&first.ca_pem]).await.as_deref(), Some(&first.leaf_der[..]));
    let second = make_cert("two");
    replace(&key, &second.key_pem);
    replace(&cert, &second.cert_pem);
    let both = [first.ca_pem.as_str(), second.ca_pem.as_str()];
    let deadline = Instant::now() + Duration::from_secs(20);
    while presented(&addr, &both).await.as_deref() != Some(&second.leaf_der[..]) {
        assert!(Instant::now() < deadline, "the new certificate was never presented: {}", server.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, version, _) = https(&addr, &second.ca_pem, h2, "GET", "/health", "").await.unwrap();
    assert_eq!((status, version), (200, axum::http::Version::HTTP_2));
    assert!(https(&addr, ca, h2, "GET", "/health", "").await.is_err(), "the old CA no longer fits");
    assert!(server.log().contains("TLS certificate reloaded"), "{}", server.log());

    // a broken replacement is logged, and the certificate in use stays
    replace(&cert, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.log().contains("cannot be used: the previous certificate stays") {
        assert!(Instant::now() < deadline, "the broken file was never noticed: {}", server.log());
        assert_eq!(presented(&addr, &both).await.as_deref(), Some(&second.leaf_der[..]));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(presented(&addr, &both).await.as_deref(), Some(&second.leaf_der[..]));
    server.stop();
}

/// Files that cannot be used stop the start with a message naming them.
#[test]
fn unusable_tls_files_refuse_the_start() {
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    let one = make_cert("one");
    let other = make_cert("other");
    std::fs::write(&cert, &one.cert_pem).unwrap();
    std::fs::write(&key, &other.key_pem).unwrap();
    let mut server = Spawned::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], None);
    let status = server.child.wait().unwrap();
    assert!(!status.success());
    // a flag without its pair is refused by the parser
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mosaicdb"))
        .args(["--tls-cert", cert.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}

/// API keys on an address other than loopback, without TLS: the server starts, and says the
/// keys cross the network in clear text.
#[test]
fn keys_without_tls_on_a_public_address_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mosaicdb"))
        .args(["--addr", &format!("0.0.0.0:{}", free_port()), "--data-dir", dir.path().join("d").to_str().unwrap()])
        .env("MOSAIC_API_KEYS", "ops:admin:0123456789abcdef0123456789abcdef")
        .stdout(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("mosaicdb listening") {
            break text;
        }
        assert!(child.try_wait().unwrap().is_none(), "{text}");
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("API keys are configured but TLS is not"), "{text}");
}
