//! The endpoint as a `tower` service an application mounts on a route of its own
//! ([`McpService`]), and [`StatsHandle`], which reads its counters.
//!
//! The service is an axum [`Router`] over the three methods: [`HttpServer`](super::HttpServer) already
//! served the handlers through one, so the service is what that router was, taken out of
//! the accept loop, and an axum or hyper application mounts it with no adapter
//! (`Router::route_service`, or `hyper::service::service_fn` around `call`).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::future::RouteFuture;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::limits::McpStats;
use crate::session::{CallLimiter, Counters};

use super::guard::{host_name, normalize_origin, Tokens};
use super::handlers::{delete_mcp, get_mcp, post_mcp};
use super::oauth::Verifier;
use super::sessions::{Registries, Sessions};
use super::LOG_TARGET;
use super::{App, HttpConfig, HttpError};

/// The Streamable HTTP endpoint as a [`tower_service::Service`], for an application
/// that mounts it on a route of its own, next to its own routes and middleware
/// (`axum::Router::route_service("/agents/mcp", service)`). It answers `POST`, `GET`
/// and `DELETE` on whatever path it is mounted at (`405` with `Allow` for the others).
/// Cloning is cheap: clones share the sessions and the limits.
///
/// # What holds when mounted
/// Every request gets what [`HttpServer`](super::HttpServer) gives it: the Host and Origin checks, the
/// bearer tokens, the sessions and their limit, the body limit and the body's 30 s, the
/// server-wide limits on calls in flight ([`crate::McpLimits`]), and the shutdown of
/// [`McpService::shutdown`].
///
/// # What is the application's job
/// The protections that belong to the connections, which only the server that accepts
/// them can give, are [`HttpServer::serve`](super::HttpServer::serve)'s and do not come with the service: the
/// connection table ([`HttpConfig::max_connections`], and pushing out connections that
/// never passed the checks when it is full), [`HttpConfig::max_pending_per_peer`], the
/// header and body clocks ([`HttpConfig::header_timeout`],
/// [`HttpConfig::min_receive_rate`]) and [`HttpConfig::max_in_flight_per_connection`]
/// (with the HTTP/2 stream limit that goes with it). An application that mounts the
/// service on a public address gives those itself (its server's header timeout and
/// connection limits, a proxy in front). The peer address in the log lines comes from
/// axum's `ConnectInfo<SocketAddr>` when the application serves with it
/// (`into_make_service_with_connect_info`), else it is `unknown`.
///
/// ```
/// use std::sync::Arc;
/// use axum::{routing::get, Router};
/// use toolhost::registry::Registry;
/// use toolhost_mcp::http::{HttpConfig, McpService, Registries};
///
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let mcp = McpService::new(
///     HttpConfig::new(None),
///     Registries::shared(Arc::new(Registry::new())),
///     listener.local_addr()?,
/// )?;
/// let app = Router::new()
///     .route("/health", get(|| async { "ok" }))
///     .route_service("/agents/mcp", mcp.clone());
/// // The application's own signal (SIGTERM, Ctrl-C); here, at once.
/// let stop = tokio_util::sync::CancellationToken::new();
/// stop.cancel();
/// let served = axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned());
/// // At the signal, the drain and the service's shutdown together: its event streams
/// // end, so the connections holding them close.
/// let (served, ()) = tokio::join!(async { served.await }, async {
///     stop.cancelled().await;
///     mcp.shutdown().await;
/// });
/// served?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct McpService {
    pub(super) app: Arc<App>,
    router: Router,
}

impl std::fmt::Debug for McpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpService")
            .field("sessions", &self.app.sessions.len())
            .finish_non_exhaustive()
    }
}

impl McpService {
    /// The service for `registries` under `config`, for an application listening on
    /// `local_addr`: the Host and Origin checks allow it (besides the loopback names and
    /// [`HttpConfig::allowed_hosts`]). The connection settings of `config` are not used
    /// (see the type's docs).
    ///
    /// # Errors
    /// [`HttpError::PublicWithoutAuth`] for an address that is not loopback without
    /// tokens or [`HttpConfig::insecure_public`]; [`HttpError::Config`] for a limit of 0.
    pub fn new(
        config: HttpConfig,
        registries: Registries,
        local_addr: SocketAddr,
    ) -> Result<Self, HttpError> {
        check(&config, local_addr)?;
        let any = |list: &[String]| list.iter().any(|item| item.trim() == "*");
        let hosts = (!any(&config.allowed_hosts)).then(|| allowed_hosts(&config, local_addr));
        let origins = (!any(&config.allowed_origins)).then(|| {
            let mut origins: Vec<String> = config
                .allowed_origins
                .iter()
                .map(|origin| normalize_origin(origin))
                .collect();
            for host in hosts.iter().flatten() {
                for scheme in ["http", "https"] {
                    origins.push(format!("{scheme}://{host}:{}", local_addr.port()));
                }
            }
            origins
        });
        let counters: Arc<Counters> = Arc::default();
        let oauth = config.oauth.map(|oauth| {
            let names = config
                .tokens
                .as_ref()
                .map(Tokens::names)
                .unwrap_or_default();
            let verifier = Arc::new(Verifier::new(oauth, names));
            verifier.prefetch();
            verifier
        });
        let app = Arc::new(App {
            hosts,
            origins,
            oauth,
            tokens: config.tokens,
            max_body_bytes: config.max_body_bytes,
            per_connection: config.max_in_flight_per_connection,
            sessions: Sessions::new(
                config.sessions,
                registries,
                Arc::clone(&counters),
                config.list_changed,
            )
            .with_asking(config.asking)
            .with_task_limits(&config.limits, config.shared_tasks),
            limiter: CallLimiter::with_counters(&config.limits, Arc::clone(&counters)),
            counters,
            shutdown_grace: config.shutdown_grace,
            stopping: CancellationToken::new(),
            policy: config.policy,
        });
        let router = Router::new().fallback_service(
            post(post_mcp)
                .get(get_mcp)
                .delete(delete_mcp)
                .with_state(Arc::clone(&app)),
        );
        Ok(Self { app, router })
    }

