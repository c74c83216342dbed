//! `wasi:http/outgoing-handler`: wasmtime-wasi-http implements the interface; this file
//! is its [`WasiHttpHooks::send_request`], which checks and sends each request under the
//! plugin's [`HttpGrant`] (see [`crate::http_policy`] for the rules).
//!
//! Per request: count it against [`HttpLimits::max_requests`]; match its scheme, host
//! and port against the grant's patterns (before any lookup); resolve the name through
//! the policy's resolver; keep the addresses [`HttpPolicy::address_allowed`] accepts;
//! connect to one of those (never to a fresh lookup); TLS for `https` (rustls, Mozilla
//! roots); send the body through a byte cap; refuse a response whose `content-length` is
//! over the cap and stop reading one that grows past it. Connect and handshake are
//! bounded by [`HttpLimits::connect_timeout`], everything by the call's deadline.
//!
//! A refusal is the `wasi:http` error code a client expects (`HTTP-request-denied`,
//! `destination-IP-prohibited`, `connection-limit-reached`, `HTTP-request-body-size`,
//! `HTTP-response-body-size`, `connection-timeout`, `DNS-error`), and one `warn` line in
//! the host log (target `plugin`, within the plugin's log rate) saying which rule
//! refused which `scheme://host:port`. Paths and queries are never logged: they may
//! carry secrets.

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
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::super::http_policy::{forbidden_address, unmap, HostPattern, HttpLimits, HttpPolicy};
use super::super::plugin_config::Redactor;
use super::log::clean;
use super::quota::PluginMeter;

/// What a plugin may reach over HTTP: its manifest's patterns (each covered by the
/// operator's), the operator's policy (allowed private networks, resolver), its limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpGrant {
    /// The manifest's `[grants] http` patterns; empty denies every request.
    pub allow: Vec<HostPattern>,
    /// The operator's policy.
    pub policy: HttpPolicy,
    /// The per-call limits.
    pub limits: HttpLimits,
}

/// The `wasi:http` hooks of one store: the grant, and what the current call has sent.
pub(crate) struct HttpHooks {
    plugin: Arc<str>,
    tool: String,
    grant: Arc<HttpGrant>,
    meter: Arc<PluginMeter>,
    redactor: Arc<Redactor>,
    requests: u32,
    deadline: Option<Instant>,
}

/// Where a checked request goes.
struct Target {
    https: bool,
    host: String,
    port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", clean(&self.host, 300), self.port)
    }
}

