//! MCP over Streamable HTTP (feature `http`): one endpoint, [`MCP_PATH`], that takes
//! each JSON-RPC message as a `POST` and answers it, the same `Session` core as stdio.
//!
//! # The exchange
//! - `POST /mcp` with one JSON-RPC message (`Content-Type: application/json`): a request
//!   is answered with `200` and `application/json`; a notification or a response gets
//!   `202` and no body. A `tools/call` whose client accepts `text/event-stream` is
//!   answered as an event stream when the call sends messages of its own before its
//!   answer (progress, log lines): those, then the answer, then the stream ends; a call
//!   that sends none is answered with plain JSON. A malformed message gets `400` with
//!   the JSON-RPC error.
//! - `GET /mcp` (with a session) opens the session's event stream for the messages the
//!   server sends on its own (list changes, log lines not tied to a request); one per
//!   session (`409` for a second). Without sessions (stateless), `405`.
//! - `DELETE /mcp` ends the session (`204`): its calls are cancelled and its id is
//!   refused (`404`) from then on by this process. Without sessions, `405`.
//! - `MCP-Protocol-Version`, when sent, must be a version this server speaks, else `400`.
//!
//! # Sessions
//! `initialize` opens a session and its answer carries its id in `Mcp-Session-Id`; every
//! later request must send it back (`400` without, `404` for an id the server did not
//! issue, issued to another client, or terminated). Ids are signed ([`SessionKey`]): any
//! process with the same key serves any session, and a session's registry (its storage
//! root, say) is rebuilt from its id, so nothing else has to be shared between processes
//! behind a load balancer. With [`SessionSettings::key`] `None` the server is stateless:
//! no ids, each request is served on its own.
//!
//! # Security
//! Checked on every request, in this order:
//! 1. `Host` (or the HTTP/2 authority) must name an allowed host ([`HttpConfig::allowed_hosts`]
//!    plus the loopback names and the bound address): a DNS-rebinding page's own host
//!    name is refused with `403`.
//! 2. `Origin`, when sent (browsers), must be an allowed origin (by default the server's
//!    own, `http://HOST:PORT` for each allowed host), else `403`.
//! 3. With tokens ([`HttpConfig::tokens`]), `Authorization: Bearer TOKEN` must carry one,
//!    compared in constant time, else `401` with `WWW-Authenticate: Bearer`.
//!
//! [`HttpServer::bind`] refuses an address that is not loopback unless tokens are set or
//! [`HttpConfig::insecure_public`] says so.
//!
//! # Limits
//! - request body: [`HttpConfig::max_body_bytes`] (`413` past it, checked on the
//!   declared length first and while reading), read within 30 s (`408`);
//! - request headers: read within 10 s of a connection (or of its previous answer);
//! - connections: [`HttpConfig::max_connections`] at once; past it new ones wait in the
//!   kernel's queue;
//! - tool calls: [`McpLimits::max_in_flight`] and [`McpLimits::max_in_flight_bytes`] for
//!   the whole server, [`HttpConfig::max_in_flight_per_connection`] per connection
//!   (also HTTP/2's stream limit); past either, `503` with `Retry-After: 1` (a waiting
//!   request would hold its body and its connection);
//! - sessions: [`SessionSettings::max_sessions`] held in memory.
//!
//! # Shutdown
//! [`HttpServer::serve`] stops at its `shutdown` future: no new connection is taken,
//! session event streams end, and running calls get [`HttpConfig::shutdown_grace`] to
//! finish and be answered; those still running then are cancelled.

mod guard;
mod sessions;

