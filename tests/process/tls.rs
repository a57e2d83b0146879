//! HTTPS on the binary (`--tls-cert`, `--tls-key`), with test certificates made here by rcgen: a
//! request over HTTP/1.1 and one over HTTP/2 (ALPN), a malformed HTTP/1.1 request over TLS that
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

fn https_client(ca: &str, alpn: &[&[u8]]) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(client_config(&[ca], alpn))
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
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
    let base = format!("https://localhost:{}", server.addr.rsplit(':').next().unwrap());
    let addr = server.addr.clone();

    // HTTP/1.1 and HTTP/2, as ALPN agrees; a write over HTTP/2 read back over HTTP/1.1
    let h1 = https_client(&first.ca_pem, &[b"http/1.1"]);
    let h2 = https_client(&first.ca_pem, &[b"h2", b"http/1.1"]);
    let r = h1.get(format!("{base}/health")).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.version()), (200, reqwest::Version::HTTP_11));
    let r = h2.post(format!("{base}/v1/tables")).json(&serde_json::json!({"name": "t"})).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.version()), (201, reqwest::Version::HTTP_2));
    let r = h2.put(format!("{base}/v1/tables/t/documents/a")).json(&serde_json::json!({"x": 1})).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let doc: serde_json::Value =
        h1.get(format!("{base}/v1/tables/t/documents/a")).send().await.unwrap().json().await.unwrap();
    assert_eq!(doc["x"], 1);
    // plain HTTP on the TLS port gets no answer it could take for one
    let plain = reqwest::Client::new().get(format!("http://{addr}/health")).send().await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // hyper's own 400 to a malformed head is still a problem document over TLS
    let mut tls = connect(&addr, &[&first.ca_pem]).await.unwrap();
    tls.write_all(b"GET /v1/tables?cursor=<cursor> HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
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
    let r = https_client(&second.ca_pem, &[b"h2"]).get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(https_client(&first.ca_pem, &[b"h2"]).get(format!("{base}/health")).send().await.is_err());
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