    /// The protected resource metadata document (RFC 9728) with OAuth
    /// ([`HttpConfig::with_oauth`]), as JSON: an application that mounts the service
    /// serves it at [`OAuthConfig::resource_metadata_url`](super::OAuthConfig::resource_metadata_url)'s
    /// path ([`HttpServer`](super::HttpServer) does so itself). `None` without OAuth.
    pub fn resource_metadata(&self) -> Option<String> {
        self.app
            .oauth
            .as_ref()
            .map(|oauth| oauth.config().resource_metadata().to_string())
    }

    /// A handle on the service's counters, readable while it serves.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle {
            app: Arc::clone(&self.app),
            connections: None,
        }
    }

    /// Shuts the endpoint down: session event streams end at once, running calls get
    /// [`HttpConfig::shutdown_grace`] to finish and be answered, and those still running
    /// then are cancelled. Call it when the application's server stops taking new
    /// requests, alongside its drain (axum's `with_graceful_shutdown` waits for every
    /// connection, and an open event stream holds one until this ends it); requests that
    /// come after are still served, but their event streams end at once.
    pub async fn shutdown(&self) {
        self.begin_shutdown();
        let app = &self.app;
        let grace = tokio::time::sleep(app.shutdown_grace);
        tokio::pin!(grace);
        while app.counters.calls_running.load(Ordering::SeqCst) > 0 {
            tokio::select! {
                () = &mut grace => {
                    self.cancel_calls().await;
                    return;
                }
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
        info!(target: LOG_TARGET, "every call answered; MCP endpoint stopped");
    }

    /// The first step of shutting down: event streams end.
    pub(super) fn begin_shutdown(&self) {
        let running = self.app.counters.calls_running.load(Ordering::SeqCst);
        info!(
            target: LOG_TARGET,
            calls_running = running,
            grace = ?self.app.shutdown_grace,
            "shutting down: no new connections; running calls get the grace period to finish"
        );
        self.app.stopping.cancel();
    }

    /// The grace period over: the calls still running are cancelled.
    pub(super) async fn cancel_calls(&self) {
        let running = self.app.counters.calls_running.load(Ordering::SeqCst);
        warn!(target: LOG_TARGET, calls_running = running, "grace period over: cancelling the calls still running");
        self.app.sessions.close_all();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl<B> tower_service::Service<Request<B>> for McpService
where
    B: axum::body::HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RouteFuture<Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        tower_service::Service::call(&mut self.router, request.map(Body::new))
    }
}

/// The settings the service needs in range, and no public address without tokens.
pub(super) fn check(config: &HttpConfig, addr: SocketAddr) -> Result<(), HttpError> {
    if !is_loopback(addr.ip())
        && config.tokens.is_none()
        && config.oauth.is_none()
        && !config.insecure_public
    {
        return Err(HttpError::PublicWithoutAuth { addr });
    }
    if let Some(oauth) = &config.oauth {
        oauth.check().map_err(HttpError::Config)?;
    }
    for (value, what) in [
        (config.max_body_bytes, "the request body limit"),
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
    Ok(())
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
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

/// Reads a running [`McpService`]'s (or [`HttpServer`](super::HttpServer)'s) counters.
#[derive(Clone)]
pub struct StatsHandle {
    app: Arc<App>,
    /// The connection table, when [`HttpServer`](super::HttpServer) serves.
    connections: Option<Arc<super::conns::Table>>,
}

impl std::fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StatsHandle").field(&self.stats()).finish()
    }
}

impl StatsHandle {
    /// The handle of [`HttpServer`](super::HttpServer), which also counts its connections.
    pub(super) fn with_connections(self, table: Arc<super::conns::Table>) -> Self {
        Self {
            connections: Some(table),
            ..self
        }
    }

    /// The counters now (the queue fields stay 0: HTTP answers are not queued).
    pub fn stats(&self) -> McpStats {
        self.app.counters.stats()
    }

    /// How many sessions the server holds in memory.
    pub fn sessions(&self) -> usize {
        self.app.sessions.len()
    }

    /// How many connections hold a slot (at most [`HttpConfig::max_connections`]); 0
    /// for a mounted [`McpService`], whose connections are the application's.
    pub fn connections(&self) -> usize {
        self.connections.as_ref().map_or(0, |table| table.len())
    }
}