pub use guard::{
    valid_client_name, Client, TokenFileError, Tokens, MAX_CLIENT_NAME_LEN, MIN_TOKEN_LEN,
};
pub use sessions::{
    Registries, RegistryFactory, SessionInfo, SessionKey, SessionKeyError, SessionSettings,
    DEFAULT_MAX_SESSIONS, SESSION_ID_LEN,
};

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::convert::SUPPORTED_PROTOCOL_VERSIONS;
use crate::jsonrpc::{
    parse_batch, parse_line, Incoming, Params, RequestId, RpcError, HEADER_MISMATCH,
    INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::protocol::META_PROTOCOL_VERSION;
use crate::revision::Revision;
use crate::server::{McpLimits, McpStats};
use crate::session::{CallLimiter, Counters, Message, Notifier, Outlet, Session, Step};

use guard::{host_name, normalize_origin};
use sessions::{Refusal, Sessions};

/// The endpoint's path.
pub const MCP_PATH: &str = "/mcp";

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The protocol version header.
pub const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// Default for [`HttpConfig::max_body_bytes`]: 4 MiB, room for a tool call writing a
/// file of the default largest size (1 MiB) even with every byte JSON-escaped.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 << 20;

/// Default for [`HttpConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Default for [`HttpConfig::max_in_flight_per_connection`]: more than an agent runs in
/// parallel over one connection, few enough that one connection cannot take the whole
/// server's [`McpLimits::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: usize = 16;

/// Default for [`HttpConfig::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long the request headers may take to arrive.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the request body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often an open event stream gets a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Messages waiting to go out on one event stream.
const STREAM_QUEUE: usize = 64;

/// JSON-RPC's "server error" code, for refusals of the transport (busy, no session).
const SERVER_ERROR: i64 = -32000;

/// The server's settings. [`HttpConfig::new`] gives the documented defaults.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Host names (no port) the `Host` header may name besides the loopback names
    /// (`localhost`, `127.0.0.1`, `[::1]`) and the bound address; `*` allows any.
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://app.example.com`) a browser may call from besides the server's
    /// own; `*` allows any. Requests without `Origin` (not from a browser) pass.
    pub allowed_origins: Vec<String>,
    /// The bearer tokens accepted; `None`: no authentication (loopback only, unless
    /// [`HttpConfig::insecure_public`]).
    pub tokens: Option<Tokens>,
    /// Bind an address that is not loopback without tokens.
    pub insecure_public: bool,
    /// The tool calls of the whole server: in flight, and their argument bytes.
    pub limits: McpLimits,
    /// The largest request body, [`DEFAULT_MAX_BODY_BYTES`] by default.
    pub max_body_bytes: usize,
    /// Connections served at once, [`DEFAULT_MAX_CONNECTIONS`] by default.
    pub max_connections: usize,
    /// Requests running at once on one connection,
    /// [`DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION`] by default.
    pub max_in_flight_per_connection: usize,
    /// Sessions, or stateless.
    pub sessions: SessionSettings,
    /// How long running calls get to finish at shutdown, [`DEFAULT_SHUTDOWN_GRACE`].
    pub shutdown_grace: Duration,
    /// Whether the tools change while serving (hot reload, `--watch`): clients are then
    /// told (`notifications/tools/list_changed` on a session's GET stream, or a
    /// `subscriptions/listen` stream) and the capability says `listChanged: true`. Off
    /// by default.
    pub list_changed: bool,
}

impl HttpConfig {
    /// The defaults, keeping sessions under `key` (`None`: stateless).
    pub fn new(key: Option<SessionKey>) -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            tokens: None,
            insecure_public: false,
            limits: McpLimits::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight_per_connection: DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
            sessions: SessionSettings {
                key,
                max_sessions: DEFAULT_MAX_SESSIONS,
            },
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            list_changed: false,
        }
    }
}

/// Why the HTTP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The address is not loopback, and there are no tokens.
    #[error("refusing to serve on {addr} without authentication: it is reachable from other machines; give --auth-token-file, bind a loopback address (127.0.0.1), or pass --insecure-public if a proxy in front authenticates")]
    PublicWithoutAuth {
        /// The address.
        addr: SocketAddr,
    },
    /// Binding failed.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
}

/// One connection's share of the limits.
#[derive(Clone)]
struct Conn {
    requests: Arc<Semaphore>,
    peer: SocketAddr,
}

struct App {
    hosts: Option<Vec<String>>,
    origins: Option<Vec<String>>,
    tokens: Option<Tokens>,
    max_body_bytes: usize,
    per_connection: usize,
    sessions: Sessions,
    limiter: CallLimiter,
    counters: Arc<Counters>,
    /// Cancelled when shutdown begins: event streams end.
    stopping: CancellationToken,
}

