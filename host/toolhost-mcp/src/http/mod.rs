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
//!    compared in constant time, else `401` with `WWW-Authenticate: Bearer`. With OAuth
//!    ([`HttpConfig::with_oauth`]), a bearer token that is not a static one must be an
//!    access token of a trusted issuer for this server ([`OAuthConfig`]), else `401`
//!    (`error="invalid_token"`, and `resource_metadata` naming the protected resource
//!    metadata), or `403` (`error="insufficient_scope"`) without a required scope.
//!
//! [`HttpServer::bind`] refuses an address that is not loopback unless tokens are set or
//! [`HttpConfig::insecure_public`] says so.
//!
//! # Limits
//! - request body: [`HttpConfig::max_body_bytes`] (`413` past it, checked on the
//!   declared length first and while reading), read within 30 s (`408`) and on the
//!   progress clock below (the connection is closed);
//! - request headers: within [`HttpConfig::header_timeout`] (2 s) of a connection's
//!   opening, extended by each byte received at [`HttpConfig::min_receive_rate`]
//!   (500 B/s) up to 10 s; an answered connection may idle 10 s before its next request;
//! - connections: [`HttpConfig::max_connections`] at once; when all are taken a new one
//!   pushes out a connection that has not yet had a request pass the checks (or, without
//!   tokens, one idle between requests); authenticated connections and those being
//!   answered stay, and with none to push out new ones wait in the kernel's queue;
//! - connections per peer (IPv4 address, IPv6 /64) that have not yet had a request pass
//!   the checks: [`HttpConfig::max_pending_per_peer`] (`503` and closed past it);
//! - tool calls: [`McpLimits::max_in_flight`] and [`McpLimits::max_in_flight_bytes`] for
//!   the whole server, [`HttpConfig::max_in_flight_per_connection`] per connection;
//!   past either, `503` with `Retry-After: 1` (a waiting request would hold its body and
//!   its connection). Messages that run no tool (a cancellation, a ping, `tools/list`)
//!   take none of these places, so they get through whatever the calls hold: HTTP/2
//!   allows [`CONTROL_STREAMS`] streams per connection beyond its calls for them;
//!   [`McpLimits::max_queued_calls`] is for stdio only;
//! - sessions: [`SessionSettings::max_sessions`] held in memory.
//!
//! The connection rules, and why they keep a flood of slow or half-open connections
//! (slowloris) from locking clients out, are in `conns.rs`: a fresh client is answered
//! within a second while thousands of half-open connections are held.
//!
//! # Shutdown
//! [`HttpServer::serve`] stops at its `shutdown` future: no new connection is taken,
//! session event streams end, and running calls get [`HttpConfig::shutdown_grace`] to
//! finish and be answered; those still running then are cancelled.

mod admit;
mod caller;
mod conns;
mod guard;
mod handlers;
mod listener;
mod oauth;
mod roots;
mod server;
mod service;
mod sessions;
mod streams;

pub use guard::{
    valid_client_name, Client, TokenFileError, Tokens, MAX_CLIENT_NAME_LEN, MIN_TOKEN_LEN,
};
pub use oauth::{
    FetchFuture, Fetcher, OAuthConfig, FETCH_TIMEOUT, LEEWAY_SECS, MAX_FETCH_BYTES,
    MAX_TOKEN_BYTES, REFETCH_INTERVAL, RESOURCE_METADATA_PATH,
};
pub use roots::{SessionRootTemplate, TemplateError, CLIENT_PLACEHOLDER, SESSION_PLACEHOLDER};
pub use server::HttpServer;
pub use service::{McpService, StatsHandle};
pub use sessions::{
    Registries, RegistryFactory, ServedFactory, SessionInfo, SessionKey, SessionKeyError,
    SessionSettings, DEFAULT_MAX_SESSIONS, SESSION_ID_LEN,
};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::{RequestId, RpcError, INVALID_REQUEST};
use crate::limits::McpLimits;
use crate::session::{CallLimiter, Counters};

use sessions::Sessions;

/// The target of the transport's log lines in every file of this module: its own path, the
/// logger name clients see in `notifications/message` and what `RUST_LOG` filters on,
/// as it was when the module was one file.
const LOG_TARGET: &str = module_path!();

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

