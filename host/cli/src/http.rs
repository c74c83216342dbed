//! `host serve --http ADDR` / `host run --http ADDR`: the Streamable HTTP server its flags
//! ([`crate::args::http::HttpArgs`]) describe (see `toolhost_mcp::http` and
//! docs/deploy.md).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;

use anyhow::{bail, Context};
use tracing::info;

use toolhost::registry::{Registry, ToolCall};
use toolhost_mcp::http::{
    HttpConfig, HttpServer, Registries, SessionKey, SessionRootTemplate, Tokens,
    CLIENT_PLACEHOLDER, SESSION_PLACEHOLDER,
};
use toolhost_mcp::{FileResources, McpLimits};

use super::args::http::HttpArgs;
use super::args::{PluginFiles, RegistryArgs};
use super::setup::{build_server_registry, registry_over, start_watching, Toolset};

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
    tasks: &crate::args::tasks::TaskArgs,
    watch: bool,
    (confirm, confirm_timeout): (&[String], std::time::Duration),
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
    if http.policy.is_some() && http.session_root_template.is_none() {
        crate::policy::check_flags(true, false)?;
    }
    let mut policy: Option<Arc<crate::policy::Policed>> = None;
    // Kept alive while serving: the plugin host runs the plugin tools.
    let (registries, toolset): (Registries, Toolset) = match &http.session_root_template {
        None => {
            let toolset = build_server_registry(registry_args)?;
            crate::observe::install_toolset(&toolset.registry, toolset.load_report());
            let registry = Arc::clone(&toolset.registry);
            let registries = match &toolset.files {
                Some(files) => {
                    Registries::shared_with_files(registry, FileResources::new(files.clone()))
                }
                None => Registries::shared(registry),
            };
            (registries, toolset)
        }
        Some(template) if http.policy.is_some() => {
            let template = SessionRootTemplate::parse(template)?;
            // A principal is a static token's name or an OAuth token's sub.
            let named = match &tokens {
                Some(tokens) => tokens.all_named(),
                None => !http.oauth_issuer.is_empty(),
            };
            crate::policy::check_flags(named, true)?;
            if registry_args.plugin_files != PluginFiles::None {
                bail!("--plugin-files {:?} cannot be combined with --policy: a plugin's file access would be over the process's --root, shared by every principal; drop one of them", registry_args.plugin_files);
            }
            if let (Some(cache), false) = (&registry_args.cache_dir, registry_args.no_cache) {
                toolhost_plugin::cache::check_cache_dir(cache, &[template.base().to_owned()])?;
            }
            // Every plugin as the operator's flags load it: what a policy may name.
            let mut shared = registry_args.clone();
            shared.no_builtins = true;
            shared.plan = false;
            let toolset = build_server_registry(&shared)?;
            crate::observe::note_plugins(toolset.load_report());
            let path = http.policy.as_deref().unwrap_or(std::path::Path::new(""));
            let policed = crate::policy::Policed::new(path, registry_args, template, &toolset)?;
            policy = Some(Arc::clone(&policed));
            (policed.registries(), toolset)
        }
        Some(template) => {
            if watch {
                bail!("--watch cannot be combined with --session-root-template yet: each session's tools are set up once, when it starts; drop one of them");
            }
            let template = SessionRootTemplate::parse(template)?;
            if template.per_session() && http.stateless {
                bail!("--session-root-template with {SESSION_PLACEHOLDER} needs sessions; drop --stateless, or use {CLIENT_PLACEHOLDER} alone");
            }
            // Every principal needs a name: each static token's, an OAuth token's `sub`.
            let named = match &tokens {
                Some(tokens) => tokens.all_named(),
                None => !http.oauth_issuer.is_empty(),
            };
            if template.per_client() && !named {
                bail!("--session-root-template with {CLIENT_PLACEHOLDER} needs --auth-token-file whose every line names its client (TOKEN NAME), or --oauth-issuer");
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
            // The observers watch each session's registry (below), not the shared
            // plugins' one its calls go on to: one record per call.
            crate::observe::note_plugins(toolset.load_report());
            info!(base = %template.base().display(), template = %template.as_str(), "one storage root per session");
            // Each session's registry: the same set-up as the shared one (over its own
            // root), and the plugins' tools, loaded once, shared (they get no file
            // access, which would be the process's, not the session's).
            let (args, plugins) = (registry_args.clone(), Arc::clone(&toolset.registry));
            let registries =
                Registries::per_session_root_with_files(template, move |storage, info| {
                    let (registry, options) =
                        registry_over(&args, Some(storage)).map_err(|err| format!("{err:#}"))?;
                    crate::observe::install_for(&registry, info.client.as_deref());
                    forward(&registry, &plugins).map_err(|err| err.to_string())?;
                    // The session's own root's files, where its file tools show them.
                    let files = options
                        .filter(|_| !args.no_builtins)
                        .map(FileResources::new);
                    Ok((registry, files))
                });
            (registries, toolset)
        }
    };
    let config = HttpConfig::new(key)
        .with_tokens(tokens)
        .with_oauth(crate::oauth::config(http))
        .with_insecure_public(http.insecure_public)
        .with_allowed_hosts(http.allow_host.clone())
        .with_allowed_origins(http.allow_origin.clone())
        .with_limits(tasks.apply(McpLimits::new().with_max_in_flight(max_in_flight)))
        .with_max_body_bytes(usize::try_from(http.max_body_bytes).unwrap_or(usize::MAX))
        .with_max_connections(http.max_connections)
        .with_max_pending_per_peer(http.max_pending_per_peer)
        .with_header_timeout(http.header_timeout)
        .with_min_receive_rate(http.min_receive_rate)
        .with_max_in_flight_per_connection(http.max_in_flight_per_connection)
        .with_max_sessions(http.max_sessions)
        .with_shutdown_grace(http.shutdown_grace)
        .with_list_changed(watch)
        .with_approval(toolset.approval(confirm, watch)?)
        .with_confirm_timeout(confirm_timeout);
    let config = match &policy {
        Some(policed) => config.with_policy(policed.live()),
        None => config,
    };
    let config = match shared_state(http, &config.limits()).await? {
        Some(backend) => {
            // Under a policy, its quotas are counted in the same Redis.
            if let Some(policed) = &policy {
                policed
                    .live()
                    .quotas()
                    .share(toolhost_mcp::policy::SharedQuotas::new(
                        Arc::clone(&backend) as _,
                    ));
                info!("calls per minute, bytes written per day and plugin HTTP requests per minute of each principal are counted across processes through Redis");
            }
            config.with_shared_tasks(toolhost_mcp::state::SharedTasks::new(
                backend,
                http.task_lease,
            ))
        }
        None => config,
    };
    raise_open_file_limit(http.max_connections);
    // Before the bind announces the address: see `shutdown_signal`.
    let shutdown = shutdown_signal();
    let server = HttpServer::bind(addr, config, registries).await?;
    let stats = server.stats_handle();
    let pool = toolset.plugin_host().cloned();
    crate::observe::watch_server(move || {
        crate::metrics::ServerGauges {
            sessions: stats.sessions(),
            calls_queued: 0,
            connections: Some(stats.connections()),
            ..Default::default()
        }
        .with_tasks(&stats.stats())
        .with_pool(pool.as_deref())
    });
    // Under a policy each profile's plugins are loaded at start; --watch reloads the
    // policy file (not the plugins directory).
    let watching = match &policy {
        Some(policed) => watch.then(|| policed.watch()),
        None => start_watching(watch, registry_args, &toolset),
    };
    let served = server.serve(shutdown).await;
    if let Some(watching) = watching {
        watching.abort();
    }
    served?;
    // Stopped by a signal: the optimized compiles get the drain's grace, no more.
    toolset.finish_optimizing(http.shutdown_grace).await;
    Ok(())
}