/// A bound Streamable HTTP server.
pub struct HttpServer {
    app: Arc<App>,
    listener: TcpListener,
    addr: SocketAddr,
    max_connections: usize,
    shutdown_grace: Duration,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

impl HttpServer {
    /// Binds `addr` (port 0: any free port, see [`HttpServer::local_addr`]) to serve
    /// `registries` under `config`.
    ///
    /// # Errors
    /// [`HttpError::PublicWithoutAuth`] for an address that is not loopback without
    /// tokens or [`HttpConfig::insecure_public`]; [`HttpError::Config`] for a limit of
    /// 0; [`HttpError::Bind`] when the address cannot be bound.
    pub async fn bind(
        addr: SocketAddr,
        config: HttpConfig,
        registries: Registries,
    ) -> Result<Self, HttpError> {
        if !is_loopback(addr.ip()) && config.tokens.is_none() && !config.insecure_public {
            return Err(HttpError::PublicWithoutAuth { addr });
        }
        for (value, what) in [
            (config.max_body_bytes, "the request body limit"),
            (config.max_connections, "the connection limit"),
            (
                config.max_in_flight_per_connection,
                "the per-connection in-flight limit",
            ),
            (config.sessions.max_sessions, "the session limit"),
        ] {
            if value == 0 {
                return Err(HttpError::Config(format!(
                    "{what} is 0, which would serve nothing; give at least 1"
                )));
            }
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        let any = |list: &[String]| list.iter().any(|item| item.trim() == "*");
        let hosts = (!any(&config.allowed_hosts)).then(|| allowed_hosts(&config, addr));
        let origins = (!any(&config.allowed_origins)).then(|| {
            let mut origins: Vec<String> = config
                .allowed_origins
                .iter()
                .map(|origin| normalize_origin(origin))
                .collect();
            for host in hosts.iter().flatten() {
                for scheme in ["http", "https"] {
                    origins.push(format!("{scheme}://{host}:{}", addr.port()));
                }
            }
            origins
        });
        let counters: Arc<Counters> = Arc::default();
        let app = App {
            hosts,
            origins,
            tokens: config.tokens,
            max_body_bytes: config.max_body_bytes,
            per_connection: config.max_in_flight_per_connection,
            sessions: Sessions::new(
                config.sessions,
                registries,
                Arc::clone(&counters),
                config.list_changed,
            ),
            limiter: CallLimiter::with_counters(&config.limits, Arc::clone(&counters)),
            counters,
            stopping: CancellationToken::new(),
        };
        Ok(Self {
            app: Arc::new(app),
            listener,
            addr,
            max_connections: config.max_connections,
            shutdown_grace: config.shutdown_grace,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle on the server's counters, readable while it serves.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(Arc::clone(&self.app))
    }

    /// Serves until `shutdown` completes, then shuts down gracefully (see the module
    /// docs): returns once every connection closed, or the grace period is over and
    /// the calls still running were cancelled.
    ///
    /// # Errors
    /// None today: accept errors (too many open files) are logged and retried.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), HttpError> {
        let Self {
            app,
            listener,
            addr,
            max_connections,
            shutdown_grace,
        } = self;
        let router = Router::new()
            .route(MCP_PATH, post(post_mcp).get(get_mcp).delete(delete_mcp))
            .with_state(Arc::clone(&app));
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(u32::try_from(app.per_connection).unwrap_or(u32::MAX))
            .keep_alive_interval(Some(KEEP_ALIVE));
        let connections = Arc::new(Semaphore::new(max_connections));
        let graceful = GracefulShutdown::new();
        info!(
            %addr,
            path = MCP_PATH,
            auth = app.tokens.is_some(),
            sessions = app.sessions.stateful(),
            max_connections,
            "MCP server ready: Streamable HTTP on http://{addr}{MCP_PATH}"
        );
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                permit = Arc::clone(&connections).acquire_owned() => permit,
                () = &mut shutdown => break,
            };
            let Ok(permit) = permit else { break };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        warn!("accepting a connection failed: {err}; retrying");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let conn = Conn {
                requests: Arc::new(Semaphore::new(app.per_connection)),
                peer,
            };
            let router = router.clone();
            let service =
                hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(conn.clone());
                    let mut router = router.clone();
                    tower_service::Service::call(&mut router, request.map(Body::new))
                });
            let connection = builder
                .serve_connection(TokioIo::new(stream), service)
                .into_owned();
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                let _permit: OwnedSemaphorePermit = permit;
                if let Err(err) = connection.await {
                    debug!(%peer, "connection ended: {err}");
                }
            });
        }
        drop(listener);
        let running = app.counters.calls_running.load(Ordering::SeqCst);
        info!(
            calls_running = running,
            grace = ?shutdown_grace,
            "shutting down: no new connections; running calls get the grace period to finish"
        );
        app.stopping.cancel();
        tokio::select! {
            () = graceful.shutdown() => info!("every connection closed; MCP server stopped"),
            () = tokio::time::sleep(shutdown_grace) => {
                let running = app.counters.calls_running.load(Ordering::SeqCst);
                warn!(calls_running = running, "grace period over: cancelling the calls still running");
                app.sessions.close_all();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }
}

/// Reads a running [`HttpServer`]'s counters.
#[derive(Clone)]
pub struct StatsHandle(Arc<App>);

impl std::fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StatsHandle").field(&self.stats()).finish()
    }
}

impl StatsHandle {
    /// The counters now (the queue fields stay 0: HTTP answers are not queued).
    pub fn stats(&self) -> McpStats {
        McpStats::from_counters(&self.0.counters)
    }

    /// How many sessions the server holds in memory.
    pub fn sessions(&self) -> usize {
        self.0.sessions.len()
    }
}

