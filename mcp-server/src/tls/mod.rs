//! TLS (feature `tls`): the server's certificate and key, reloadable while it runs, for
//! [`HttpService::serve_tls`](crate::HttpService::serve_tls), and the client side the
//! authorization module fetches `https://` URLs with.
//!
//! rustls does the TLS (1.3 and 1.2, with ring's primitives); this module loads PEM files,
//! swaps the identity atomically on [`TlsConfig::reload`], and offers HTTP/2 and HTTP/1.1 by
//! ALPN.

mod io;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub(crate) use io::HyperStream;

/// How long a client may take to complete its TLS handshake: 10 s by default
/// ([`TlsConfig::handshake_timeout`]). Past it the connection is closed; until then it holds a
/// connection place like any other, so a client opening handshakes it never finishes is
/// bounded by the connection limits and this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most streams (requests) one HTTP/2 connection may have open at once: 100 (the
/// RFC 9113 §6.5.2 recommended floor, what most servers use). A client opening more is
/// refused the extra streams (`REFUSED_STREAM`); the engine's own bounds still apply to every
/// request.
pub const H2_MAX_STREAMS: u32 = 100;

/// Why a certificate or key could not be used. The identity in use, if any, stays.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    Read(PathBuf, std::io::Error),
    /// The PEM holds no certificate.
    NoCertificate,
    /// The PEM holds no private key, or one that does not parse.
    NoKey(String),
    /// The key is not one rustls signs with, or does not match the certificate.
    Key(rustls::Error),
    /// The roots given to verify client certificates with
    /// ([`TlsConfig::client_certificates`]) hold no certificate, or one rustls cannot use as a
    /// trust anchor.
    ClientRoots(String),
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            Self::NoCertificate => f.write_str("the PEM holds no certificate"),
            Self::NoKey(why) => write!(f, "the PEM holds no usable private key: {why}"),
            Self::Key(e) => write!(f, "the private key cannot be used with the certificate: {e}"),
            Self::ClientRoots(why) => write!(f, "cannot verify client certificates with these roots: {why}"),
        }
    }
}

impl std::error::Error for TlsError {}

/// The server side of TLS: a certificate chain and its key, where they were read from (for
/// [`reload`](Self::reload)), and how connections are served. Cheap to clone; clones share
/// the identity, so reloading one reloads them all.
#[derive(Clone)]
pub struct TlsConfig {
    identity: Arc<Identity>,
    files: Option<(PathBuf, PathBuf)>,
    handshake_timeout: Duration,
    http2: bool,
    /// [`TlsConfig::client_certificates`]: how clients' certificates are verified, if asked for.
    clients: Option<(Arc<dyn rustls::server::danger::ClientCertVerifier>, ClientCertificates)>,
}

