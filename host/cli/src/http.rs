//! `host serve --http ADDR` / `host run --http ADDR`: the flags of the Streamable HTTP
//! transport, and the server they describe (see `toolhost_mcp::http` and docs/deploy.md).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tracing::info;

use toolhost::registry::{Registry, ToolCall};
use toolhost_mcp::http::{
    HttpConfig, HttpServer, Registries, SessionKey, SessionRootTemplate, Tokens,
    CLIENT_PLACEHOLDER, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_PENDING_PER_PEER,
    DEFAULT_MAX_SESSIONS, SESSION_PLACEHOLDER,
};
use toolhost_mcp::McpLimits;

use super::args::{PluginFiles, RegistryArgs};
use super::setup::{build_server_registry, registry_over, Toolset};
use super::units::{parse_duration, parse_size};

/// The flags of the HTTP transport (all but `--http` need `--http`).
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Serve MCP over Streamable HTTP on this address (e.g. 127.0.0.1:8080, or a port
    /// alone for loopback; port 0 picks a free one) at the path /mcp, instead of stdio.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub http: Option<SocketAddr>,
    /// Require `Authorization: Bearer TOKEN` with a token from this file: one per line,
    /// optionally followed by a space and the client's name (for {client} in
    /// --session-root-template and the logs). At least 16 characters each.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub auth_token_file: Option<PathBuf>,
    /// Serve on an address that is not loopback without --auth-token-file (only behind
    /// a proxy that authenticates).
    #[arg(long, requires = "http")]
    pub insecure_public: bool,
    /// Also answer requests whose Host is NAME (the name clients use, e.g. behind a
    /// proxy); loopback names and the bound address always pass; `*` allows any.
    #[arg(long, value_name = "NAME", value_delimiter = ',', requires = "http")]
    pub allow_host: Vec<String>,
    /// Also accept browser requests from ORIGIN (e.g. `https://app.example.com`); `*`
    /// allows any. Requests without Origin are not browsers' and pass.
    #[arg(long, value_name = "ORIGIN", value_delimiter = ',', requires = "http")]
    pub allow_origin: Vec<String>,
    /// Largest request body (one JSON-RPC message).
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_size, requires = "http")]
    pub max_body_bytes: u64,
    /// Most connections served at once. When all are taken, a new connection pushes out
    /// one that has not yet had a request pass the checks (or, without tokens, one idle
    /// between requests); authenticated connections and those being answered stay.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = parse_count, requires = "http")]
    pub max_connections: usize,
    /// Most connections one address (IPv4; IPv6: one /64) may hold before a request on
    /// each passes the Host, Origin and token checks; more are answered 503 and closed.
    /// Answered connections do not count (a proxy in front never meets it).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PENDING_PER_PEER, value_parser = parse_count, requires = "http")]
    pub max_pending_per_peer: usize,
    /// How long a request's headers may take (from the connection's opening, or from
    /// their first byte on a kept-alive connection), and the grace of its body, before
    /// progress (--min-receive-rate) extends it; at most 10s.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_header_timeout, requires = "http")]
    pub header_timeout: Duration,
    /// Bytes per second that keep a slow request's headers and body coming: each byte
    /// received extends their deadline by 1/RATE s (headers: up to 10s in all).
    #[arg(long, value_name = "BYTES", default_value = "500", value_parser = parse_rate, requires = "http")]
    pub min_receive_rate: u64,
    /// Most tool calls running at once on one connection (and HTTP/2 streams per
    /// connection); past it, 503.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = parse_count, requires = "http")]
    pub max_in_flight_per_connection: usize,
    /// Give each session its own storage root: the built-in file tools of a session work
    /// in this directory, with {session} replaced by the session id and {client} by the
    /// token's client name (e.g. /srv/mcp/{client}/{session}); created 0700 on first use.
    /// Replaces --root for the file tools.
    #[arg(long, value_name = "TEMPLATE", requires = "http")]
    pub session_root_template: Option<String>,
    /// Sign session ids with the secret in this file (at least 32 bytes), so several
    /// host processes given the same file serve each other's sessions. Default: a
    /// random key per process.
    #[arg(
        long,
        value_name = "FILE",
        requires = "http",
        conflicts_with = "stateless"
    )]
    pub session_key_file: Option<PathBuf>,
    /// No sessions: no Mcp-Session-Id, every request served on its own (no GET stream,
    /// no DELETE).
    #[arg(long, requires = "http")]
    pub stateless: bool,
    /// Most sessions held in memory (idle ones are dropped first and come back from
    /// their id).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS, value_parser = parse_count, requires = "http")]
    pub max_sessions: usize,
    /// At SIGTERM or Ctrl-C, how long running calls get to finish before they are
    /// cancelled.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, requires = "http")]
    pub shutdown_grace: Duration,
}