/// The loopback names, the bound address (unless it is a wildcard) and the configured
/// names.
fn allowed_hosts(config: &HttpConfig, addr: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    if !addr.ip().is_unspecified() {
        hosts.push(match addr.ip() {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        });
    }
    for host in &config.allowed_hosts {
        if let Some(name) = host_name(host) {
            hosts.push(name);
        }
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// A refusal on its way back (boxed: a response is large next to what passes).
type Rejection = Box<Response>;

fn reject(status: StatusCode, message: impl Into<String>) -> Rejection {
    Box::new(refuse(status, message))
}

/// A refusal: the HTTP status and a JSON-RPC error body saying what to do.
fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    let code = if status == StatusCode::BAD_REQUEST {
        INVALID_REQUEST
    } else {
        SERVER_ERROR
    };
    let body = RpcError::new(RequestId::null(), code, message).encode();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn json(status: StatusCode, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

impl App {
    /// The Host, Origin and token checks; the client when they pass.
    fn admit(
        &self,
        headers: &HeaderMap,
        uri: &axum::http::Uri,
        conn: &Conn,
    ) -> Result<Option<String>, Rejection> {
        if let Some(hosts) = &self.hosts {
            // The Host header when there is one (HTTP/1.1), else the authority (HTTP/2).
            let host = match headers.get(header::HOST) {
                Some(value) => Some(String::from_utf8_lossy(value.as_bytes()).into_owned()),
                None => uri.authority().map(|a| a.as_str().to_owned()),
            };
            let name = host.as_deref().and_then(host_name);
            if !name.is_some_and(|name| hosts.contains(&name)) {
                warn!(peer = %conn.peer, host = ?host, "refused a request for a host that is not allowed (DNS rebinding?)");
                return Err(reject(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Forbidden: the Host header {} is not one this server answers to; connect to it by an allowed name ({}), or start it with --allow-host NAME",
                        host.map_or_else(|| "(none)".to_owned(), |h| format!("{h:?}")),
                        hosts.join(", ")
                    ),
                ));
            }
        }
        if let (Some(origins), Some(origin)) = (&self.origins, headers.get(header::ORIGIN)) {
            let origin = origin.to_str().map(normalize_origin).unwrap_or_default();
            if !origins.contains(&origin) {
                warn!(peer = %conn.peer, %origin, "refused a request from a browser origin that is not allowed");
                return Err(reject(
                    StatusCode::FORBIDDEN,
                    format!("Forbidden: requests from the origin {origin:?} are not allowed; start the server with --allow-origin {origin} if that page should use it"),
                ));
            }
        }
        let Some(tokens) = &self.tokens else {
            return Ok(None);
        };
        let presented = header_str(headers, "authorization").and_then(|value| {
            let (scheme, token) = value.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        let challenge = |error: Option<&str>| {
            let mut value = r#"Bearer realm="wasm-toolhost""#.to_owned();
            if let Some(error) = error {
                value.push_str(&format!(r#", error="{error}""#));
            }
            HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("Bearer"))
        };
        match presented {
            None => {
                debug!(peer = %conn.peer, "refused a request without a bearer token");
                let mut response = refuse(
                    StatusCode::UNAUTHORIZED,
                    "Unauthorized: send the token as `Authorization: Bearer TOKEN`",
                );
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, challenge(None));
                Err(Box::new(response))
            }
            Some(token) => match tokens.check(token) {
                Some(client) => Ok(client.name),
                None => {
                    warn!(peer = %conn.peer, "refused a request with a wrong bearer token");
                    let mut response = refuse(
                        StatusCode::UNAUTHORIZED,
                        "Unauthorized: the bearer token is not valid; check the token you were given",
                    );
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, challenge(Some("invalid_token")));
                    Err(Box::new(response))
                }
            },
        }
    }

    /// The session a request names: `Err` with the refusal to send.
    async fn session_of(
        &self,
        headers: &HeaderMap,
        client: Option<&str>,
    ) -> Result<(Session, String), Rejection> {
        let Some(id) = header_str(headers, SESSION_HEADER) else {
            return Err(reject(
                StatusCode::BAD_REQUEST,
                "Bad Request: no Mcp-Session-Id header; send initialize first, then the session id its answer carried with every request",
            ));
        };
        match self.sessions.find(id, client).await {
            Ok(session) => Ok((session, id.to_owned())),
            Err(refusal) => Err(Box::new(session_refusal(refusal))),
        }
    }
}

fn session_refusal(refusal: Refusal) -> Response {
    match refusal {
        Refusal::NotFound => refuse(
            StatusCode::NOT_FOUND,
            "Not Found: no such session (ended, or never issued to this client); send initialize to start a new one",
        ),
        Refusal::Full => {
            let mut response = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: the server holds as many busy sessions as it may; retry shortly",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Refusal::Setup(err) => {
            warn!("cannot set up a session: {err}");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Server Error: cannot set up the session: {err}"),
            )
        }
    }
}

/// What the client's `Accept` allows.
struct Accept {
    json: bool,
    sse: bool,
}

fn accept(headers: &HeaderMap) -> Accept {
    let Some(value) = headers.get(header::ACCEPT) else {
        return Accept {
            json: true,
            sse: false,
        };
    };
    let mut accept = Accept {
        json: false,
        sse: false,
    };
    for item in value.to_str().unwrap_or_default().split(',') {
        let media = item
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "*/*" => (accept.json, accept.sse) = (true, true),
            "application/json" | "application/*" => accept.json = true,
            "text/event-stream" | "text/*" => accept.sse = true,
            _ => {}
        }
    }
    accept
}

/// The protocol version a request's `_meta` names, if any.
fn body_version(params: &Params) -> Option<String> {
    params
        .value("_meta")?
        .get(META_PROTOCOL_VERSION)?
        .as_str()
        .map(str::to_owned)
}

/// 2026-07-28 mirrors body fields into headers for intermediaries (a load balancer may
/// route on them): for a request of that era, `MCP-Protocol-Version`, `Mcp-Method` and
/// (for `tools/call`) `Mcp-Name` must be there and match the body, else the request is
/// refused with `HeaderMismatch` (-32020), so no part of the path acts on a value the
/// server does not. Requests of the legacy era are not checked (they have no such
/// headers but the version).
fn check_mirrored_headers(
    headers: &HeaderMap,
    id: &RequestId,
    method: &str,
    params: &Params,
) -> Result<(), RpcError> {
    let header_version = header_str(headers, PROTOCOL_HEADER).map(str::trim);
    let body = body_version(params);
    let modern = |version: Option<&str>| {
        version
            .and_then(Revision::parse)
            .is_some_and(Revision::is_modern)
    };
    if !modern(header_version) && !modern(body.as_deref()) {
        return Ok(());
    }
    let mismatch = |what: String| {
        RpcError::new(
            id.clone(),
            HEADER_MISMATCH,
            format!("Header mismatch: {what}"),
        )
    };
    match (header_version, body.as_deref()) {
        (None, Some(body)) => {
            return Err(mismatch(format!(
                "no MCP-Protocol-Version header; send MCP-Protocol-Version: {body}, the version the body's _meta names"
            )))
        }
        (Some(header), Some(body)) if header != body => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version header value '{header}' does not match body value '{body}'"
            )))
        }
        _ => {}
    }
    match header_str(headers, "mcp-method") {
        None => {
            return Err(mismatch(format!(
                "no Mcp-Method header; send Mcp-Method: {method}"
            )))
        }
        Some(header) if header != method => {
            return Err(mismatch(format!(
                "Mcp-Method header value '{header}' does not match body value '{method}'"
            )))
        }
        Some(_) => {}
    }
    if method == "tools/call" {
        let Some(name) = params.str("name") else {
            // The call itself is refused for its missing name.
            return Ok(());
        };
        match header_str(headers, "mcp-name").map(decode_header_value) {
            None => {
                return Err(mismatch(
                    "no Mcp-Name header; send the tool's name in Mcp-Name (as =?base64?...?= when it is not plain ASCII)".to_owned(),
                ))
            }
            Some(None) => {
                return Err(mismatch(
                    "the Mcp-Name header is not valid =?base64?...?= text".to_owned(),
                ))
            }
            Some(Some(header)) if header != name => {
                return Err(mismatch(format!(
                    "Mcp-Name header value {header:?} does not match body value {name:?}"
                )))
            }
            Some(Some(_)) => {}
        }
    }
    Ok(())
}

