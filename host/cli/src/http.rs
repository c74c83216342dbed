//! `host serve --http ADDR` / `host run --http ADDR`: the flags of the Streamable HTTP
//! transport, and the server they describe (see `toolhost_mcp::http` and docs/deploy.md).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tracing::info;

use toolhost::registry::{Registry, ToolCall};
use toolhost::tools::{register_plan_tool, register_vfs_tools};
use toolhost::vfs::{OsStorage, Storage};
use toolhost_mcp::http::{
    HttpConfig, HttpServer, Registries, RegistryFactory, SessionInfo, SessionKey, Tokens,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_PENDING_PER_PEER, DEFAULT_MAX_SESSIONS,
};
use toolhost_mcp::McpLimits;

use super::args::{PluginFiles, RegistryArgs};
use super::setup::{build_server_registry, vfs_options, Toolset};
use super::units::{parse_duration, parse_size};

/// The placeholder for the session id in `--session-root-template`.
pub(crate) const SESSION_PLACEHOLDER: &str = "{session}";
/// The placeholder for the token's client name in `--session-root-template`.
pub(crate) const CLIENT_PLACEHOLDER: &str = "{client}";

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

/// What `--session-root-template` expands to, checked once at start.
#[derive(Debug, Clone)]
struct RootTemplate {
    template: String,
    /// The part before the first placeholder's path component: must exist.
    base: PathBuf,
}

impl RootTemplate {
    fn parse(template: &str) -> anyhow::Result<Self> {
        let has_session = template.contains(SESSION_PLACEHOLDER);
        let has_client = template.contains(CLIENT_PLACEHOLDER);
        if !has_session && !has_client {
            bail!("--session-root-template {template} has neither {SESSION_PLACEHOLDER} nor {CLIENT_PLACEHOLDER}, so every session would share one root; put {SESSION_PLACEHOLDER} (one root per session) or {CLIENT_PLACEHOLDER} (one per token) in it, e.g. /srv/mcp/{SESSION_PLACEHOLDER}");
        }
        let stripped = template
            .replace(SESSION_PLACEHOLDER, "")
            .replace(CLIENT_PLACEHOLDER, "");
        if stripped.contains(['{', '}']) {
            bail!("--session-root-template {template} has a placeholder other than {SESSION_PLACEHOLDER} and {CLIENT_PLACEHOLDER}");
        }
        let path = Path::new(template);
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!("--session-root-template {template} has a `..` component; give the directory plainly");
        }
        let mut base = PathBuf::new();
        for component in path.components() {
            if component.as_os_str().to_string_lossy().contains('{') {
                break;
            }
            base.push(component);
        }
        if base.as_os_str().is_empty() {
            base.push(".");
        }
        if !base.is_dir() {
            bail!(
                "the directory of --session-root-template, {}, does not exist; create it first (each session's root is made inside it)",
                base.display()
            );
        }
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        Ok(Self {
            template: template.to_owned(),
            base,
        })
    }

    /// The root of `info`'s session. The values are checked by the server (hex session
    /// ids, `A-Za-z0-9_-` client names), so no path leaves the base.
    fn root(&self, info: &SessionInfo) -> Result<PathBuf, String> {
        let mut root = self.template.clone();
        if root.contains(SESSION_PLACEHOLDER) {
            let id = info
                .id
                .as_deref()
                .ok_or("a {session} root needs sessions; drop --stateless")?;
            root = root.replace(SESSION_PLACEHOLDER, id);
        }
        if root.contains(CLIENT_PLACEHOLDER) {
            let client = info
                .client
                .as_deref()
                .ok_or("a {client} root needs a named token (TOKEN NAME in --auth-token-file)")?;
            root = root.replace(CLIENT_PLACEHOLDER, client);
        }
        Ok(PathBuf::from(root))
    }
}