/// `--http`: `IP:PORT`, `[IPv6]:PORT`, `localhost:PORT`, or `PORT` / `:PORT` alone (both
/// 127.0.0.1: a port without an address binds loopback, never every interface).
fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port = text
        .strip_prefix("localhost:")
        .or_else(|| text.strip_prefix(':'))
        .unwrap_or(text);
    if let Ok(port) = port.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Err(format!(
        "\"{text}\" is not an address to listen on; give IP:PORT, e.g. 127.0.0.1:8080 or just 8080 (loopback), [::1]:8080, or 0.0.0.0:8080 (every interface, needs --auth-token-file)"
    ))
}

/// A whole number of at least 1.
fn parse_count(text: &str) -> Result<usize, String> {
    let n: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("\"{text}\" is not a whole number"))?;
    if n == 0 {
        return Err("0 would serve nothing; give at least 1".to_owned());
    }
    Ok(n)
}

/// `--header-timeout`: a duration of more than 0 and at most 10 s.
fn parse_header_timeout(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration.is_zero() || duration > Duration::from_secs(10) {
        return Err(format!(
            "\"{text}\" is not a header timeout; give more than 0 and at most 10s (e.g. 2s)"
        ));
    }
    Ok(duration)
}

/// `--min-receive-rate`: bytes per second, at least 1 (`500`, `1KiB`).
fn parse_rate(text: &str) -> Result<u64, String> {
    let rate = parse_size(text)?;
    if rate == 0 {
        return Err(
            "0 bytes per second would let a request stall forever; give at least 1 (e.g. 500)"
                .to_owned(),
        );
    }
    Ok(rate)
}

/// Registers in `into` every tool of `from`, each dispatching to `from`.
fn forward(into: &Registry, from: &Arc<Registry>) -> Result<(), toolhost::registry::RegisterError> {
    let tools = from
        .definitions()
        .into_iter()
        .map(|definition| {
            let (from, name) = (Arc::clone(from), definition.name.clone());
            let handler: Arc<dyn toolhost::registry::Handler> = Arc::new(
                move |ctx: toolhost::registry::CallContext,
                      args: toolhost::registry::Arguments,
                      env: toolhost::registry::Environment| {
                    let (from, call) = (Arc::clone(&from), ToolCall::new(name.clone(), args.raw()));
                    async move { from.dispatch(&ctx, &call, &env).await }
                },
            );
            (definition, handler)
        })
        .collect();
    into.register_all(tools)
}

/// Serves the tools over HTTP until SIGTERM or Ctrl-C, then shuts down gracefully.
pub(crate) async fn serve(
    registry_args: &RegistryArgs,
    http: &HttpArgs,
    addr: SocketAddr,
    max_in_flight: NonZeroUsize,
    watch: bool,
) -> anyhow::Result<()> {
    let tokens = match &http.auth_token_file {
        Some(path) => {
            crate::secret_file::warn_if_others_may_access("--auth-token-file", path);
            Some(Tokens::from_file(path)?)
        }
        None => None,
    };
    let key = if http.stateless {
        None
    } else {
        Some(match &http.session_key_file {
            Some(path) => {
                crate::secret_file::warn_if_others_may_access("--session-key-file", path);
                let secret = std::fs::read(path).with_context(|| {
                    format!("cannot read --session-key-file {}", path.display())
                })?;
                SessionKey::from_secret(&secret)
                    .with_context(|| format!("--session-key-file {}", path.display()))?
            }
            None => SessionKey::random()?,
        })
    };
    // Kept alive while serving: the plugin host runs the plugin tools.
    let (registries, toolset): (Registries, Toolset) = match &http.session_root_template {
        None => {
            let toolset = build_server_registry(registry_args)?;
            (Registries::Shared(Arc::clone(&toolset.registry)), toolset)
        }
        Some(template) => {
            if watch {
                bail!("--watch cannot be combined with --session-root-template yet: each session's tools are set up once, when it starts; drop one of them");
            }
            let template = SessionRootTemplate::parse(template)?;
            if template.per_session() && http.stateless {
                bail!("--session-root-template with {SESSION_PLACEHOLDER} needs sessions; drop --stateless, or use {CLIENT_PLACEHOLDER} alone");
            }
            if template.per_client() && !tokens.as_ref().is_some_and(Tokens::all_named) {
                bail!("--session-root-template with {CLIENT_PLACEHOLDER} needs --auth-token-file whose every line names its client (TOKEN NAME)");
            }
            if registry_args.plugin_files != PluginFiles::None {
                bail!("--plugin-files {:?} cannot be combined with --session-root-template: a plugin's file access would be over the process's --root, shared by every session; drop one of them", registry_args.plugin_files);
            }
            if let (Some(cache), false) = (&registry_args.cache_dir, registry_args.no_cache) {
                toolhost_plugin::cache::check_cache_dir(cache, &[template.base().to_owned()])?;
            }
            // The plugins (and only them) are loaded once; each session gets its own
            // built-in tools over its own root.
            let mut shared = registry_args.clone();
            shared.no_builtins = true;
            shared.plan = false;
            let toolset = build_server_registry(&shared)?;
            info!(base = %template.base().display(), template = %template.as_str(), "one storage root per session");
            // Each session's registry: the same set-up as the shared one (over its own
            // root), and the plugins' tools, loaded once, shared (they get no file
            // access, which would be the process's, not the session's).
            let (args, plugins) = (registry_args.clone(), Arc::clone(&toolset.registry));
            let registries = Registries::per_session_root(template, move |storage, _info| {
                let (registry, _) =
                    registry_over(&args, Some(storage)).map_err(|err| format!("{err:#}"))?;
                forward(&registry, &plugins).map_err(|err| err.to_string())?;
                Ok(registry)
            });
            (registries, toolset)
        }
    };
    let config = HttpConfig::new(key)
        .with_tokens(tokens)
        .with_insecure_public(http.insecure_public)
        .with_allowed_hosts(http.allow_host.clone())
        .with_allowed_origins(http.allow_origin.clone())
        .with_limits(McpLimits::new().with_max_in_flight(max_in_flight))
        .with_max_body_bytes(usize::try_from(http.max_body_bytes).unwrap_or(usize::MAX))
        .with_max_connections(http.max_connections)
        .with_max_pending_per_peer(http.max_pending_per_peer)
        .with_header_timeout(http.header_timeout)
        .with_min_receive_rate(http.min_receive_rate)
        .with_max_in_flight_per_connection(http.max_in_flight_per_connection)
        .with_max_sessions(http.max_sessions)
        .with_shutdown_grace(http.shutdown_grace)
        .with_list_changed(watch);
    raise_open_file_limit(http.max_connections);
    let server = HttpServer::bind(addr, config, registries).await?;
    let watching = crate::commands::start_watching(watch, registry_args, &toolset);
    let served = server.serve(shutdown_signal()).await;
    if let Some(watching) = watching {
        watching.abort();
    }
    served?;
    // Stopped by a signal: the optimized compiles get the drain's grace, no more.
    toolset.finish_optimizing(http.shutdown_grace).await;
    Ok(())
}

