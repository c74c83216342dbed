//! `host serve --http ADDR` / `host run --http ADDR`: the Streamable HTTP server its flags
//! ([`crate::args::http::HttpArgs`]) describe (see `toolhost_mcp::http` and
//! docs/deploy.md).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use tracing::info;

use toolhost::registry::{Registry, ToolCall};
use toolhost::tools::{register_plan_tool, register_vfs_tools};
use toolhost::vfs::{OsStorage, Storage};
use toolhost_mcp::http::{
    HttpConfig, HttpServer, Registries, RegistryFactory, SessionInfo, SessionKey, Tokens,
};
use toolhost_mcp::McpLimits;

use super::args::http::HttpArgs;
use super::args::{PluginFiles, RegistryArgs};
use super::setup::{build_server_registry, start_watching, vfs_options, Toolset};

/// The placeholder for the session id in `--session-root-template`.
pub(crate) const SESSION_PLACEHOLDER: &str = "{session}";
/// The placeholder for the token's client name in `--session-root-template`.
pub(crate) const CLIENT_PLACEHOLDER: &str = "{client}";

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
            warn_if_readable_by_others(path);
            Some(Tokens::from_file(path)?)
        }
        None => None,
    };
    let key = if http.stateless {
        None
    } else {
        Some(match &http.session_key_file {
            Some(path) => {
                warn_if_readable_by_others(path);
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
                toolhost_plugin::check_cache_dir(cache, std::slice::from_ref(&template.base))?;
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
    let watching = start_watching(watch, registry_args, &toolset);
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

/// A secret file others may read is worth a warning (not a refusal: mounted secrets
/// are often 0444 inside a container).
fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(file = %path.display(), "this secret file is readable by other users; chmod 600 it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
