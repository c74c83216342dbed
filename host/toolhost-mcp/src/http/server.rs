//! [`HttpServer`]: the [`McpService`] on a listener of its own, behind the connection
//! protections only the server that accepts the connections can give (`listener.rs`).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::conns::Table;
use super::service::{check, McpService, StatsHandle};
use super::{listener, HttpConfig, HttpError, Registries};

/// A bound Streamable HTTP server: [`McpService`] at [`MCP_PATH`](super::MCP_PATH) on
/// its own listener, with the connection table, header clocks and per-connection limits
/// of [`HttpConfig`] (what a mounted service leaves to its application).
pub struct HttpServer {
    pub(super) service: McpService,
    listener: TcpListener,
    addr: SocketAddr,
    pub(super) table: Arc<Table>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
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
        check(&config, addr)?;
        let table = listener::table(&config)?;
        let bind_error = |source| HttpError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let service = McpService::new(config, registries, addr)?;
        Ok(Self {
            service,
            listener,
            addr,
            table,
        })
    }

    /// Serves until `shutdown` completes, then shuts down gracefully (see the module
    /// docs): returns once every connection closed, or the grace period is over and
    /// the calls still running were cancelled.
    ///
    /// # Errors
    /// None today: accept errors (too many open files) are logged and retried.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), HttpError> {
        listener::run(self.listener, self.addr, self.service, self.table, shutdown).await;
        Ok(())
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle on the server's counters, readable while it serves.
    pub fn stats_handle(&self) -> StatsHandle {
        (self.service.stats_handle()).with_connections(Arc::clone(&self.table))
    }
}
