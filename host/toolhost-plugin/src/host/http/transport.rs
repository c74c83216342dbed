//! Sending one checked request: resolve the name through the policy's resolver, keep
//! the addresses it allows, connect to one of those (never a fresh lookup), TLS for
//! `https` (rustls, Mozilla roots), and send and receive the bodies through byte caps
//! ([`Capped`]), all within the connect timeout and the call's deadline.

use std::future::{poll_fn, Future};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use super::{content_length, refused, HttpGrant, LogCtx, Recording, Target};
use crate::http_policy::{forbidden_address, unmap};

/// The smallest of the timeouts that apply; `None` for none.
fn earliest(timeouts: &[Option<Duration>]) -> Duration {
    timeouts
        .iter()
        .flatten()
        .min()
        .copied()
        .unwrap_or(Duration::from_secs(24 * 60 * 60))
}

/// A stream hyper can speak HTTP/1.1 over: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// Resolves, checks, connects, handshakes and sends `request` to `target`.
pub(super) async fn send(
    grant: &HttpGrant,
    target: &Target,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    deadline: Option<Instant>,
    log: LogCtx,
    recording: Option<&Recording>,
) -> Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
> {
    let refuse = |why: &str, error: Error| {
        refused(&log, &target.to_string(), why);
        error
    };
    let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let connect_timeout = earliest(&[
        Some(grant.limits.connect_timeout),
        remaining,
        options.and_then(|o| o.connect_timeout),
    ]);
    let connect_by = tokio::time::Instant::now() + connect_timeout;

    // Resolve (unless it is an IP literal), then keep only the addresses the policy
    // accepts. The connection goes to one of these: there is no second lookup.
    let literal = target
        .host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&target.host)
        .parse::<IpAddr>();
    let addresses = match literal {
        Ok(ip) => vec![ip],
        Err(_) => {
            match tokio::time::timeout_at(connect_by, grant.policy.resolver.lookup(&target.host))
                .await
            {
                Err(_) => return Err(refuse("the name lookup timed out", Error::DnsTimeout)),
                Ok(Err(err)) => {
                    return Err(refuse(
                        &format!("the name does not resolve ({err})"),
                        Error::DnsError {
                            rcode: Some("address not available".into()),
                            info_code: None,
                        },
                    ))
                }
                Ok(Ok(addresses)) => addresses,
            }
        }
    };
    let allowed: Vec<IpAddr> = addresses
        .iter()
        .copied()
        .filter(|ip| grant.policy.address_allowed(*ip))
        .collect();
    if allowed.is_empty() {
        let why = match addresses.first() {
            None => "the name has no address".to_owned(),
            Some(ip) => format!(
                "it resolves to {}, a {} address; plugins may not reach such addresses unless the operator allows that network (--plugin-http-allow-net {}, HttpPolicy::allow_nets)",
                unmap(*ip),
                forbidden_address(*ip).unwrap_or("forbidden"),
                unmap(*ip),
            ),
        };
        return Err(refuse(&why, Error::DestinationIpProhibited));
    }

    let stream = match tokio::time::timeout_at(connect_by, connect_any(&allowed, target.port)).await
    {
        Err(_) => return Err(refuse("connecting timed out", Error::ConnectionTimeout)),
        Ok(Err(err)) => return Err(Error::Connect(err)),
        Ok(Ok(stream)) => stream,
    };
    let stream: Box<dyn Io> = if target.https {
        let name = rustls::pki_types::ServerName::try_from(
            target
                .host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
        )
        .map_err(|_| Error::HttpRequestUriInvalid)?;
        let config = tls_config().map_err(|err| Error::Tls(io::Error::other(err)))?;
        let connector = tokio_rustls::TlsConnector::from(config);
        match tokio::time::timeout_at(connect_by, connector.connect(name, stream)).await {
            Err(_) => {
                return Err(refuse(
                    "the TLS handshake timed out",
                    Error::ConnectionTimeout,
                ))
            }
            Ok(Err(err)) => {
                let invalid = err
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                    .filter(|tls| matches!(tls, rustls::Error::InvalidCertificate(_)))
                    .map(ToString::to_string);
                return Err(match invalid {
                    Some(why) => refuse(
                        &format!("its TLS certificate is not valid for the host ({why})"),
                        Error::TlsCertificateError,
                    ),
                    None => Error::Tls(err),
                });
            }
            Ok(Ok(tls)) => Box::new(tls),
        }
    } else {
        Box::new(stream)
    };
    let (mut sender, connection) = match tokio::time::timeout_at(
        connect_by,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    {
        Err(_) => return Err(Error::ConnectionTimeout),
        Ok(Err(err)) => return Err(Error::from(err)),
        Ok(Ok(pair)) => pair,
    };

    // The request line carries only the path: the host is in the Host header.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let over = Arc::new(AtomicBool::new(false));
    let limit = grant.limits.max_request_bytes;
    let request = request.map(|body| {
        Capped {
            inner: body,
            seen: 0,
            limit,
            over: Arc::clone(&over),
            response: false,
            counted: None,
        }
        .boxed_unsync()
    });

    let first_byte = earliest(&[
        deadline.map(|d| d.saturating_duration_since(Instant::now())),
        options.and_then(|o| o.first_byte_timeout),
    ]);
    let mut connection = Some(connection);
    let response = {
        let mut sending = pin!(sender.send_request(request));
        let waiting = poll_fn(|cx: &mut Context<'_>| match sending.as_mut().poll(cx) {
            Poll::Ready(result) => Poll::Ready(result.map_err(Error::from)),
            Poll::Pending => {
                // Drive the connection's I/O while the response is not there yet.
                let Some(running) = connection.as_mut() else {
                    return Poll::Pending;
                };
                match Pin::new(running).poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(done) => {
                        connection = None;
                        match done {
                            Ok(()) => sending.as_mut().poll(cx).map_err(Error::from),
                            Err(err) => Poll::Ready(Err(Error::from(err))),
                        }
                    }
                }
            }
        });
        match tokio::time::timeout(first_byte.max(Duration::from_millis(1)), waiting).await {
            Err(_) => Err(Error::ConnectionReadTimeout),
            Ok(result) => result,
        }
    };
    let response = match response {
        Err(_) if over.load(Ordering::Relaxed) => {
            let why = format!(
                "its body grew past the plugin's limit of {limit} bytes (max_http_request_bytes)"
            );
            return Err(refuse(&why, Error::HttpRequestBodySize(Some(limit))));
        }
        other => other?,
    };

    let limit = grant.limits.max_response_bytes;
    if let Some(length) = content_length(response.headers()) {
        if length > limit {
            let why = format!("the response body is {length} bytes, over the plugin's limit of {limit} (max_http_response_bytes)");
            return Err(refuse(&why, Error::HttpResponseBodySize(Some(limit))));
        }
    }
    // Recorded with its status; the body's bytes are counted when the plugin is done
    // reading it.
    let counted = recording.and_then(|recording| {
        let index = recording.done(target, Some(response.status().as_u16()))?;
        Some((Arc::clone(recording.record()), index))
    });
    let response = response.map(|body| {
        Capped {
            inner: body.map_err(Error::from),
            seen: 0,
            limit,
            over: Arc::new(AtomicBool::new(false)),
            response: true,
            counted,
        }
        .boxed_unsync()
    });
    let io = async move {
        match connection {
            Some(connection) => connection.await.map_err(Error::from),
            None => Ok(()),
        }
    };
    Ok((response, Box::new(io)))
}