/// Whether a client must present a certificate ([`TlsConfig::client_certificates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientCertificates {
    /// A client without a certificate the roots vouch for fails its handshake.
    Required,
    /// A client may present none (and the identify hook decides what that means); one it
    /// presents must still be vouched for by the roots, or the handshake fails.
    Optional,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("files", &self.files)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("http2", &self.http2)
            .field("client_certificates", &self.clients.as_ref().map(|(_, mode)| mode))
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// The certificate chain (leaf first) in the PEM file `cert` and the private key (PKCS#8,
    /// PKCS#1 or SEC1) in the PEM file `key`, which [`reload`](Self::reload) reads again.
    pub fn from_pem_files(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Result<Self, TlsError> {
        let (cert, key) = (cert.as_ref().to_owned(), key.as_ref().to_owned());
        let certified = load_files(&cert, &key)?;
        Ok(Self { files: Some((cert, key)), ..Self::with(certified) })
    }

    /// The certificate chain and key given as PEM text (no files: [`reload`](Self::reload)
    /// has nothing to read, use [`replace_pem`](Self::replace_pem)).
    pub fn from_pem(cert: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        Ok(Self::with(certified(cert, key)?))
    }

    fn with(certified: CertifiedKey) -> Self {
        Self {
            identity: Arc::new(Identity(RwLock::new(Arc::new(certified)))),
            files: None,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            http2: true,
            clients: None,
        }
    }

    /// Asks every client for a certificate and verifies it against the CA certificates in
    /// `roots` (PEM): the chain a client proved it holds the key of is then in the request head
    /// the server's identify hook reads
    /// ([`HttpRequestHead::peer_certificates`](mcp_proto::HttpRequestHead::peer_certificates)),
    /// for it to map to a caller. `mode` says whether a client may present none. Default: no
    /// client certificate is asked for. Roots holding no certificate, or one that cannot be a
    /// trust anchor, are refused here with [`TlsError::ClientRoots`].
    pub fn client_certificates(mut self, roots: &[u8], mode: ClientCertificates) -> Result<Self, TlsError> {
        let mut store = rustls::RootCertStore::empty();
        for root in CertificateDer::pem_slice_iter(roots) {
            let root = root.map_err(|e| TlsError::ClientRoots(e.to_string()))?;
            store.add(root).map_err(|e| TlsError::ClientRoots(e.to_string()))?;
        }
        let builder =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider());
        let builder = match mode {
            ClientCertificates::Required => builder,
            ClientCertificates::Optional => builder.allow_unauthenticated(),
        };
        let verifier = builder.build().map_err(|e| TlsError::ClientRoots(e.to_string()))?;
        self.clients = Some((verifier, mode));
        Ok(self)
    }

    /// Reads the PEM files again and uses what they hold for every handshake from now on (a
    /// renewed certificate, without a restart; connections already open keep theirs). On any
    /// error the identity in use stays and the error says why; without files this does
    /// nothing.
    pub fn reload(&self) -> Result<(), TlsError> {
        let Some((cert, key)) = &self.files else { return Ok(()) };
        self.identity.set(load_files(cert, key)?);
        Ok(())
    }

    /// Uses the certificate chain and key in `cert` and `key` (PEM) from now on, as
    /// [`reload`](Self::reload) does with the files.
    pub fn replace_pem(&self, cert: &[u8], key: &[u8]) -> Result<(), TlsError> {
        self.identity.set(certified(cert, key)?);
        Ok(())
    }

    /// How long a handshake may take. Default [`HANDSHAKE_TIMEOUT`] (10 s).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Whether HTTP/2 is offered by ALPN (default on); HTTP/1.1 always is.
    pub fn http2(mut self, on: bool) -> Self {
        self.http2 = on;
        self
    }

    pub(crate) fn handshake_time(&self) -> Duration {
        self.handshake_timeout
    }

    /// The acceptor for these settings.
    pub(crate) fn acceptor(&self) -> Result<futures_rustls::TlsAcceptor, rustls::Error> {
        let versions =
            rustls::ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
        let clients = match &self.clients {
            Some((verifier, _)) => versions.with_client_cert_verifier(verifier.clone()),
            None => versions.with_no_client_auth(),
        };
        let mut config = clients.with_cert_resolver(self.identity.clone());
        config.alpn_protocols =
            if self.http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
        Ok(futures_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// The identity handshakes use, swapped whole by a reload.
#[derive(Debug)]
struct Identity(RwLock<Arc<CertifiedKey>>);

impl Identity {
    fn set(&self, certified: CertifiedKey) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(certified);
    }
}

impl ResolvesServerCert for Identity {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(PoisonError::into_inner).clone())
    }
}

fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

fn load_files(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path| std::fs::read(path).map_err(|e| TlsError::Read(path.to_owned(), e));
    certified(&read(cert)?, &read(key)?)
}

fn certified(cert: &[u8], key: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert).filter_map(Result::ok).collect();
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::NoKey(e.to_string()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(TlsError::Key)
}

/// The client side, for fetching `https://` URLs: the Mozilla root certificates
/// (`webpki-roots`) and any roots added in PEM.
#[cfg(feature = "auth")]
pub(crate) fn client_config(
    extra_roots: &[CertificateDer<'static>],
) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for root in extra_roots {
        roots.add(root.clone())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The certificates in PEM text `pem`, to trust as roots; `None` when it holds none.
pub fn roots_from_pem(pem: &[u8]) -> Option<Vec<CertificateDer<'static>>> {
    let roots: Vec<_> = CertificateDer::pem_slice_iter(pem).filter_map(Result::ok).collect();
    (!roots.is_empty()).then_some(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_roots_without_a_certificate_are_refused() {
        // Any identity will do: the roots are judged before it is used.
        let tls = TlsConfig::with(CertifiedKey::new(Vec::new(), any_key()));
        let refused = tls.clone().client_certificates(b"no PEM here", ClientCertificates::Required);
        assert!(matches!(refused, Err(TlsError::ClientRoots(_))), "{refused:?}");
        let bad = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let refused = tls.client_certificates(bad, ClientCertificates::Optional);
        assert!(matches!(refused, Err(TlsError::ClientRoots(_))), "{refused:?}");
    }

    /// A signing key that signs nothing: the identity a config needs to exist.
    fn any_key() -> Arc<dyn rustls::sign::SigningKey> {
        #[derive(Debug)]
        struct Never;
        impl rustls::sign::SigningKey for Never {
            fn choose_scheme(&self, _: &[rustls::SignatureScheme]) -> Option<Box<dyn rustls::sign::Signer>> {
                None
            }
            fn algorithm(&self) -> rustls::SignatureAlgorithm {
                rustls::SignatureAlgorithm::ECDSA
            }
        }
        Arc::new(Never)
    }

    #[test]
    fn bad_pem_is_refused_with_why_and_the_identity_in_use_stays() {
        assert!(matches!(TlsConfig::from_pem(b"", b""), Err(TlsError::NoCertificate)));
        let missing = TlsConfig::from_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem");
        assert!(matches!(missing, Err(TlsError::Read(..))));
        assert!(roots_from_pem(b"nothing here").is_none());
    }
}