/// A header value as 2026-07-28 encodes it: as it is, or `=?base64?{Base64}?=` for text
/// that is not plain ASCII. `None` for a Base64 form that does not decode to UTF-8.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// The `MCP-Protocol-Version` check: `Err` (400) for a version this server does not speak.
fn check_protocol(headers: &HeaderMap) -> Result<(), Rejection> {
    let Some(value) = headers.get(PROTOCOL_HEADER) else {
        return Ok(());
    };
    let version = value.to_str().unwrap_or_default().trim();
    if SUPPORTED_PROTOCOL_VERSIONS.contains(&version) {
        return Ok(());
    }
    // UnsupportedProtocolVersionError (2026-07-28), with the versions to retry with.
    let requested = String::from_utf8_lossy(value.as_bytes());
    let err = RpcError::new(
        RequestId::null(),
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Bad Request: unsupported MCP-Protocol-Version {requested:?}; this server speaks {}",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        ),
    )
    .with_data(serde_json::json!({
        "supported": SUPPORTED_PROTOCOL_VERSIONS,
        "requested": requested,
    }));
    Err(Box::new(json(
        StatusCode::BAD_REQUEST,
        Bytes::from(err.encode_with(false)),
    )))
}

async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, Rejection> {
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: the request body is over {limit} bytes, the limit for one message; send less per call"),
        )
    };
    let declared = header_str(headers, "content-length").and_then(|n| n.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(Box::new(too_large()));
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect()).await {
        Err(_elapsed) => Err(reject(
            StatusCode::REQUEST_TIMEOUT,
            "Request Timeout: the request body did not arrive in time",
        )),
        Ok(Err(err)) if err.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Box::new(too_large()))
        }
        Ok(Err(err)) => Err(reject(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: the request body could not be read: {err}"),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

async fn post_mcp(
    State(app): State<Arc<App>>,
    Extension(conn): Extension<Conn>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let client = match app.admit(headers, &parts.uri, &conn) {
        Ok(client) => client,
        Err(response) => return *response,
    };
    let content_type = header_str(headers, "content-type").unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Unsupported Media Type: {content_type:?}; send one JSON-RPC message with Content-Type: application/json"),
        );
    }
    let accepts = accept(headers);
    if !accepts.json && !accepts.sse {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: this server answers with application/json or text/event-stream; accept both",
        );
    }
    if let Err(response) = check_protocol(headers) {
        return *response;
    }
    let body = match read_body(body, headers, app.max_body_bytes).await {
        Ok(body) => body,
        Err(response) => return *response,
    };
    let text = body.trim_ascii();
    // The revision the header names: how an error whose id could not be read is given
    // before a session says, and whether a stateless server takes a batch.
    let revision = header_str(headers, PROTOCOL_HEADER).and_then(|v| Revision::parse(v.trim()));
    let null_id = revision.is_some_and(Revision::null_error_id);
    // An array is a batch, read once the session says whether its revision has them.
    let is_batch = text.first() == Some(&b'[');
    let message = parse_line(text);
    if let Err(err) = &message {
        if !is_batch && (err.code == PARSE_ERROR || err.code == INVALID_REQUEST) {
            debug!(peer = %conn.peer, code = err.code, "{}", err.message);
            return json(
                StatusCode::BAD_REQUEST,
                Bytes::from(err.encode_with(null_id)),
            );
        }
    }
    if let Ok(Incoming::Request { id, method, params }) = &message {
        if let Err(err) = check_mirrored_headers(headers, id, method, params) {
            debug!(peer = %conn.peer, "{}", err.message);
            return json(StatusCode::BAD_REQUEST, Bytes::from(err.encode_with(false)));
        }
    }
    let modern_method = match &message {
        Ok(Incoming::Request { params, .. }) => body_version(params)
            .as_deref()
            .and_then(Revision::parse)
            .is_some_and(Revision::is_modern),
        _ => false,
    };
    let initialize =
        matches!(&message, Ok(Incoming::Request { method, .. }) if method == "initialize");
    // A request of the modern era (2026-07-28) stands alone: it needs no session.
    let modern =
        revision.is_some_and(Revision::is_modern) && header_str(headers, SESSION_HEADER).is_none();
    let (session, new_id) = if !app.sessions.stateful() || modern {
        match app.sessions.ephemeral(client.as_deref()).await {
            Ok(session) => (session, None),
            Err(refusal) => return session_refusal(refusal),
        }
    } else if initialize {
        match app.sessions.create(client.as_deref()).await {
            Ok(session) => {
                let id = session.environment().session_id.clone();
                (session, Some(id))
            }
            Err(refusal) => return session_refusal(refusal),
        }
    } else {
        match app.session_of(headers, client.as_deref()).await {
            Ok((session, _)) => (session, None),
            Err(response) => return *response,
        }
    };
    if is_batch {
        let batches = if app.sessions.stateful() && !modern {
            session.accepts_batches()
        } else {
            revision.is_some_and(Revision::accepts_batches)
        };
        match (batches, parse_batch(text)) {
            (true, Some(Ok(members))) => return post_batch(&app, &conn, &session, members).await,
            (true, Some(Err(err))) | (false, Some(Err(err))) => {
                return json(
                    StatusCode::BAD_REQUEST,
                    session.error_message(&err).to_bytes(),
                )
            }
            _ => {
                let err = message.err().unwrap_or_else(|| {
                    RpcError::new(
                        RequestId::null(),
                        INVALID_REQUEST,
                        "Invalid Request".to_owned(),
                    )
                });
                return json(
                    StatusCode::BAD_REQUEST,
                    session.error_message(&err).to_bytes(),
                );
            }
        }
    }
    let mut response = match session.receive(message) {
        Step::Nothing => StatusCode::ACCEPTED.into_response(),
        // 2026-07-28: an unknown method is 404 with its JSON-RPC error, so a client tells
        // it from a server without the endpoint.
        Step::Reply(reply) if modern_method && reply.error_code() == Some(METHOD_NOT_FOUND) => {
            json(StatusCode::NOT_FOUND, reply.to_bytes())
        }
        Step::Reply(reply)
            if modern_method && reply.error_code() == Some(UNSUPPORTED_PROTOCOL_VERSION) =>
        {
            json(StatusCode::BAD_REQUEST, reply.to_bytes())
        }
        Step::Listen(listen) => {
            if !accepts.sse {
                let err = RpcError::new(
                    listen.id().clone(),
                    INVALID_REQUEST,
                    "Invalid Request: subscriptions/listen is answered as an event stream; send Accept: text/event-stream".to_owned(),
                );
                return json(
                    StatusCode::NOT_ACCEPTABLE,
                    session.error_message(&err).to_bytes(),
                );
            }
            // A subscription holds one of the connection's places as a call does, so
            // the streams one client keeps open are bounded (HTTP/2 multiplexes them).
            let Ok(request_permit) = Arc::clone(&conn.requests).try_acquire_owned() else {
                let err = RpcError::new(
                    listen.id().clone(),
                    SERVER_ERROR,
                    format!("Service Unavailable: {} requests are running on this connection, the most allowed; close a subscription or use another connection", app.per_connection),
                );
                return json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    session.error_message(&err).to_bytes(),
                );
            };
            // The client gone (the stream dropped): the subscription ends.
            let guard = listen.cancellation().drop_guard();
            let (sender, mut receiver) = mpsc::channel(STREAM_QUEUE);
            let notifier = Notifier::new(Arc::new(ChannelOutlet {
                sender,
                lossy: false,
            }));
            let mut task = tokio::spawn(async move {
                let _permit = request_permit;
                listen.run(notifier).await
            });
            tokio::select! {
                biased;
                Some(first) = receiver.recv() => event_stream(first, receiver, task, guard),
                joined = &mut task => {
                    drop(guard.disarm());
                    finished(&accepts, joined, &mut receiver)
                }
            }
        }
        Step::Reply(reply) => answer_one(&accepts, reply),
        Step::Call(call) => {
            let busy = |message: String, id: &RequestId| {
                let mut response = json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    Bytes::from(RpcError::new(id.clone(), SERVER_ERROR, message).encode()),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            };
            let Ok(request_permit) = Arc::clone(&conn.requests).try_acquire_owned() else {
                return busy(
                    format!("Service Unavailable: {} tool calls are running on this connection, the most allowed; retry when one ends, or use another connection", app.per_connection),
                    call.id(),
                );
            };
            let slot = match app.limiter.try_acquire(call.argument_bytes()) {
                Ok(slot) => slot,
                Err(err) => {
                    info!(peer = %conn.peer, "refused a tool call: {err}");
                    return busy(format!("Service Unavailable: {err}"), call.id());
                }
            };
            let token = call.cancellation();
            // The client gone (this future or the stream dropped): the call stops.
            let guard = token.drop_guard();
            let (sender, mut receiver) = mpsc::channel(STREAM_QUEUE);
            let notifier = if accepts.sse {
                Notifier::new(Arc::new(ChannelOutlet {
                    sender,
                    lossy: false,
                }))
            } else {
                Notifier::none()
            };
            let mut task = tokio::spawn(async move {
                let _permit = request_permit;
                call.run(slot, notifier).await
            });
            tokio::select! {
                biased;
                joined = &mut task => {
                    drop(guard.disarm());
                    finished(&accepts, joined, &mut receiver)
                }
                Some(first) = receiver.recv() => {
                    event_stream(first, receiver, task, guard)
                }
            }
        }
    };
    if let Some(id) = new_id {
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
    }
    response
}