/// Connects to the first of `addresses` that answers, in order.
async fn connect_any(addresses: &[IpAddr], port: u16) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::AddrNotAvailable, "no address to connect to");
    for ip in addresses {
        match TcpStream::connect(SocketAddr::new(*ip, port)).await {
            Ok(stream) => return Ok(stream),
            Err(err) => last = err,
        }
    }
    Err(last)
}

/// The TLS client configuration, built once: rustls with the ring provider, the
/// Mozilla root certificates (`webpki-roots`), HTTP/1.1.
///
/// # Errors
/// rustls's refusal of the provider's default protocol versions (ring supports them, so
/// this is not expected); the request then fails as a TLS error.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
}

/// A body that fails once more than `limit` bytes of data have passed.
pub(super) struct Capped<B> {
    pub(super) inner: B,
    pub(super) seen: u64,
    pub(super) limit: u64,
    /// Set when the cap was hit (the request side reads it after hyper's error).
    pub(super) over: Arc<AtomicBool>,
    /// A response body (else a request body): which error to give.
    pub(super) response: bool,
    /// The call's record and the request's step there, whose byte count this body's
    /// bytes are, told as they arrive and when it is dropped.
    pub(super) counted: Option<(Arc<toolhost::registry::CallRecord>, usize)>,
}

impl<B> Drop for Capped<B> {
    fn drop(&mut self) {
        if let Some((record, index)) = &self.counted {
            record.http_body_read(*index, self.seen);
        }
    }
}

impl<B> Body for Capped<B>
where
    B: Body<Data = Bytes, Error = Error> + Unpin,
{
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame {
            if let Some(data) = frame.data_ref() {
                self.seen = self.seen.saturating_add(data.len() as u64);
                // Counted as it arrives: the body may outlive the call.
                if let Some((record, index)) = &self.counted {
                    record.http_body_read(*index, self.seen);
                }
                if self.seen > self.limit {
                    self.over.store(true, Ordering::Relaxed);
                    let limit = Some(self.limit);
                    return Poll::Ready(Some(Err(if self.response {
                        Error::HttpResponseBodySize(limit)
                    } else {
                        Error::HttpRequestBodySize(limit)
                    })));
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
