//! rediss:// against TLS servers on 127.0.0.1 with the certificates of `state/testdata/`
//! (made by tests/deploy/make_certs.py: a private CA, a server certificate it signs for
//! 127.0.0.1 and localhost, one for another name, another CA's server certificate).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::tests::serve;
use super::*;

const CA: &[u8] = include_bytes!("../testdata/ca.pem");
const OTHER_CA: &[u8] = include_bytes!("../testdata/other-ca.pem");
const SERVER: (&[u8], &[u8]) = (
    include_bytes!("../testdata/server.pem"),
    include_bytes!("../testdata/server.key"),
);
const WRONG_NAME: (&[u8], &[u8]) = (
    include_bytes!("../testdata/wrong-name.pem"),
    include_bytes!("../testdata/wrong-name.key"),
);
const OTHER_SERVER: (&[u8], &[u8]) = (
    include_bytes!("../testdata/other-server.pem"),
    include_bytes!("../testdata/other-server.key"),
);

/// The number of commands whole in `buf` (RESP arrays of bulk strings), and the
/// bytes they take.
fn commands(buf: &[u8]) -> (usize, usize) {
    fn line(buf: &[u8], at: usize) -> Option<(i64, usize)> {
        let end = buf[at..].windows(2).position(|w| w == b"\r\n")? + at;
        let n = std::str::from_utf8(&buf[at + 1..end]).ok()?.parse().ok()?;
        Some((n, end + 2))
    }
    let (mut count, mut used) = (0, 0);
    'next: while used < buf.len() {
        let Some((items, mut at)) = line(buf, used) else {
            break;
        };
        for _ in 0..items {
            let Some((len, body)) = line(buf, at) else {
                break 'next;
            };
            at = body + usize::try_from(len).unwrap() + 2;
            if at > buf.len() {
                break 'next;
            }
        }
        count += 1;
        used = at;
    }
    (count, used)
}

/// A TLS server on 127.0.0.1 with `cert`, answering every command `+PONG` (set-up
/// commands take any simple answer); bounded: it stops with the test.
async fn tls_server((cert, key): (&[u8], &[u8])) -> SocketAddr {
    let chain = vec![CertificateDer::from_pem_slice(cert).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    serve(move |socket| {
        let acceptor = acceptor.clone();
        async move {
            let Ok(mut tls) = acceptor.accept(socket).await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match tls.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                let (count, used) = commands(&buf);
                buf.drain(..used);
                if tls.write_all(&b"+PONG\r\n".repeat(count)).await.is_err() {
                    return;
                }
            }
        }
    })
    .await
}

async fn connect(
    addr: SocketAddr,
    host: &str,
    ca: Option<&StateCa>,
) -> (Result<RedisBackend, StateError>, Duration) {
    let url = StateUrl::parse(&format!("rediss://{host}:{}/0", addr.port())).unwrap();
    let start = std::time::Instant::now();
    let backend =
        RedisBackend::connect_with_timeout(&url, None, ca, 64, Duration::from_secs(2)).await;
    (backend, start.elapsed())
}

fn ca() -> StateCa {
    StateCa::from_pem(CA, "ca.pem").unwrap()
}