/// The plain answer to a call: its response, or `204` when it was cancelled (a cancelled
/// request is not answered).
fn answer(accepts: &Accept, joined: Result<Option<Message>, tokio::task::JoinError>) -> Response {
    match joined {
        Ok(Some(reply)) => answer_one(accepts, reply),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => {
            warn!("a tool call task failed outside the registry: {err}");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the tool call failed inside the server",
            )
        }
    }
}

/// The answer to a call that ended before it was answered: plain JSON, or an event
/// stream when the call sent messages of its own meanwhile (a quick call that logged or
/// reported progress: those lines come first, then the answer).
fn finished(
    accepts: &Accept,
    joined: Result<Option<Message>, tokio::task::JoinError>,
    messages: &mut mpsc::Receiver<Message>,
) -> Response {
    let mut sent = Vec::new();
    while let Ok(message) = messages.try_recv() {
        sent.push(message);
    }
    if sent.is_empty() {
        return answer(accepts, joined);
    }
    match joined {
        Ok(Some(reply)) => sent.push(reply),
        Ok(None) => {}
        Err(err) => warn!("a tool call task failed outside the registry: {err}"),
    }
    let (frames, receiver) = mpsc::channel::<Bytes>(sent.len());
    for message in &sent {
        // Room for every frame: none waits.
        let _ = frames.try_send(event(message));
    }
    sse_response(receiver)
}