/// Creates `dir` (and what is missing above it, under the base) readable by this user
/// only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// The per-session registries of `--session-root-template`: each session's built-in
/// file tools over its own root, the plan tool, and the plugins' tools (loaded once,
/// shared; they get no file access, which would be the process's, not the session's).
fn per_session(
    args: &RegistryArgs,
    template: RootTemplate,
    plugins: Arc<Registry>,
) -> RegistryFactory {
    let args = args.clone();
    Arc::new(move |info: &SessionInfo| {
        let root = template.root(info)?;
        create_private_dir(&root).map_err(|err| {
            format!(
                "cannot create the session's storage root {}: {err}",
                root.display()
            )
        })?;
        let storage = OsStorage::open(&root).map_err(|err| {
            format!(
                "cannot open the session's storage root {}: {err}",
                root.display()
            )
        })?;
        let registry = Registry::new().with_call_timeout(args.timeout);
        if !args.no_builtins {
            if let Some(options) = vfs_options(&args, Some(Arc::new(storage) as Arc<dyn Storage>)) {
                register_vfs_tools(&registry, options).map_err(|err| err.to_string())?;
            }
        }
        if args.plan {
            register_plan_tool(&registry).map_err(|err| err.to_string())?;
        }
        forward(&registry, &plugins).map_err(|err| err.to_string())?;
        info!(
            session_id = info.id.as_deref().unwrap_or("-"),
            client = info.client.as_deref().unwrap_or("-"),
            root = %root.display(),
            "session storage root ready"
        );
        Ok(Arc::new(registry))
    })
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
            let template = RootTemplate::parse(template)?;
            if template.template.contains(SESSION_PLACEHOLDER) && http.stateless {
                bail!("--session-root-template with {SESSION_PLACEHOLDER} needs sessions; drop --stateless, or use {CLIENT_PLACEHOLDER} alone");
            }
            if template.template.contains(CLIENT_PLACEHOLDER)
                && !tokens.as_ref().is_some_and(Tokens::all_named)
            {
                bail!("--session-root-template with {CLIENT_PLACEHOLDER} needs --auth-token-file whose every line names its client (TOKEN NAME)");
            }
            if registry_args.plugin_files != PluginFiles::None {
                bail!("--plugin-files {:?} cannot be combined with --session-root-template: a plugin's file access would be over the process's --root, shared by every session; drop one of them", registry_args.plugin_files);
            }
            if let (Some(cache), false) = (&registry_args.cache_dir, registry_args.no_cache) {
                toolhost_plugin::cache::check_cache_dir(
                    cache,
                    std::slice::from_ref(&template.base),
                )?;
            }
            // The plugins (and only them) are loaded once; each session gets its own
            // built-in tools over its own root.
            let mut shared = registry_args.clone();
            shared.no_builtins = true;
            shared.plan = false;
            let toolset = build_server_registry(&shared)?;
            info!(base = %template.base.display(), template = %template.template, "one storage root per session");
            let factory = per_session(registry_args, template, Arc::clone(&toolset.registry));
            (Registries::PerSession(factory), toolset)
        }
    };
    let mut config = HttpConfig::new(key);
    config.tokens = tokens;
    config.insecure_public = http.insecure_public;
    config.allowed_hosts = http.allow_host.clone();
    config.allowed_origins = http.allow_origin.clone();
    config.limits = McpLimits {
        max_in_flight,
        ..McpLimits::default()
    };
    config.max_body_bytes = usize::try_from(http.max_body_bytes).unwrap_or(usize::MAX);
    config.max_connections = http.max_connections;
    config.max_pending_per_peer = http.max_pending_per_peer;
    config.header_timeout = http.header_timeout;
    config.min_receive_rate = http.min_receive_rate;
    config.max_in_flight_per_connection = http.max_in_flight_per_connection;
    config.sessions.max_sessions = http.max_sessions;
    config.shutdown_grace = http.shutdown_grace;
    config.list_changed = watch;
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

    #[test]
    fn templates() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let at = |t: &str| format!("{}/{t}", dir.path().display());
        let template = RootTemplate::parse(&at("{client}/s-{session}")).unwrap();
        assert_eq!(template.base, base);
        let info = SessionInfo {
            id: Some("ab12".into()),
            client: Some("alice".into()),
        };
        assert_eq!(
            template.root(&info).unwrap(),
            PathBuf::from(at("alice/s-ab12"))
        );
        let err = |t: &str| RootTemplate::parse(t).unwrap_err().to_string();
        assert!(err(&at("fixed")).contains("has neither {session} nor {client}"));
        assert!(err(&at("{sesion}")).contains("neither"));
        assert!(err(&at("{session}/{other}")).contains("a placeholder other than"));
        assert!(err(&at("../{session}")).contains("`..`"));
        assert!(err("/does/not/exist/{session}")
            .contains("the directory of --session-root-template, /does/not/exist, does not exist"));
        let stateless = SessionInfo {
            id: None,
            client: None,
        };
        assert!(template.root(&stateless).is_err());
    }
}
