//! TLS on the listener (`--tls-cert`, `--tls-key`): rustls with the ring provider, HTTP/2 and
//! HTTP/1.1 offered by ALPN, the certificate chain and key read from PEM files.
//!
//! Certificates are rotated by replacing the files (as certbot, cert-manager or a secrets agent
//! do): the handshake's certificate resolver looks at the files' modification times and sizes, at
//! most once a second, and when they changed reads them again and swaps the certified key used
//! by new handshakes. A pair that cannot be used (a half-written file, a key that does not match
//! the certificate while one of the two is still being replaced) is logged and the previous one
//! kept; it is read again once the files change again. A server with no new handshakes reads
//! nothing — only new connections need the new certificate.

use arc_swap::ArcSwap;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// The PEM files of the server's certificate chain (leaf first) and private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// the certificate chain
    pub cert: PathBuf,
    /// the private key (PKCS#8, PKCS#1 or SEC1)
    pub key: PathBuf,
}

/// How often at most the files are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The acceptor of the HTTP listener serving `files` (HTTP/2 and HTTP/1.1 by ALPN); fails when
/// they cannot be used.
pub(super) fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, String> {
    acceptor_for(files, vec![b"h2".to_vec(), b"http/1.1".to_vec()])
}

/// The acceptor of the PostgreSQL wire listener serving `files`: ALPN `postgresql`, which
/// libpq 17 and later offer (and require for a direct TLS connection).
pub(super) fn pg_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, String> {
    acceptor_for(files, vec![b"postgresql".to_vec()])
}

fn acceptor_for(files: &TlsFiles, alpn: Vec<Vec<u8>>) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let resolver = Reloading::load(files.clone(), provider.clone())?;
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = alpn;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// What identifies one version of the two files: their modification times and sizes.
type Stamp = Option<[(SystemTime, u64); 2]>;

/// The certificate resolver that follows the files.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    /// when the files were last looked at, and the stamp of the last version read (used or not)
    checked: Mutex<(Instant, Stamp)>,
}

impl Reloading {
    fn load(files: TlsFiles, provider: Arc<CryptoProvider>) -> Result<Reloading, String> {
        let stamp = stamp(&files);
        let key = certified_key(&files, &provider)?;
        tracing::info!(cert = %files.cert.display(), "TLS on: HTTP/2 and HTTP/1.1; the certificate is re-read when its files change");
        Ok(Reloading {
            files,
            provider,
            current: ArcSwap::from_pointee(key),
            checked: Mutex::new((Instant::now(), stamp)),
        })
    }

    /// Reads the files again if they changed since the last look, a second or more ago.
    fn refresh(&self) {
        // a handshake that finds another one looking goes on with the current key
        let Ok(mut checked) = self.checked.try_lock() else { return };
        if checked.0.elapsed() < CHECK_EVERY {
            return;
        }
        checked.0 = Instant::now();
        let now = stamp(&self.files);
        if now == checked.1 {
            return;
        }
        checked.1 = now;
        drop(checked);
        match certified_key(&self.files, &self.provider) {
            Ok(key) => {
                self.current.store(Arc::new(key));
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, "the TLS files changed but cannot be used: the previous certificate stays")
            }
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.refresh();
        Some(self.current.load_full())
    }
}

fn stamp(files: &TlsFiles) -> Stamp {
    let one = |path: &PathBuf| std::fs::metadata(path).and_then(|m| Ok((m.modified()?, m.len()))).ok();
    Some([one(&files.cert)?, one(&files.key)?])
}

/// The chain and key of `files`, checked to belong together.
fn certified_key(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let cert = files.cert.display();
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the TLS certificate {cert}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {cert} (PEM, `-----BEGIN CERTIFICATE-----`)"));
    }
    let key_file = files.key.display();
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("cannot read the TLS private key {key_file}: {e}"))?;
    let key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("cannot use the TLS private key {key_file}: {e}"))?;
    let certified = CertifiedKey::new(certs, key);
    certified.keys_match().map_err(|e| format!("the key {key_file} does not match the certificate {cert}: {e}"))?;
    Ok(certified)
}