/// One answer: plain JSON, or a one-event stream for a client that takes no JSON.
fn answer_one(accepts: &Accept, reply: Message) -> Response {
    if accepts.json {
        return json(StatusCode::OK, reply.to_bytes());
    }
    let (frames, receiver) = mpsc::channel(1);
    // Room for one: this never waits, and the receiver is still here.
    let _ = frames.try_send(event(&reply));
    sse_response(receiver)
}

/// One server-sent event carrying `message`.
fn event(message: &Message) -> Bytes {
    let mut frame = Vec::with_capacity(message.len() + 24);
    frame.extend_from_slice(b"event: message\ndata: ");
    for part in message.parts() {
        frame.extend_from_slice(part);
    }
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

fn sse_response(frames: mpsc::Receiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(frames, |mut frames| async move {
        frames
            .recv()
            .await
            .map(|frame| (Ok::<_, Infallible>(frame), frames))
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A call answered as an event stream: `first`, the call's further messages, then its
/// answer. A client that goes away cancels the call (`guard`).
fn event_stream(
    first: Message,
    mut messages: mpsc::Receiver<Message>,
    mut task: tokio::task::JoinHandle<Option<Message>>,
    guard: tokio_util::sync::DropGuard,
) -> Response {
    let (frames, receiver) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    tokio::spawn(async move {
        let _guard = guard;
        if frames.send(event(&first)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                Some(message) = messages.recv() => {
                    if frames.send(event(&message)).await.is_err() {
                        return;
                    }
                }
                joined = &mut task => {
                    while let Ok(message) = messages.try_recv() {
                        if frames.send(event(&message)).await.is_err() {
                            return;
                        }
                    }
                    match joined {
                        Ok(Some(reply)) => { let _ = frames.send(event(&reply)).await; }
                        Ok(None) => {}
                        Err(err) => warn!("a tool call task failed outside the registry: {err}"),
                    }
                    return;
                }
                () = frames.closed() => return,
            }
        }
    });
    sse_response(receiver)
}

/// Messages into an event stream's queue. `lossy`: when the queue is full the message
/// is dropped (a session stream must not hold up the calls that log to it); else the
/// sender waits.
#[allow(
    dead_code,
    reason = "server-initiated messages (issue 12 part B: progress, log lines, list_changed) go this way; today only the transports' tests send through it"
)]
struct ChannelOutlet {
    sender: mpsc::Sender<Message>,
    lossy: bool,
}

impl Outlet for ChannelOutlet {
    fn try_send(&self, message: Message) -> bool {
        self.sender.try_send(message).is_ok()
    }

    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if self.lossy {
                if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(message) {
                    debug!("a session event stream is full: dropped a notification");
                }
            } else {
                let _ = self.sender.send(message).await;
            }
        })
    }
}

