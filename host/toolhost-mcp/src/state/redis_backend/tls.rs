//! rediss://: the certificate authorities a server's certificate must chain to (the
//! public webpki roots, or the operator's own from `--state-ca-file`), and a failed
//! handshake told apart: a certificate refused, a port that does not speak TLS, or a
//! server out of reach.

use std::sync::Arc;

use super::errors::clip;
use crate::state::StateError;

/// The certificate authorities a rediss:// server's certificate must chain to
/// (`--state-ca-file`): the operator's own, in place of the public webpki roots. A
/// self-hosted Redis almost always has a certificate from a private CA; trusting the
/// public roots as well would let anyone holding a public certificate for the server's
/// name pass as the server, so the file replaces them rather than adds to them.
///
/// ```
/// use toolhost_mcp::state::{RedisBackend, StateCa, StateCaError, StateError, StateUrl};
///
/// // What the host does with `--state rediss://... --state-ca-file FILE`.
/// async fn shared(url: &str, ca_file: &std::path::Path) -> Result<RedisBackend, String> {
///     let url = StateUrl::parse(url).map_err(|e| e.to_string())?;
///     let ca = StateCa::from_pem_file(ca_file).map_err(|e| e.to_string())?;
///     RedisBackend::connect_with_ca(&url, None, &ca, 1 << 20)
///         .await
///         .map_err(|e: StateError| e.to_string())
/// }
///
/// // A file without a certificate is refused before anything is connected.
/// let err = StateCa::from_pem(b"not a certificate\n", "ca.pem").unwrap_err();
/// assert_eq!(err, StateCaError::NoCertificate("ca.pem".into()));
/// # let _ = shared;
/// ```
#[derive(Clone)]
pub struct StateCa {
    pub(super) config: Arc<rustls::ClientConfig>,
    certificates: usize,
}

impl std::fmt::Debug for StateCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateCa")
            .field("certificates", &self.certificates)
            .finish_non_exhaustive()
    }
}

/// Why a `--state-ca-file` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateCaError {
    /// The file could not be read.
    #[error("cannot read --state-ca-file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// What the system said.
        reason: String,
    },
    /// The file holds no PEM certificate (`-----BEGIN CERTIFICATE-----`).
    #[error("--state-ca-file {0} holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA certificate that signed the Redis server's certificate")]
    NoCertificate(String),
    /// A certificate in the file is malformed or not usable as a trust anchor.
    #[error("--state-ca-file {path}: {reason}; give the CA certificate (PEM) that signed the Redis server's certificate")]
    BadCertificate {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The file is larger than [`MAX_CA_FILE_BYTES`].
    #[error("--state-ca-file {0} is larger than {MAX_CA_FILE_BYTES} bytes; give only the CA certificates")]
    TooLarge(String),
}

/// The largest `--state-ca-file` read: 1 MiB (a bundle of a few hundred certificates).
pub const MAX_CA_FILE_BYTES: u64 = 1 << 20;

impl StateCa {
    /// The certificates (one or more, PEM) in the file at `path`.
    ///
    /// # Errors
    /// [`StateCaError`] when the file is unreadable, larger than
    /// [`MAX_CA_FILE_BYTES`], or holds no usable certificate.
    pub fn from_pem_file(path: &std::path::Path) -> Result<Self, StateCaError> {
        use std::io::Read;
        let shown = path.display().to_string();
        let unreadable = |err: std::io::Error| StateCaError::Unreadable {
            path: shown.clone(),
            reason: err.to_string(),
        };
        let file = std::fs::File::open(path).map_err(unreadable)?;
        let mut pem = Vec::new();
        file.take(MAX_CA_FILE_BYTES + 1)
            .read_to_end(&mut pem)
            .map_err(unreadable)?;
        if pem.len() as u64 > MAX_CA_FILE_BYTES {
            return Err(StateCaError::TooLarge(shown));
        }
        Self::from_pem(&pem, &shown)
    }

    /// The certificates (one or more, PEM) in `pem`, read from `source` (named in
    /// errors).
    ///
    /// # Errors
    /// [`StateCaError`] when `pem` holds no usable certificate.
    pub fn from_pem(pem: &[u8], source: &str) -> Result<Self, StateCaError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let bad = |reason: String| StateCaError::BadCertificate {
            path: source.to_owned(),
            reason,
        };
        let mut roots = rustls::RootCertStore::empty();
        let mut certificates = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|err| bad(format!("not valid PEM ({err})")))?;
            roots
                .add(cert)
                .map_err(|err| bad(format!("a certificate is not usable as a CA ({err})")))?;
            certificates += 1;
        }
        if certificates == 0 {
            return Err(StateCaError::NoCertificate(source.to_owned()));
        }
        Ok(StateCa {
            config: tls_config(roots),
            certificates,
        })
    }

    /// How many certificates the file held.
    #[must_use]
    pub fn certificates(&self) -> usize {
        self.certificates
    }
}

/// A TLS client configuration trusting `roots`, no client certificate.
fn tls_config(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// The TLS configuration of rediss:// without `--state-ca-file`: the webpki roots.
pub(super) fn public_roots() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    tls_config(roots)
}

/// What a TLS error from a server that may not speak TLS adds.
pub(super) const NOT_TLS: &str =
    "does the server speak TLS on this port? rediss:// wants its TLS port";

/// A failed TLS handshake as a [`StateError`]: [`StateError::Tls`] when TLS said why
/// (a certificate refused, a server that does not speak TLS), else unreachable.
pub(super) fn handshake_error(err: std::io::Error) -> StateError {
    let tls = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        // A certificate refused, or the server refusing the handshake (an alert, no
        // common version or cipher suite): what TLS said.
        Some(
            rustls::Error::InvalidCertificate(_)
            | rustls::Error::AlertReceived(_)
            | rustls::Error::PeerIncompatible(_)
            | rustls::Error::PeerMisbehaved(_),
        ) => StateError::Tls(clip(&err.to_string())),
        // Bytes that are not TLS: most likely a plain port.
        Some(
            rustls::Error::InvalidMessage(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. },
        ) => StateError::Tls(format!("{}: {NOT_TLS}", clip(&err.to_string()))),
        _ => StateError::Unreachable(clip(&err.to_string())),
    }
}