/// Default for [`HttpConfig::max_pending_per_peer`]: more connections than a client
/// opens at once before its requests go out (a browser opens 6, an agent's pool about as
/// many as its parallel calls), few enough that 8 addresses cannot take the default 256
/// slots.
pub const DEFAULT_MAX_PENDING_PER_PEER: usize = 32;

/// Default for [`HttpConfig::header_timeout`]: a request's headers come in one packet;
/// 2 s allows for a slow link and a lost packet.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// Default for [`HttpConfig::min_receive_rate`], in bytes per second: what a
/// dial-up link sustains; a slowloris client sends less to hold its connection cheaply.
pub const DEFAULT_MIN_RECEIVE_RATE: u64 = 500;

/// Default for [`HttpConfig::max_in_flight_per_connection`]: more than an agent runs in
/// parallel over one connection, few enough that one connection cannot take the whole
/// server's [`McpLimits::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: usize = 16;

/// HTTP/2 streams one connection may open beyond [`HttpConfig::max_in_flight_per_connection`]:
/// room for the requests that run no tool (`notifications/cancelled` above all, `ping`,
/// `tools/list`) while its calls take every place, so a client can still cancel them on
/// the connection they run on. A call sent on one of these streams is refused as busy.
pub const CONTROL_STREAMS: usize = 4;

/// Default for [`HttpConfig::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long the request body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often an open event stream gets a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Messages waiting to go out on one event stream.
const STREAM_QUEUE: usize = 64;

/// JSON-RPC's "server error" code, for refusals of the transport (busy, no session).
const SERVER_ERROR: i64 = -32000;

/// The server's settings. [`HttpConfig::new`] gives the documented defaults; each
/// `with_` setter says its default and bound (a value out of bounds is refused by
/// [`HttpServer::bind`] and [`McpService::new`] with [`HttpError::Config`]), and the
/// getter of the same name reads it back.
///
/// ```
/// use std::time::Duration;
/// use toolhost_mcp::http::{HttpConfig, SessionKey};
///
/// let config = HttpConfig::new(Some(SessionKey::random()?))
///     .with_allowed_hosts(vec!["mcp.example.com".into()])
///     .with_max_sessions(64)
///     .with_shutdown_grace(Duration::from_secs(3));
/// assert_eq!(config.max_sessions(), 64);
/// assert_eq!(config.max_connections(), toolhost_mcp::http::DEFAULT_MAX_CONNECTIONS);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) tokens: Option<Tokens>,
    pub(crate) oauth: Option<OAuthConfig>,
    pub(crate) insecure_public: bool,
    pub(crate) limits: McpLimits,
    pub(crate) max_body_bytes: usize,
    pub(crate) max_connections: usize,
    pub(crate) max_pending_per_peer: usize,
    pub(crate) header_timeout: Duration,
    pub(crate) min_receive_rate: u64,
    pub(crate) max_in_flight_per_connection: usize,
    pub(crate) sessions: SessionSettings,
    pub(crate) shutdown_grace: Duration,
    pub(crate) list_changed: bool,
    pub(crate) asking: crate::elicit::Asking,
    pub(crate) policy: Option<Arc<crate::policy::LivePolicy>>,
    pub(crate) shared_tasks: Option<crate::state::SharedTasks>,
}

