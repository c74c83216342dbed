//! An application with routes of its own that mounts the MCP endpoint on one of them:
//! an axum app answering `/health`, and the built-in file tools over a root served as
//! MCP (Streamable HTTP) at `/agents/mcp` by [`McpService`], beside it.
//!
//! ```sh
//! cargo run -p toolhost-mcp --features http --example axum_mount -- [ROOT] [ADDR]
//! ```
//!
//! ROOT defaults to a fresh temporary directory, ADDR to `127.0.0.1:0` (a free port).
//! It prints the address on stdout, then serves until stdin ends (or Ctrl-C), when it
//! shuts down gracefully. `tests/http_clients/mounted.py` drives it with the official
//! MCP Python SDK (`scripts/interop`).
//!
//! The application gives what [`McpService`] leaves to it (see its docs): here axum's
//! own server on a loopback address; on a public one, its connection limits and header
//! timeout, or a proxy in front, and tokens ([`HttpConfig::with_tokens`]).
#![allow(
    clippy::print_stdout,
    reason = "an example program: it shows what it does on stdout"
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use toolhost::registry::Registry;
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::OsStorage;
use toolhost_mcp::http::{HttpConfig, McpService, Registries, SessionKey};

/// Where the application mounts the endpoint.
const MCP_ROUTE: &str = "/agents/mcp";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let temporary;
    let root = match args.next() {
        Some(root) => PathBuf::from(root),
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().to_owned()
        }
    };
    let addr: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:0").parse()?;

    let registry = Registry::new();
    register_vfs_tools(
        &registry,
        VfsToolOptions::new(Arc::new(OsStorage::open(&root)?)),
    )?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let mcp = McpService::new(
        HttpConfig::new(Some(SessionKey::random()?)),
        Registries::shared(Arc::new(registry)),
        addr,
    )?;
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route_service(MCP_ROUTE, mcp.clone());

    println!(
        "listening on http://{addr}: MCP at http://{addr}{MCP_ROUTE}, health at http://{addr}/health, files in {}",
        root.display()
    );
    // Stop when stdin ends (the parent closed it); Ctrl-C ends the process.
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut sink = Vec::new();
            let _ = tokio::io::stdin().read_to_end(&mut sink).await;
            stop.cancel();
        }
    });
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop.clone().cancelled_owned());
    // At the signal, the server's drain and the endpoint's shutdown together: its event
    // streams end, so the connections holding them close.
    let (served, ()) = tokio::join!(async { served.await }, async {
        stop.cancelled().await;
        mcp.shutdown().await;
    });
    served?;
    println!("stopped");
    Ok(())
}
