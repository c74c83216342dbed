//! The accept loop of [`HttpServer::serve`](super::HttpServer::serve): the connection
//! table of `conns.rs` (slots, per-peer cap, clocks), per-connection limits and graceful
//! shutdown, around the [`McpService`] that answers each request.
//!
//! The loop takes a connection whenever the table has room for it (a free slot, or
//! one to push out), so a flood of half-open connections never leaves a new client in
//! the kernel's queue. When accepting fails for want of file descriptors (`EMFILE`,
//! `ENFILE`), it pushes out one connection that may be (freeing its descriptor) and
//! tries again 10 ms later, or waits 100 ms when there is none; it never stops serving
//! and never spins. The warning is logged once a minute at most.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use super::conns::{self, Answering, Peer, Receiving, Table, Tracked, HEADER_TIME_LIMIT};
use super::oauth::RESOURCE_METADATA_PATH;
use super::service::McpService;
use super::LOG_TARGET;
use super::{HttpConfig, HttpConnection, HttpError, CONTROL_STREAMS, KEEP_ALIVE, MCP_PATH};

/// The connection table `config` describes; [`HttpError::Config`] for a setting out of
/// range.
pub(super) fn table(config: &HttpConfig) -> Result<Arc<Table>, HttpError> {
    for (value, what) in [
        (config.max_connections, "the connection limit"),
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
    Ok(Table::new(conns::Settings {
        max_connections: config.max_connections,
        max_pending_per_peer: config.max_pending_per_peer,
        header_timeout: config.header_timeout,
        min_receive_rate: config.min_receive_rate,
    }))
}

/// Serves `service` on the connections `listener` accepts, within `table`, until
/// `shutdown` completes; then shuts down gracefully (see the module docs of `http`).
pub(super) async fn run(
    listener: TcpListener,
    addr: SocketAddr,
    service: McpService,
    table: Arc<Table>,
    shutdown: impl Future<Output = ()>,
) {
    let app = Arc::clone(&service.app);
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
            u32::try_from(app.per_connection.saturating_add(CONTROL_STREAMS)).unwrap_or(u32::MAX),
        )
        .keep_alive_interval(Some(KEEP_ALIVE));
    let graceful = GracefulShutdown::new();
    let settings = table.settings();
    info!(
        target: LOG_TARGET,
        %addr,
        path = MCP_PATH,
        auth = app.tokens.is_some(),
        oauth = app.oauth.is_some(),
        sessions = app.sessions.stateful(),
        max_connections = settings.max_connections,
        max_pending_per_peer = settings.max_pending_per_peer,
        "MCP server ready: Streamable HTTP on http://{addr}{MCP_PATH}"
    );
    let mut warned: Option<Instant> = None;
    let metadata = service.resource_metadata().map(bytes::Bytes::from);
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
        let conn = HttpConnection {
            requests: Some(Arc::new(Semaphore::new(app.per_connection))),
            peer: super::Peer(Some(peer)),
            slot: Some(slot.handle.clone()),
        };
        let mcp = service.clone();
        let metadata = metadata.clone();
        let slot_handle = slot.handle.clone();
        let service =
            hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                use hyper::body::Body as _;
                let http2 = request.version() == axum::http::Version::HTTP_2;
                let (answering, receiving) =
                    slot_handle.request(http2, !request.body().is_end_stream());
                request.extensions_mut().insert(conn.clone());
                let request = request.map(|body| {
                    Body::new(Tracked::<_, Receiving> {
                        body,
                        guard: receiving,
                    })
                });
                // Straight to the service, whose methods answer at MCP_PATH only (one
                // routing step fewer than an axum router in front of it).
                let path = request.uri().path();
                // With OAuth, the protected resource metadata (RFC 9728): at the
                // well-known path, and suffixed with the MCP path, as clients of the
                // MCP authorization spec look for it.
                let document = metadata.as_ref().filter(|_| {
                    path == RESOURCE_METADATA_PATH
                        || path.strip_prefix(RESOURCE_METADATA_PATH) == Some(MCP_PATH)
                });
                let document = document.map(|document| {
                    if request.method() == axum::http::Method::GET {
                        super::json(StatusCode::OK, document.clone())
                    } else {
                        (
                            StatusCode::METHOD_NOT_ALLOWED,
                            [(axum::http::header::ALLOW, "GET")],
                        )
                            .into_response()
                    }
                });
                let answer = (document.is_none() && path == MCP_PATH)
                    .then(|| tower_service::Service::call(&mut mcp.clone(), request));
                async move {
                    let response = match (answer, document) {
                        (Some(answer), _) => answer.await?,
                        (None, Some(document)) => document,
                        (None, None) => StatusCode::NOT_FOUND.into_response(),
                    };
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
    service.begin_shutdown();
    tokio::select! {
        () = graceful.shutdown() => info!(target: LOG_TARGET, "every connection closed; MCP server stopped"),
        () = tokio::time::sleep(app.shutdown_grace) => service.cancel_calls().await,
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