/// A JSON-RPC batch (2025-03-26): each member served as if it came alone, the calls
/// concurrently (each taking its place among the calls in flight, or answered busy), and
/// one JSON array of the answers; `202` when there is none (notifications only).
/// Notifications about the calls are not sent: a batch is answered with JSON.
async fn post_batch(
    app: &App,
    conn: &Conn,
    session: &Session,
    members: Vec<Result<Incoming, RpcError>>,
) -> Response {
    enum Answer {
        Ready(Message),
        Running(tokio::task::JoinHandle<Option<Message>>),
    }
    let mut answers = Vec::with_capacity(members.len());
    // Dropped with this future (the client gone): the batch's calls stop.
    let mut guards = Vec::new();
    for member in members {
        match session.receive(member) {
            Step::Nothing => {}
            Step::Reply(reply) => answers.push(Answer::Ready(reply)),
            Step::Listen(listen) => {
                let err = RpcError::new(
                    listen.id().clone(),
                    INVALID_REQUEST,
                    "Invalid Request: subscriptions/listen cannot be part of a batch; send it alone, accepting text/event-stream".to_owned(),
                );
                answers.push(Answer::Ready(session.error_message(&err)));
            }
            Step::Call(call) => {
                let busy = |message: String| {
                    Answer::Ready(Message::error(&RpcError::new(
                        call.id().clone(),
                        SERVER_ERROR,
                        format!("Service Unavailable: {message}"),
                    )))
                };
                let Ok(permit) = Arc::clone(&conn.requests).try_acquire_owned() else {
                    answers.push(busy(format!("{} tool calls are running on this connection, the most allowed; retry when one ends", app.per_connection)));
                    continue;
                };
                let slot = match app.limiter.try_acquire(call.argument_bytes()) {
                    Ok(slot) => slot,
                    Err(err) => {
                        answers.push(busy(err.to_string()));
                        continue;
                    }
                };
                guards.push(call.cancellation().drop_guard());
                answers.push(Answer::Running(tokio::spawn(async move {
                    let _permit = permit;
                    call.run(slot, Notifier::none()).await
                })));
            }
        }
    }
    let mut gathered = Vec::with_capacity(answers.len());
    for answer in answers {
        match answer {
            Answer::Ready(reply) => gathered.push(reply),
            Answer::Running(task) => match task.await {
                Ok(Some(reply)) => gathered.push(reply),
                Ok(None) => {}
                Err(err) => warn!("a tool call task failed outside the registry: {err}"),
            },
        }
    }
    for guard in guards {
        drop(guard.disarm());
    }
    match Message::batch(gathered) {
        Some(reply) => json(StatusCode::OK, reply.to_bytes()),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

fn no_sessions(method: &str) -> Response {
    let mut response = refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Method Not Allowed: {method} needs a session, and this server is stateless; send each message as a POST"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

async fn get_mcp(
    State(app): State<Arc<App>>,
    Extension(conn): Extension<Conn>,
    request: Request,
) -> Response {
    let (parts, _body) = request.into_parts();
    let headers = &parts.headers;
    let client = match app.admit(headers, &parts.uri, &conn) {
        Ok(client) => client,
        Err(response) => return *response,
    };
    if !app.sessions.stateful() {
        return no_sessions("GET");
    }
    if !accept(headers).sse {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: GET opens an event stream; send Accept: text/event-stream",
        );
    }
    if let Err(response) = check_protocol(headers) {
        return *response;
    }
    let (session, id) = match app.session_of(headers, client.as_deref()).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    if !app.sessions.set_streaming(&id, true) {
        return refuse(
            StatusCode::CONFLICT,
            "Conflict: this session already has its GET event stream open; use that one",
        );
    }
    let (sender, mut messages) = mpsc::channel(STREAM_QUEUE);
    session.set_notifier(Notifier::new(Arc::new(ChannelOutlet {
        sender,
        lossy: true,
    })));
    let (frames, receiver) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    let stopping = app.stopping.clone();
    let app = Arc::clone(&app);
    debug!(session_id = %id, "session event stream opened");
    // Taken now, as the stream opens: a change made before the tasks first run is announced.
    let changes = session.tool_changes();
    tokio::spawn(async move {
        // While the stream is open, a change of the tools is announced on it.
        let announcer = tokio::spawn({
            let session = session.clone();
            async move { session.announce_changes(changes).await }
        });
        let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
        keep_alive.tick().await;
        loop {
            tokio::select! {
                Some(message) = messages.recv() => {
                    if frames.send(event(&message)).await.is_err() { break }
                }
                _ = keep_alive.tick() => {
                    if frames.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() { break }
                }
                () = frames.closed() => break,
                () = stopping.cancelled() => break,
                () = session_closed(&session) => break,
            }
        }
        announcer.abort();
        session.set_notifier(Notifier::none());
        app.sessions.set_streaming(&id, false);
        debug!(session_id = %id, "session event stream closed");
    });
    sse_response(receiver)
}

async fn session_closed(session: &Session) {
    session.closed().await;
}

async fn delete_mcp(
    State(app): State<Arc<App>>,
    Extension(conn): Extension<Conn>,
    request: Request,
) -> Response {
    let (parts, _body) = request.into_parts();
    let headers = &parts.headers;
    let client = match app.admit(headers, &parts.uri, &conn) {
        Ok(client) => client,
        Err(response) => return *response,
    };
    if !app.sessions.stateful() {
        return no_sessions("DELETE");
    }
    match app.session_of(headers, client.as_deref()).await {
        Ok((_, id)) => {
            app.sessions.terminate(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(response) => *response,
    }
}

#[cfg(test)]
mod tests;