fn refused_for(err: &StateError, why: &str) {
    assert!(
        matches!(err, StateError::Tls(text) if text.contains(why)),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("the TLS connection to the task state server failed (")
            && message.contains("--state-ca-file FILE"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_certificate_signed_by_the_given_ca_is_accepted() {
    let addr = tls_server(SERVER).await;
    for host in ["127.0.0.1", "localhost"] {
        let (backend, _) = connect(addr, host, Some(&ca())).await;
        let backend = backend.unwrap();
        backend.ping().await.unwrap();
    }
}

#[tokio::test]
async fn a_server_certificate_signed_by_another_ca_is_refused() {
    let addr = tls_server(OTHER_SERVER).await;
    let (backend, took) = connect(addr, "127.0.0.1", Some(&ca())).await;
    refused_for(
        &backend.unwrap_err(),
        "invalid peer certificate: UnknownIssuer",
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_private_ca_certificate_is_refused_without_the_ca_file() {
    // The public webpki roots do not hold the private CA.
    let addr = tls_server(SERVER).await;
    let (backend, _) = connect(addr, "127.0.0.1", None).await;
    refused_for(
        &backend.unwrap_err(),
        "invalid peer certificate: UnknownIssuer",
    );
}

#[tokio::test]
async fn the_ca_file_replaces_the_public_roots_and_may_hold_several_cas() {
    // The other CA alone: the server's certificate does not chain to it.
    let addr = tls_server(SERVER).await;
    let other = StateCa::from_pem(OTHER_CA, "other-ca.pem").unwrap();
    let (backend, _) = connect(addr, "127.0.0.1", Some(&other)).await;
    refused_for(&backend.unwrap_err(), "UnknownIssuer");
    // Both in one file: accepted.
    let both = StateCa::from_pem(&[OTHER_CA, CA].concat(), "both.pem").unwrap();
    assert_eq!(both.certificates(), 2);
    let (backend, _) = connect(addr, "127.0.0.1", Some(&both)).await;
    backend.unwrap();
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let addr = tls_server(WRONG_NAME).await;
    let (backend, _) = connect(addr, "127.0.0.1", Some(&ca())).await;
    refused_for(&backend.unwrap_err(), "certificate not valid for name");
}

#[tokio::test]
async fn a_plain_server_behind_rediss_is_refused_clearly_and_quickly() {
    // A plain Redis answers the TLS hello as a (wrong) command.
    let addr = serve(|mut socket| async move {
        let mut buf = [0u8; 4096];
        if matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
            let _ = socket
                .write_all(b"-ERR Protocol error: unbalanced quotes in request\r\n")
                .await;
        }
    })
    .await;
    let (backend, took) = connect(addr, "127.0.0.1", Some(&ca())).await;
    refused_for(
        &backend.unwrap_err(),
        "does the server speak TLS on this port?",
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_silent_server_behind_rediss_is_refused_as_not_tls_within_the_bound() {
    // A plain Redis waits for a newline the TLS hello may not hold: no answer.
    let addr = serve(|socket| async move {
        let _held = socket;
        std::future::pending::<()>().await;
    })
    .await;
    let (backend, took) = connect(addr, "127.0.0.1", Some(&ca())).await;
    refused_for(
        &backend.unwrap_err(),
        "no TLS handshake answer within 1500 ms: does the server speak TLS on this port?",
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[test]
fn a_ca_file_without_a_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, b"not a certificate\n").unwrap();
    let err = StateCa::from_pem_file(&empty).unwrap_err();
    assert_eq!(
        err,
        StateCaError::NoCertificate(empty.display().to_string())
    );
    assert!(
        err.to_string().contains("holds no PEM certificate"),
        "{err}"
    );
    // A key is not a certificate.
    let key = dir.path().join("key.pem");
    std::fs::write(&key, SERVER.1).unwrap();
    assert!(matches!(
        StateCa::from_pem_file(&key),
        Err(StateCaError::NoCertificate(_))
    ));
    let missing = dir.path().join("missing.pem");
    let err = StateCa::from_pem_file(&missing).unwrap_err();
    assert!(
        matches!(&err, StateCaError::Unreadable { path, .. } if *path == missing.display().to_string()),
        "{err:?}"
    );
    // A certificate block holding garbage.
    let broken = dir.path().join("broken.pem");
    std::fs::write(
        &broken,
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let err = StateCa::from_pem_file(&broken).unwrap_err();
    assert!(
        matches!(&err, StateCaError::BadCertificate { reason, .. } if reason.contains("not usable as a CA")),
        "{err:?}"
    );
}
