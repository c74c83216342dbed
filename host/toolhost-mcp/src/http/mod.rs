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
mod conns;
mod guard;
mod handlers;
mod server;
mod sessions;
mod streams;

pub use guard::{
    valid_client_name, Client, TokenFileError, Tokens, MAX_CLIENT_NAME_LEN, MIN_TOKEN_LEN,
};
pub use server::{HttpServer, StatsHandle};
pub use sessions::{
    Registries, RegistryFactory, SessionInfo, SessionKey, SessionKeyError, SessionSettings,
    DEFAULT_MAX_SESSIONS, SESSION_ID_LEN,
};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::{RequestId, RpcError, INVALID_REQUEST};
use crate::server::McpLimits;
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
    /// Connections served at once, [`DEFAULT_MAX_CONNECTIONS`] by default. When all are
    /// taken, a new connection pushes out one that has not had a request pass the checks
    /// (see the module docs).
    pub max_connections: usize,
    /// Connections one peer (an IPv4 address, an IPv6 /64) may hold before a request on
    /// each has passed the Host, Origin and token checks; further ones are answered `503`
    /// and closed. [`DEFAULT_MAX_PENDING_PER_PEER`] by default; at least 1. Connections
    /// whose requests passed do not count, so a proxy in front, whose connections all
    /// come from one address, does not meet it.
    pub max_pending_per_peer: usize,
    /// How long a request's headers may take from the connection's opening (first
    /// request) or from their first byte (later ones) before progress extends it
    /// ([`HttpConfig::min_receive_rate`]); also the grace a request body gets.
    /// [`DEFAULT_HEADER_TIMEOUT`] by default; more than 0, at most 10 s (the most headers
    /// ever get).
    pub header_timeout: Duration,
    /// Bytes per second that extend the header and body clocks: each byte received buys
    /// `1 / rate` seconds, so a client sending at least this fast is not cut off.
    /// [`DEFAULT_MIN_RECEIVE_RATE`] by default; at least 1.
    pub min_receive_rate: u64,
    /// Tool calls and subscriptions running at once on one connection,
    /// [`DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION`] by default. HTTP/2 allows this many
    /// streams plus [`CONTROL_STREAMS`].
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
            max_pending_per_peer: DEFAULT_MAX_PENDING_PER_PEER,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            min_receive_rate: DEFAULT_MIN_RECEIVE_RATE,
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
    /// Its entry in the connection table: marks it admitted once a request passes.
    slot: conns::Handle,
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
    /// Every connection being served.
    connections: Arc<conns::Table>,
    /// Cancelled when shutdown begins: event streams end.
    stopping: CancellationToken,
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