impl HttpConfig {
    /// The defaults, keeping sessions under `key` (`None`: stateless).
    pub fn new(key: Option<SessionKey>) -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            tokens: None,
            oauth: None,
            insecure_public: false,
            limits: McpLimits::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_pending_per_peer: DEFAULT_MAX_PENDING_PER_PEER,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            min_receive_rate: DEFAULT_MIN_RECEIVE_RATE,
            max_in_flight_per_connection: DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
            sessions: SessionSettings::new(key),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            list_changed: false,
            asking: crate::elicit::Asking::default(),
            policy: None,
            shared_tasks: None,
        }
    }

    /// Host names (no port) the `Host` header may name besides the loopback names
    /// (`localhost`, `127.0.0.1`, `[::1]`) and the bound address; `*` allows any. None
    /// by default.
    #[must_use]
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// Origins (`https://app.example.com`) a browser may call from besides the server's
    /// own; `*` allows any. Requests without `Origin` (not from a browser) pass. None by
    /// default.
    #[must_use]
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins = origins;
        self
    }

    /// The bearer tokens accepted; `None` (the default): no authentication (loopback
    /// only, unless [`HttpConfig::with_insecure_public`]).
    #[must_use]
    pub fn with_tokens(mut self, tokens: Option<Tokens>) -> Self {
        self.tokens = tokens;
        self
    }

    /// OAuth 2.1 access tokens (JWTs) accepted beside the static tokens, and the
    /// protected resource metadata [`HttpServer`] serves at
    /// [`RESOURCE_METADATA_PATH`] (see [`OAuthConfig`]); `None` (the default): none.
    /// Counts as authentication for a public address.
    #[must_use]
    pub fn with_oauth(mut self, oauth: Option<OAuthConfig>) -> Self {
        self.oauth = oauth;
        self
    }

    /// Serve an address that is not loopback without tokens (only behind a proxy that
    /// authenticates). Off by default.
    #[must_use]
    pub fn with_insecure_public(mut self, insecure_public: bool) -> Self {
        self.insecure_public = insecure_public;
        self
    }

    /// The tool calls of the whole server: in flight, and their argument bytes
    /// ([`McpLimits`], its defaults by default; its queue limits are for stdio only).
    #[must_use]
    pub fn with_limits(mut self, limits: McpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The largest request body: [`DEFAULT_MAX_BODY_BYTES`] (4 MiB) by default, at
    /// least 1; past it, `413`.
    #[must_use]
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Connections served at once ([`HttpServer`] only): [`DEFAULT_MAX_CONNECTIONS`]
    /// (256) by default, at least 1. When all are taken, a new connection pushes out
    /// one that has not had a request pass the checks (see the module docs).
    #[must_use]
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Connections one peer (an IPv4 address, an IPv6 /64) may hold before a request on
    /// each has passed the Host, Origin and token checks ([`HttpServer`] only); further
    /// ones are answered `503` and closed. [`DEFAULT_MAX_PENDING_PER_PEER`] (32) by
    /// default, at least 1. Connections whose requests passed do not count, so a proxy
    /// in front, whose connections all come from one address, does not meet it.
    #[must_use]
    pub fn with_max_pending_per_peer(mut self, connections: usize) -> Self {
        self.max_pending_per_peer = connections;
        self
    }

    /// How long a request's headers may take from the connection's opening (first
    /// request) or from their first byte (later ones) before progress extends it
    /// ([`HttpConfig::with_min_receive_rate`]); also the grace a request body gets
    /// ([`HttpServer`] only). [`DEFAULT_HEADER_TIMEOUT`] (2 s) by default; more than 0,
    /// at most 10 s (the most headers ever get).
    #[must_use]
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// Bytes per second that extend the header and body clocks ([`HttpServer`] only):
    /// each byte received buys `1 / rate` seconds, so a client sending at least this
    /// fast is not cut off. [`DEFAULT_MIN_RECEIVE_RATE`] (500) by default; at least 1.
    #[must_use]
    pub fn with_min_receive_rate(mut self, bytes_per_second: u64) -> Self {
        self.min_receive_rate = bytes_per_second;
        self
    }

    /// Tool calls and subscriptions running at once on one connection ([`HttpServer`]
    /// only): [`DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION`] (16) by default, at least 1.
    /// HTTP/2 allows this many streams plus [`CONTROL_STREAMS`].
    #[must_use]
    pub fn with_max_in_flight_per_connection(mut self, requests: usize) -> Self {
        self.max_in_flight_per_connection = requests;
        self
    }

    /// The most sessions this process holds in memory
    /// ([`SessionSettings::with_max_sessions`]): [`DEFAULT_MAX_SESSIONS`] (1024) by
    /// default, at least 1.
    #[must_use]
    pub fn with_max_sessions(mut self, sessions: usize) -> Self {
        self.sessions = self.sessions.with_max_sessions(sessions);
        self
    }

    /// How long running calls get to finish at shutdown: [`DEFAULT_SHUTDOWN_GRACE`]
    /// (10 s) by default, any duration (0: cancelled at once).
    #[must_use]
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Whether the tools change while serving (hot reload, `--watch`): clients are then
    /// told (`notifications/tools/list_changed` on a session's GET stream, or a
    /// `subscriptions/listen` stream) and the capability says `listChanged: true`. Off
    /// by default.
    #[must_use]
    pub fn with_list_changed(mut self, list_changed: bool) -> Self {
        self.list_changed = list_changed;
        self
    }

    /// Serve under a per-principal `policy` ([`crate::policy`]): a client the policy
    /// gives no profile is refused with 403, and a `tools/call` over its principal's
    /// calls-per-minute or concurrent-calls quota with 429 and `Retry-After`. When the
    /// policy's quotas are also counted across processes
    /// ([`Quotas::share`](crate::policy::quota::Quotas::share), `--state`), a call of a
    /// principal with a calls-per-minute quota is counted there (one round trip) before
    /// it reaches its session: over the shared limit 429, the counter unable to count
    /// 503 (fail closed); principals without that quota never wait on it. What each
    /// session is offered is for the [`Registries`] to build from the same policy. None
    /// by default: every token is treated alike.
    #[must_use]
    pub fn with_policy(mut self, policy: Arc<crate::policy::LivePolicy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Keep the tasks of callers without a session (2026-07-28 requests, and 2025-11-25
    /// ones on a stateless server) in `shared` too, so every process given the same
    /// backend can get, fetch, list and cancel them
    /// (`--state`; docs/deploy.md "Scale-out: tasks shared through Redis"). Tasks of a
    /// session stay in the process holding the session. None by default.
    #[must_use]
    pub fn with_shared_tasks(mut self, shared: crate::state::SharedTasks) -> Self {
        self.shared_tasks = Some(shared);
        self
    }

    /// Ask the session's user before a call the `policy` names runs (human approval by
    /// policy, through elicitation on the call's event stream; docs/protocol.md). A
    /// client that cannot ask gets such calls refused, never run. None by default.
    #[must_use]
    pub fn with_approval(mut self, policy: crate::ApprovalPolicy) -> Self {
        self.asking = self.asking.with_approval(policy);
        self
    }

    /// How long one question to the client's user (elicitation, approval) waits for its
    /// answer: [`DEFAULT_CONFIRM_TIMEOUT`](crate::elicit::DEFAULT_CONFIRM_TIMEOUT)
    /// (120 s) by default, at most
    /// [`MAX_CONFIRM_TIMEOUT`](crate::elicit::MAX_CONFIRM_TIMEOUT) (longer is cut to it).
    #[must_use]
    pub fn with_confirm_timeout(mut self, timeout: Duration) -> Self {
        self.asking.timeout = timeout.min(crate::elicit::MAX_CONFIRM_TIMEOUT);
        self
    }

    /// The extra host names allowed ([`HttpConfig::with_allowed_hosts`]).
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    /// The extra origins allowed ([`HttpConfig::with_allowed_origins`]).
    pub fn allowed_origins(&self) -> &[String] {
        &self.allowed_origins
    }

    /// The bearer tokens ([`HttpConfig::with_tokens`]).
    pub fn tokens(&self) -> Option<&Tokens> {
        self.tokens.as_ref()
    }

    /// The OAuth settings ([`HttpConfig::with_oauth`]).
    pub fn oauth(&self) -> Option<&OAuthConfig> {
        self.oauth.as_ref()
    }

    /// Whether a public address may be served without tokens
    /// ([`HttpConfig::with_insecure_public`]).
    pub fn insecure_public(&self) -> bool {
        self.insecure_public
    }

    /// The server-wide call limits ([`HttpConfig::with_limits`]).
    pub fn limits(&self) -> McpLimits {
        self.limits
    }

    /// The largest request body ([`HttpConfig::with_max_body_bytes`]).
    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    /// Connections served at once ([`HttpConfig::with_max_connections`]).
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Pending connections per peer ([`HttpConfig::with_max_pending_per_peer`]).
    pub fn max_pending_per_peer(&self) -> usize {
        self.max_pending_per_peer
    }

    /// The header clock ([`HttpConfig::with_header_timeout`]).
    pub fn header_timeout(&self) -> Duration {
        self.header_timeout
    }

    /// The rate that extends the clocks ([`HttpConfig::with_min_receive_rate`]).
    pub fn min_receive_rate(&self) -> u64 {
        self.min_receive_rate
    }

    /// Requests in flight per connection
    /// ([`HttpConfig::with_max_in_flight_per_connection`]).
    pub fn max_in_flight_per_connection(&self) -> usize {
        self.max_in_flight_per_connection
    }

    /// How sessions are kept (the key from [`HttpConfig::new`],
    /// [`HttpConfig::with_max_sessions`]).
    pub fn sessions(&self) -> &SessionSettings {
        &self.sessions
    }

    /// The most sessions held ([`HttpConfig::with_max_sessions`]).
    pub fn max_sessions(&self) -> usize {
        self.sessions.max_sessions
    }

    /// The shutdown grace ([`HttpConfig::with_shutdown_grace`]).
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }

    /// Whether clients are told of tool changes ([`HttpConfig::with_list_changed`]).
    pub fn list_changed(&self) -> bool {
        self.list_changed
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

/// What the handlers know of the connection a request came on: its share of the limits,
/// its peer, and its entry in [`HttpServer`]'s connection table. A request that reaches
/// a mounted [`McpService`] through another server has none of it (see
/// [`HttpConnection::of`]).
#[derive(Clone)]
struct HttpConnection {
    /// Places for the connection's tool calls and subscriptions
    /// ([`HttpConfig::max_in_flight_per_connection`]); `None`: the server in front
    /// bounds its connections' streams itself.
    requests: Option<Arc<Semaphore>>,
    /// The peer, when known (for the logs).
    peer: Peer,
    /// Its entry in the connection table: marks it admitted once a request passes.
    slot: Option<conns::Handle>,
}

/// A request's peer in the logs: its address, or `unknown` when the server in front
/// did not give it.
#[derive(Clone, Copy)]
struct Peer(Option<SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => addr.fmt(f),
            None => f.write_str("unknown"),
        }
    }
}

impl HttpConnection {
    /// The connection `extensions` name: the one [`HttpServer`] put there, else (a
    /// mounted service) one with no places of its own and the peer axum's
    /// `ConnectInfo` gives, if the application serves with it.
    fn of(extensions: &mut axum::http::Extensions) -> Self {
        if let Some(connection) = extensions.remove::<Self>() {
            return connection;
        }
        Self {
            requests: None,
            peer: Peer(
                extensions
                    .get::<axum::extract::ConnectInfo<SocketAddr>>()
                    .map(|info| info.0),
            ),
            slot: None,
        }
    }

    /// A place for one call or subscription on this connection; `Err` when all are
    /// taken. `Ok(None)`: the connection has no places of its own to count.
    fn place(&self) -> Result<Option<OwnedSemaphorePermit>, ()> {
        match &self.requests {
            Some(requests) => Arc::clone(requests)
                .try_acquire_owned()
                .map(Some)
                .map_err(|_| ()),
            None => Ok(None),
        }
    }

    /// A request on it passed the Host, Origin (and, `authenticated`, token) checks.
    fn admitted(&self, authenticated: bool) {
        if let Some(slot) = &self.slot {
            slot.admitted(authenticated);
        }
    }
}

struct App {
    hosts: Option<Vec<String>>,
    origins: Option<Vec<String>>,
    tokens: Option<Tokens>,
    /// The OAuth access token checks, with each issuer's keys.
    oauth: Option<Arc<oauth::Verifier>>,
    max_body_bytes: usize,
    per_connection: usize,
    sessions: Sessions,
    limiter: CallLimiter,
    counters: Arc<Counters>,
    /// How long running calls get at shutdown.
    shutdown_grace: Duration,
    /// Cancelled when shutdown begins: event streams end.
    stopping: CancellationToken,
    /// The per-principal policy, if any ([`HttpConfig::with_policy`]).
    policy: Option<Arc<crate::policy::LivePolicy>>,
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

#[cfg(test)]
mod tests;
