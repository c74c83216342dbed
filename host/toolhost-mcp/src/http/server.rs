//! The listener: [`HttpServer::bind`] checks the settings and binds, [`HttpServer::serve`]
//! routes [`MCP_PATH`] to the handlers and runs the accept loop (the connection table of
//! `conns.rs`: slots, per-peer cap, clocks; per-connection limits, graceful shutdown);
//! [`StatsHandle`] reads its counters.
//!
//! The accept loop takes a connection whenever the table has room for it (a free slot, or
//! one to push out), so a flood of half-open connections never leaves a new client in
//! the kernel's queue. When accepting fails for want of file descriptors (`EMFILE`,
//! `ENFILE`), it pushes out one connection that may be (freeing its descriptor) and
//! tries again 10 ms later, or waits 100 ms when there is none; it never stops serving
//! and never spins. The warning is logged once a minute at most.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::routing::post;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::server::McpStats;
use crate::session::{CallLimiter, Counters};

use super::conns::{self, Answering, Peer, Receiving, Table, Tracked, HEADER_TIME_LIMIT};
use super::guard::{host_name, normalize_origin};
use super::handlers::{delete_mcp, get_mcp, post_mcp};
use super::sessions::{Registries, Sessions};
use super::LOG_TARGET;
use super::{App, Conn, HttpConfig, HttpError, CONTROL_STREAMS, KEEP_ALIVE, MCP_PATH};

/// A bound Streamable HTTP server.
pub struct HttpServer {
    pub(super) app: Arc<App>,
    listener: TcpListener,
    addr: SocketAddr,
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
            (
                config.max_pending_per_peer,
                "the per-peer pending connection limit",
            ),
            (
                usize::try_from(config.min_receive_rate).unwrap_or(usize::MAX),
                "the minimum receive rate",
            ),
        ] {
            if value == 0 {
                return Err(HttpError::Config(format!(
                    "{what} is 0, which would serve nothing; give at least 1"
                )));
            }
        }
        if config.header_timeout.is_zero() || config.header_timeout > HEADER_TIME_LIMIT {
            return Err(HttpError::Config(format!(
                "the header timeout is {:?}; give more than 0 and at most {HEADER_TIME_LIMIT:?}",
                config.header_timeout
            )));
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
            connections: Table::new(conns::Settings {
                max_connections: config.max_connections,
                max_pending_per_peer: config.max_pending_per_peer,
                header_timeout: config.header_timeout,
                min_receive_rate: config.min_receive_rate,
            }),
            stopping: CancellationToken::new(),
        };
        Ok(Self {
            app: Arc::new(app),
            listener,
            addr,
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
            shutdown_grace,
        } = self;
        let router = Router::new()
            .route(MCP_PATH, post(post_mcp).get(get_mcp).delete(delete_mcp))
            .with_state(Arc::clone(&app));
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        // The header clock is the table's (it also covers a connection that sends
        // nothing, which hyper's would not see while it waits to tell HTTP/1 from 2).
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(None);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(
                u32::try_from(app.per_connection.saturating_add(CONTROL_STREAMS))
                    .unwrap_or(u32::MAX),
            )
            .keep_alive_interval(Some(KEEP_ALIVE));
        let table = Arc::clone(&app.connections);
        let graceful = GracefulShutdown::new();
        let settings = table.settings();
        info!(
            target: LOG_TARGET,
            %addr,
            path = MCP_PATH,
            auth = app.tokens.is_some(),
            sessions = app.sessions.stateful(),
            max_connections = settings.max_connections,
            max_pending_per_peer = settings.max_pending_per_peer,
            "MCP server ready: Streamable HTTP on http://{addr}{MCP_PATH}"
        );
        let mut warned: Option<Instant> = None;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = table.room() => {}
                () = &mut shutdown => break,
            }
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        let out_of_files = out_of_files(&err);
                        let evicted = out_of_files && table.evict_one();
                        if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                            warned = Some(Instant::now());
                            warn!(target: LOG_TARGET, connections = table.len(), "accepting a connection failed: {err}; retrying{}", if out_of_files { " (raise the open-file limit, `ulimit -n`, or lower --max-connections)" } else { "" });
                        }
                        tokio::time::sleep(Duration::from_millis(if evicted { 10 } else { 100 })).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let slot = match table.open(Peer::of(peer.ip())) {
                Ok(slot) => slot,
                Err(refused) => {
                    debug!(target: LOG_TARGET, %peer, ?refused, "refused a connection");
                    // Best effort: a client that reads before it writes learns why.
                    let _ = stream.try_write(refused.response());
                    continue;
                }
            };
            let conn = Conn {
                requests: Arc::new(Semaphore::new(app.per_connection)),
                peer,
                slot: slot.handle.clone(),
            };
            let router = router.clone();
            let service =
                hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                    use hyper::body::Body as _;
                    let http2 = request.version() == axum::http::Version::HTTP_2;
                    let (answering, receiving) =
                        conn.slot.request(http2, !request.body().is_end_stream());
                    request.extensions_mut().insert(conn.clone());
                    let request = request.map(|body| {
                        Body::new(Tracked::<_, Receiving> {
                            body,
                            guard: receiving,
                        })
                    });
                    let mut router = router.clone();
                    async move {
                        let response = tower_service::Service::call(&mut router, request).await?;
                        Ok::<_, std::convert::Infallible>(response.map(|body| {
                            Body::new(Tracked::<_, Answering> {
                                body,
                                guard: Some(answering),
                            })
                        }))
                    }
                });
            let io = slot.io(stream);
            let connection = builder
                .serve_connection(TokioIo::new(io), service)
                .into_owned();
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                tokio::select! {
                    ended = connection => if let Err(err) = ended {
                        debug!(target: LOG_TARGET, %peer, "connection ended: {err}");
                    },
                    closed = slot.handle.closed() => {
                        debug!(target: LOG_TARGET, %peer, "connection closed: {closed}");
                    }
                }
                drop(slot);
            });
        }
        drop(listener);
        let running = app.counters.calls_running.load(Ordering::SeqCst);
        info!(
            target: LOG_TARGET,
            calls_running = running,
            grace = ?shutdown_grace,
            "shutting down: no new connections; running calls get the grace period to finish"
        );
        app.stopping.cancel();
        tokio::select! {
            () = graceful.shutdown() => info!(target: LOG_TARGET, "every connection closed; MCP server stopped"),
            () = tokio::time::sleep(shutdown_grace) => {
                let running = app.counters.calls_running.load(Ordering::SeqCst);
                warn!(target: LOG_TARGET, calls_running = running, "grace period over: cancelling the calls still running");
                app.sessions.close_all();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }
}

/// Whether an accept failed for want of file descriptors (`EMFILE`, `ENFILE`).
fn out_of_files(err: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        let raw = err.raw_os_error();
        raw == Some(rustix::io::Errno::MFILE.raw_os_error())
            || raw == Some(rustix::io::Errno::NFILE.raw_os_error())
    }
    #[cfg(not(unix))]
    {
        let _ = err;
        false
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

    /// How many connections hold a slot (at most [`HttpConfig::max_connections`]).
    pub fn connections(&self) -> usize {
        self.0.connections.len()
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