/// Type of the response future [`WasiHttpHooks::send_request`] returns.
type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl HttpHooks {
    /// Hooks for `plugin` under `grant`, logging within `meter`'s rate with the
    /// plugin's secrets replaced by `redactor` (a plugin could put one in a host name).
    pub(crate) fn new(
        plugin: Arc<str>,
        grant: Arc<HttpGrant>,
        meter: Arc<PluginMeter>,
        redactor: Arc<Redactor>,
    ) -> Self {
        Self {
            plugin,
            tool: String::new(),
            grant,
            meter,
            redactor,
            requests: 0,
            deadline: None,
        }
    }

    /// Resets the per-call count for a call of `tool` ending at `deadline`.
    pub(crate) fn begin_call(&mut self, tool: &str, deadline: Instant) {
        tool.clone_into(&mut self.tool);
        self.requests = 0;
        self.deadline = Some(deadline);
    }

    /// What a refusal of the current call is logged with.
    fn log(&self) -> LogCtx {
        (
            Arc::clone(&self.plugin),
            self.tool.clone(),
            Arc::clone(&self.meter),
            Arc::clone(&self.redactor),
        )
    }

    /// Logs a refusal (within the plugin's log rate) and returns its error.
    fn refuse(&self, target: &str, why: &str, error: Error) -> Error {
        refused(&self.log(), target, why);
        error
    }

    /// The checks made before anything is resolved or sent: the count, the URI's
    /// form, the allow-list, the declared body size.
    fn check(&mut self, request: &http::Request<WasiBody>) -> Result<Target, Error> {
        self.requests = self.requests.saturating_add(1);
        let uri = request.uri();
        let shown = || {
            format!(
                "{}://{}",
                uri.scheme_str().unwrap_or("?"),
                clean(uri.authority().map_or("", |a| a.as_str()), 300)
            )
        };
        let max = self.grant.limits.max_requests;
        if self.requests > max {
            // Logged once per call, not once per refused request.
            if self.requests == max.saturating_add(1) {
                let why = format!("the plugin's limit of {max} HTTP requests per call (max_http_requests) is reached; later requests of this call are refused too");
                refused(&self.log(), &shown(), &why);
            }
            return Err(Error::ConnectionLimitReached);
        }
        let Some(authority) = uri.authority() else {
            return Err(self.refuse(
                &shown(),
                "the URL has no host",
                Error::HttpRequestUriInvalid,
            ));
        };
        if authority.as_str().contains('@') {
            return Err(self.refuse(
                &shown(),
                "the URL carries a user name or password (give credentials in a header)",
                Error::HttpRequestUriInvalid,
            ));
        }
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(self.refuse(
                    &shown(),
                    "only http and https are supported",
                    Error::HttpProtocolError,
                ))
            }
        };
        let host = authority.host().to_owned();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let target = Target { https, host, port };
        let scheme = if https { "https" } else { "http" };
        if !self
            .grant
            .allow
            .iter()
            .any(|pattern| pattern.matches(scheme, &target.host, port))
        {
            let why = if self.grant.allow.is_empty() {
                "the plugin has no HTTP grant ([grants] http in its manifest)".to_owned()
            } else {
                let allowed: Vec<String> =
                    self.grant.allow.iter().map(ToString::to_string).collect();
                format!("not in the plugin's HTTP grant [{}]", allowed.join(", "))
            };
            return Err(self.refuse(&target.to_string(), &why, Error::HttpRequestDenied));
        }
        let limit = self.grant.limits.max_request_bytes;
        if let Some(length) = content_length(request.headers()) {
            if length > limit {
                let why = format!("its body is {length} bytes, over the plugin's limit of {limit} (max_http_request_bytes)");
                return Err(self.refuse(
                    &target.to_string(),
                    &why,
                    Error::HttpRequestBodySize(Some(limit)),
                ));
            }
        }
        Ok(target)
    }
}

/// Logs one refused request (within the plugin's log rate).
/// What a refusal is logged with: plugin, tool, the plugin's log rate, its secrets.
type LogCtx = (Arc<str>, String, Arc<PluginMeter>, Arc<Redactor>);

/// Logs that a request to `target` was refused because of `why`, within the plugin's
/// log rate, with its secrets redacted (the host name comes from the plugin).
fn refused((plugin, tool, meter, redactor): &LogCtx, target: &str, why: &str) {
    if meter.admit_log(tool) {
        let target = redactor.redact(target);
        let why = redactor.redact(why);
        tracing::warn!(target: "plugin", plugin = &**plugin, tool = tool.as_str(), "HTTP request to {target} refused: {why}");
    }
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        let checked = self.check(&request);
        let grant = Arc::clone(&self.grant);
        let deadline = self.deadline;
        let log = self.log();
        Box::new(async move {
            let target = checked?;
            send(&grant, &target, request, options, deadline, log).await
        })
    }
}

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
async fn send(
    grant: &HttpGrant,
    target: &Target,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    deadline: Option<Instant>,
    log: LogCtx,
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
        let connector = tokio_rustls::TlsConnector::from(tls_config());
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
    let response = response.map(|body| {
        Capped {
            inner: body.map_err(Error::from),
            seen: 0,
            limit,
            over: Arc::new(AtomicBool::new(false)),
            response: true,
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
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap_or_else(|_| unreachable!("ring supports the default TLS versions"))
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }))
}