/// `--state`: the shared state backend (tasks, and a policy's quotas), connected and
/// answering (else the host does not start), its password from `--state-password-file`
/// or `TOOLHOST_STATE_PASSWORD`, for rediss:// its CA from `--state-ca-file` (else the
/// webpki roots).
async fn shared_state(
    http: &HttpArgs,
    limits: &McpLimits,
) -> anyhow::Result<Option<Arc<toolhost_mcp::state::RedisBackend>>> {
    use toolhost_mcp::state::{RedisBackend, StateCa, StateUrl, PASSWORD_ENV};
    let Some(url) = &http.state else {
        return Ok(None);
    };
    let url = StateUrl::parse(url)?;
    let password = match &http.state_password_file {
        Some(path) => {
            crate::secret_file::warn_if_others_may_access("--state-password-file", path);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --state-password-file {}", path.display()))?;
            Some(text.lines().next().unwrap_or_default().to_owned())
        }
        None => std::env::var(PASSWORD_ENV)
            .ok()
            .filter(|value| !value.is_empty()),
    };
    let max_result = limits.max_task_result_bytes().get();
    let backend = match &http.state_ca_file {
        Some(path) => {
            if !url.as_str().starts_with("rediss://") {
                anyhow::bail!(
                    "--state-ca-file is for a rediss:// (TLS) --state address; {} is plain TCP",
                    url.as_str()
                );
            }
            let ca = StateCa::from_pem_file(path)?;
            RedisBackend::connect_with_ca(&url, password.as_deref(), &ca, max_result).await
        }
        None => RedisBackend::connect(&url, password.as_deref(), max_result).await,
    }
    .with_context(|| format!("--state {}: cannot use the task state server", url.as_str()))?;
    info!(state = %url.as_str(), lease = ?http.task_lease, "tasks of callers without a session are shared through Redis");
    Ok(Some(Arc::new(backend)))
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

/// SIGTERM or Ctrl-C (SIGINT), watched from the moment this is called, not from the
/// future's first poll: the server announces its address before its accept loop first
/// polls the shutdown future, and a SIGTERM sent in between (a supervisor, a test that
/// stops the server as soon as it answered) must still be a graceful stop with exit 0,
/// not the default action that kills the process.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let watched = signal(SignalKind::terminate()).and_then(|term| {
            let interrupt = signal(SignalKind::interrupt())?;
            Ok((term, interrupt))
        });
        async move {
            match watched {
                Ok((mut term, mut interrupt)) => {
                    tokio::select! {
                        _ = term.recv() => info!("SIGTERM: shutting down"),
                        _ = interrupt.recv() => info!("interrupted: shutting down"),
                    }
                }
                Err(err) => {
                    tracing::warn!("cannot watch for SIGTERM ({err}); stop the server with Ctrl-C");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
            info!("interrupted: shutting down");
        }
    }
}