/// Raises the soft open-file limit to the hard one: each connection holds a descriptor,
/// and the usual soft limit (1024) is below what `--max-connections` plus the connections
/// a flood gets accepted (then pushed out) need, while the hard limit is usually far
/// higher. Logs a warning when the limit stays below `max_connections` plus room for the
/// plugins, the cache and the storage root. (When accepting still fails for want of
/// descriptors, the server pushes out a pending connection and retries; see
/// `toolhost_mcp::http`.)
fn raise_open_file_limit(max_connections: usize) {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut limit = getrlimit(Resource::Nofile);
        let before = limit.current;
        if let (Some(current), Some(maximum)) = (limit.current, limit.maximum) {
            if current < maximum {
                limit.current = Some(maximum);
            }
        } else if limit.current.is_some() && limit.maximum.is_none() {
            // Unlimited hard limit (macOS reports it so, but refuses more than its
            // kernel's maximum): ask for plenty, keep what we had if refused.
            limit.current = Some(1 << 20);
        }
        if limit.current != before {
            match setrlimit(Resource::Nofile, limit) {
                Ok(()) => {
                    tracing::debug!(from = ?before, to = ?limit.current, "raised the open-file limit");
                }
                Err(err) => tracing::debug!("cannot raise the open-file limit: {err}"),
            }
        }
        let now = getrlimit(Resource::Nofile).current;
        let needed = u64::try_from(max_connections)
            .unwrap_or(u64::MAX)
            .saturating_add(64);
        if now.is_some_and(|now| now < needed) {
            tracing::warn!(
                open_files = now,
                max_connections,
                "the open-file limit is below --max-connections plus 64; raise it (`ulimit -n`) or lower --max-connections"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = max_connections;
}

/// SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => info!("SIGTERM: shutting down"),
                    _ = tokio::signal::ctrl_c() => info!("interrupted: shutting down"),
                }
            }
            Err(err) => {
                tracing::warn!("cannot watch for SIGTERM ({err}); stop the server with Ctrl-C");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        info!("interrupted: shutting down");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr("127.0.0.1:8080"),
            Ok("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            parse_addr("localhost:9"),
            Ok("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(parse_addr("[::1]:0"), Ok("[::1]:0".parse().unwrap()));
        // A port alone binds loopback: the safe default.
        assert_eq!(parse_addr("8080"), Ok("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(parse_addr(":0"), Ok("127.0.0.1:0".parse().unwrap()));
        let err = parse_addr("80800").unwrap_err();
        assert!(
            err.starts_with("\"80800\" is not an address to listen on; give IP:PORT"),
            "{err}"
        );
        assert!(parse_addr(":").is_err());
        assert!(parse_addr("example.com:80").is_err());
    }
}