/// A body that fails once more than `limit` bytes of data have passed.
struct Capped<B> {
    inner: B,
    seen: u64,
    limit: u64,
    /// Set when the cap was hit (the request side reads it after hyper's error).
    over: Arc<AtomicBool>,
    /// A response body (else a request body): which error to give.
    response: bool,
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Empty, Full};

    fn hooks(allow: &[&str], limits: HttpLimits) -> HttpHooks {
        let grant = HttpGrant {
            allow: allow.iter().map(|p| p.parse().unwrap()).collect(),
            policy: HttpPolicy::default(),
            limits,
        };
        let meter = Arc::new(PluginMeter::new(
            Arc::from("p"),
            super::super::quota::ImportLimits::default(),
        ));
        let mut hooks = HttpHooks::new(Arc::from("p"), Arc::new(grant), meter, Arc::default());
        hooks.begin_call("t", Instant::now() + Duration::from_secs(5));
        hooks
    }

    fn request(uri: &str, length: Option<u64>) -> http::Request<WasiBody> {
        let mut builder = http::Request::builder().uri(uri);
        if let Some(length) = length {
            builder = builder.header(http::header::CONTENT_LENGTH, length);
        }
        builder
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap()
    }

    fn checked(hooks: &mut HttpHooks, uri: &str, length: Option<u64>) -> Result<String, String> {
        hooks
            .check(&request(uri, length))
            .map(|target| target.to_string())
            .map_err(|err| format!("{err:?}"))
    }

    #[test]
    fn requests_are_checked_against_the_grant_before_anything_is_sent() {
        let mut hooks = hooks(
            &["api.test", "http://*.local.test:8080"],
            HttpLimits::default(),
        );
        assert_eq!(
            checked(&mut hooks, "https://api.test/x?y", None),
            Ok("https://api.test:443".into())
        );
        assert_eq!(
            checked(&mut hooks, "http://a.local.test:8080/", None),
            Ok("http://a.local.test:8080".into())
        );
        for denied in [
            "http://api.test/",
            "https://api.test:8443/",
            "https://evil.test/",
            "https://api.test.evil.test/",
            "http://local.test:8080/",
        ] {
            assert_eq!(
                checked(&mut hooks, denied, None),
                Err("HttpRequestDenied".into()),
                "{denied}"
            );
        }
        assert_eq!(
            checked(&mut hooks, "https://user:pw@api.test/", None),
            Err("HttpRequestUriInvalid".into())
        );
        assert_eq!(
            checked(&mut hooks, "/relative", None),
            Err("HttpRequestUriInvalid".into())
        );
    }

    #[test]
    fn the_request_count_and_declared_body_size_are_limited() {
        let limits = HttpLimits {
            max_requests: 2,
            max_request_bytes: 100,
            ..HttpLimits::default()
        };
        let mut hooks = hooks(&["api.test"], limits);
        assert!(checked(&mut hooks, "https://api.test/", Some(100)).is_ok());
        assert_eq!(
            checked(&mut hooks, "https://api.test/", Some(101)),
            Err("HttpRequestBodySize(Some(100))".into())
        );
        assert_eq!(
            checked(&mut hooks, "https://api.test/", None),
            Err("ConnectionLimitReached".into())
        );
        // Denied requests count too, so a loop of them stops early.
        hooks.begin_call("t", Instant::now() + Duration::from_secs(5));
        assert!(checked(&mut hooks, "https://evil.test/", None).is_err());
        assert!(checked(&mut hooks, "https://api.test/", None).is_ok());
        assert_eq!(
            checked(&mut hooks, "https://api.test/", None),
            Err("ConnectionLimitReached".into())
        );
    }

    #[tokio::test]
    async fn forbidden_addresses_are_refused_before_connecting() {
        let mut hooks = hooks(
            &["http://169.254.169.254", "http://[::1]:9"],
            HttpLimits::default(),
        );
        for uri in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:9/",
        ] {
            let future = hooks.send_request(request(uri, None), None, Box::new(async { Ok(()) }));
            let result = Pin::from(future).await;
            assert!(
                matches!(result, Err(Error::DestinationIpProhibited)),
                "{uri}: {:?}",
                result.err()
            );
        }
    }

    #[tokio::test]
    async fn a_capped_body_fails_past_its_limit_and_says_so() {
        let over = Arc::new(AtomicBool::new(false));
        let body = Capped {
            inner: Full::new(Bytes::from(vec![0u8; 11])).map_err(|never| match never {}),
            seen: 0,
            limit: 10,
            over: Arc::clone(&over),
            response: true,
        };
        let err = body.collect().await.expect_err("over the cap");
        assert!(
            matches!(err, Error::HttpResponseBodySize(Some(10))),
            "{err:?}"
        );
        assert!(over.load(Ordering::Relaxed));
        let body = Capped {
            inner: Full::new(Bytes::from(vec![0u8; 10])).map_err(|never| match never {}),
            seen: 0,
            limit: 10,
            over: Arc::new(AtomicBool::new(false)),
            response: false,
        };
        assert_eq!(body.collect().await.ok().unwrap().to_bytes().len(), 10);
    }
}
