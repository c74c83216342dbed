//! `host serve --http ADDR --policy FILE`: each principal's session built from its
//! profile ([`toolhost_mcp::policy`]): the tools offered (a tool not offered is not in
//! the session's registry, so calling it by name is "unknown tool" like any other), the
//! file tools' access and storage root, the plugins loaded under the profile's grant
//! ceilings, and every call counted against the principal's quotas. With `--watch` the
//! file is reloaded when it changes: sessions whose offered tools change are told
//! (`notifications/tools/list_changed`); a broken file keeps the last good policy.
//!
//! Isolation: the CLI's plugins run a fresh instance per call, so no plugin state
//! outlives a call, let alone passes between principals; sessions of one profile share
//! its loaded (compiled) plugins, never an instance.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use anyhow::bail;
use tracing::{info, warn};

use toolhost::registry::{
    Arguments, CallContext, Environment, Handler, HandlerFuture, OutgoingGate, Registry, ToolCall,
    ToolDefinition, ToolError, RESERVED_TOOL_NAMES,
};
use toolhost_mcp::http::{Registries, SessionInfo, SessionRootTemplate};
use toolhost_mcp::policy::quota::PrincipalQuota;
use toolhost_mcp::policy::{
    FileAccess, LivePolicy, Policy, PolicyError, Principal, Profile, SharedRefusal, ToolKind,
};
use toolhost_mcp::FileResources;

use crate::args::RegistryArgs;
use crate::setup::{build_server_registry, registry_over, Toolset};

/// The built-in tools that change files.
const WRITING_TOOLS: [&str; 5] = [
    "write_file",
    "delete_file",
    "edit_file",
    "multi_edit",
    "move_file",
];

/// How often `--watch` looks at the policy file: every 500 ms.
const POLL: Duration = Duration::from_millis(500);

/// Plugin defaults the ceilings narrow when the operator set none (as `RegistryArgs`'
/// help says): 64 MiB, 10 s.
const DEFAULT_PLUGIN_MEMORY: u64 = 64 << 20;
const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The plugins of one set of grant ceilings, loaded once, and which plugin each tool
/// is of.
struct ProfilePlugins {
    toolset: Toolset,
    plugin_of: HashMap<String, String>,
}

/// A live session's registry and what it is built from (for a reload).
struct Served {
    registry: Weak<Registry>,
    files: Arc<Registry>,
    plugins: Arc<ProfilePlugins>,
    client: Option<String>,
    scopes: Vec<String>,
    quota: Arc<PrincipalQuota>,
}

/// The policy in force and what serving it needs.
pub(crate) struct Policed {
    live: Arc<LivePolicy>,
    path: PathBuf,
    args: RegistryArgs,
    template: SessionRootTemplate,
    /// Every tool the server has (built-in or a plugin's) and its plugins' names.
    tools: Vec<String>,
    plugin_names: Vec<String>,
    /// Plugins per set of ceilings (profiles with the same ceilings share them).
    plugins: Mutex<HashMap<String, Arc<ProfilePlugins>>>,
    sessions: Mutex<Vec<Served>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Policed {
    /// Reads and checks the policy at `path` against the operator's flags (`args`,
    /// `template`) and the plugins of `all` (the operator's, loaded without built-ins).
    pub(crate) fn new(
        path: &Path,
        args: &RegistryArgs,
        template: SessionRootTemplate,
        all: &Toolset,
    ) -> anyhow::Result<Arc<Self>> {
        let mut tools: Vec<String> = RESERVED_TOOL_NAMES.iter().map(|&t| t.to_owned()).collect();
        let mut plugin_names = Vec::new();
        if let Some(report) = all.load_report() {
            for plugin in &report.loaded {
                plugin_names.push(plugin.name.clone());
                tools.extend(plugin.tools.iter().cloned());
            }
        }
        let policed = Self {
            live: Arc::new(LivePolicy::new(Policy::parse(
                "[profile.none]\nfiles = \"none\"",
            )?)),
            path: path.to_owned(),
            args: args.clone(),
            template,
            tools,
            plugin_names,
            plugins: Mutex::new(HashMap::new()),
            sessions: Mutex::new(Vec::new()),
        };
        let policy = policed.load()?;
        for profile in policy.profiles() {
            policed.plugins_for(profile)?;
        }
        policed.live.replace(policy);
        info!(policy = %path.display(), "serving each principal by its policy profile");
        Ok(Arc::new(policed))
    }

    /// The policy in force, for the HTTP layer's 403 and 429.
    pub(crate) fn live(&self) -> Arc<LivePolicy> {
        Arc::clone(&self.live)
    }

    /// The policy file read and checked against what the server has.
    fn load(&self) -> anyhow::Result<Policy> {
        let policy = Policy::read(&self.path)?;
        let tools: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        let plugins: Vec<&str> = self.plugin_names.iter().map(String::as_str).collect();
        policy.check_names(&tools, &plugins)?;
        for profile in policy.profiles() {
            self.narrowed(profile)?;
            if let Some(root) = profile.root() {
                let template = SessionRootTemplate::parse(root)
                    .map_err(|err| invalid(profile, "root", &err.to_string()))?;
                if !template.base().starts_with(self.template.base()) {
                    return Err(invalid(
                        profile,
                        "root",
                        &format!(
                            "{root:?} is outside the operator's --session-root-template base {}; a profile's root may only narrow it",
                            self.template.base().display()
                        ),
                    )
                    .into());
                }
            }
        }
        Ok(policy)
    }

    /// The operator's flags narrowed by `profile`'s plugin ceilings (plugins only).
    fn narrowed(&self, profile: &Profile) -> anyhow::Result<RegistryArgs> {
        let mut args = self.args.clone();
        args.no_builtins = true;
        args.plan = false;
        let ceilings = profile.plugin();
        if let Some(hosts) = &ceilings.http {
            let mut kept = Vec::new();
            for host in hosts {
                let pattern: toolhost_plugin::http_policy::HostPattern = host.parse().map_err(
                    |err: toolhost_plugin::http_policy::HostPatternError| {
                        invalid(profile, "plugin.http", &err.to_string())
                    },
                )?;
                if !self
                    .args
                    .plugin_http
                    .iter()
                    .any(|allowed| allowed.to_string() == pattern.to_string())
                {
                    return Err(invalid(
                        profile,
                        "plugin.http",
                        &format!("{pattern} is not a host the operator allows (--plugin-http); a profile may only narrow them"),
                    )
                    .into());
                }
                kept.push(pattern);
            }
            args.plugin_http = kept;
        }
        if let Some(memory) = ceilings.memory_bytes {
            let base = self.args.plugin_memory.unwrap_or(DEFAULT_PLUGIN_MEMORY);
            let max = self.args.plugin_max_memory.unwrap_or(base);
            args.plugin_memory = Some(base.min(memory));
            args.plugin_max_memory = Some(max.min(memory));
        }
        if let Some(timeout) = ceilings.timeout {
            let base = self.args.plugin_timeout.unwrap_or(DEFAULT_PLUGIN_TIMEOUT);
            let max = self.args.plugin_max_timeout.unwrap_or(base);
            args.plugin_timeout = Some(base.min(timeout));
            args.plugin_max_timeout = Some(max.min(timeout));
        }
        if let Some(config) = &ceilings.config {
            if self.args.plugin_config_file.is_some() {
                return Err(invalid(
                    profile,
                    "plugin.config",
                    "cannot narrow the values of --plugin-config-file; give them with --plugin-config or --plugin-config-env, or drop plugin.config",
                )
                .into());
            }
            let named = |entry: &String| {
                let key = entry.split_once('=').map_or(entry.as_str(), |(key, _)| key);
                config.iter().any(|allowed| allowed == key.trim())
            };
            args.plugin_config.retain(named);
            args.plugin_config_env.retain(named);
        }
        Ok(args)
    }

    /// The plugins loaded under `profile`'s ceilings (loaded once per set of ceilings).
    fn plugins_for(&self, profile: &Profile) -> anyhow::Result<Arc<ProfilePlugins>> {
        let key = format!("{:?}", profile.plugin());
        if let Some(found) = lock(&self.plugins).get(&key) {
            return Ok(Arc::clone(found));
        }
        let toolset = build_server_registry(&self.narrowed(profile)?)?;
        let mut plugin_of = HashMap::new();
        if let Some(report) = toolset.load_report() {
            for plugin in &report.loaded {
                for tool in &plugin.tools {
                    plugin_of.insert(tool.clone(), plugin.name.clone());
                }
            }
        }
        let loaded = Arc::new(ProfilePlugins { toolset, plugin_of });
        Ok(Arc::clone(lock(&self.plugins).entry(key).or_insert(loaded)))
    }

    /// The registries of the sessions: each built from its principal's profile.
    pub(crate) fn registries(self: &Arc<Self>) -> Registries {
        let policed = Arc::clone(self);
        Registries::per_session_with_files(Arc::new(move |info: &SessionInfo| {
            policed.session(info).map_err(|err| format!("{err:#}"))
        }))
    }

    /// A session's registry and files.
    fn session(
        &self,
        info: &SessionInfo,
    ) -> anyhow::Result<(Arc<Registry>, Option<FileResources>)> {
        let principal = Principal::new(info.client.as_deref(), &info.scopes)
            .with_issuer(info.issuer.as_deref());
        let (profile, quota) = self.live.admit(&principal)?;
        let template = match profile.root() {
            Some(root) => SessionRootTemplate::parse(root)?,
            None => self.template.clone(),
        };
        let (root, storage) = template.open(info).map_err(anyhow::Error::msg)?;
        let mut args = self.args.clone();
        match profile.files() {
            FileAccess::None => args.no_builtins = true,
            FileAccess::ReadOnly => args.read_only = true,
            FileAccess::ReadWrite => {}
        }
        let (files, options) = registry_over(&args, Some(storage))?;
        let files = Arc::new(files);
        let plugins = self.plugins_for(&profile)?;
        let served = Arc::new(Registry::new().with_call_timeout(args.timeout));
        crate::observe::install_for(&served, info.client.as_deref());
        sync(&served, &files, &plugins, &profile, &quota, false);
        info!(
            session_id = info.id.as_deref().unwrap_or("-"),
            client = info.client.as_deref().unwrap_or("-"),
            profile = profile.name(),
            root = %root.display(),
            tools = served.len(),
            "session set up by its policy profile"
        );
        let resources = options
            .filter(|_| profile.files() != FileAccess::None)
            .map(FileResources::new);
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.registry.strong_count() > 0);
        sessions.push(Served {
            registry: Arc::downgrade(&served),
            files,
            plugins,
            client: info.client.clone(),
            scopes: info.scopes.clone(),
            quota,
        });
        Ok((served, resources))
    }

    /// Reads the policy again: in force if it is good (every live session's tools
    /// brought in line with its profile), else logged and the last good one kept.
    pub(crate) fn reload(&self) {
        let policy = match self.load() {
            Ok(policy) => policy,
            Err(err) => {
                warn!(policy = %self.path.display(), "the policy file was not reloaded, the last good policy stays in force: {err:#}");
                return;
            }
        };
        for profile in policy.profiles() {
            if let Err(err) = self.plugins_for(profile) {
                warn!(policy = %self.path.display(), profile = profile.name(), "the policy file was not reloaded, the last good policy stays in force: cannot load the profile's plugins: {err:#}");
                return;
            }
        }
        self.live.replace(policy);
        let policy = self.live.current();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.registry.strong_count() > 0);
        for session in sessions.iter_mut() {
            let Some(registry) = session.registry.upgrade() else {
                continue;
            };
            let principal = Principal::new(session.client.as_deref(), &session.scopes);
            let profile = policy.profile_for(&principal).cloned();
            let Some(profile) = profile else {
                // No profile any more: offered nothing (new requests get 403).
                registry.withdraw(&registry.names());
                continue;
            };
            let Ok(plugins) = self.plugins_for(&profile) else {
                continue;
            };
            let replaced = !Arc::ptr_eq(&plugins, &session.plugins);
            session.plugins = Arc::clone(&plugins);
            sync(
                &registry,
                &session.files,
                &plugins,
                &profile,
                &session.quota,
                replaced,
            );
        }
        let live_sessions = sessions.len();
        drop(sessions);
        // Plugins no profile and no live session uses any more are let go.
        let used: std::collections::HashSet<String> = policy
            .profiles()
            .map(|profile| format!("{:?}", profile.plugin()))
            .collect();
        lock(&self.plugins)
            .retain(|key, loaded| used.contains(key) || Arc::strong_count(loaded) > 1);
        info!(policy = %self.path.display(), sessions = live_sessions, "policy reloaded");
    }

    /// Reloads the policy whenever its file changes (`--watch`), until aborted.
    pub(crate) fn watch(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let policed = Arc::clone(self);
        tokio::spawn(async move {
            let stamp = |path: &Path| {
                std::fs::metadata(path)
                    .ok()
                    .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
            };
            let mut seen = stamp(&policed.path);
            info!(policy = %policed.path.display(), "watching the policy file: a change is put in force without a restart");
            loop {
                tokio::time::sleep(POLL).await;
                let now = stamp(&policed.path);
                if now != seen {
                    seen = now;
                    let policed = Arc::clone(&policed);
                    if let Err(err) = tokio::task::spawn_blocking(move || policed.reload()).await {
                        warn!("the policy reload failed: {err}");
                    }
                }
            }
        })
    }
}

fn invalid(profile: &Profile, field: &str, problem: &str) -> PolicyError {
    PolicyError::Invalid {
        place: format!("profile.{}.{field}", profile.name()),
        problem: problem.to_owned(),
    }
}

/// What kind of tool `name` of the session's own (built-in) registry is.
fn builtin_kind(name: &str) -> ToolKind<'static> {
    if name == "todo_write" {
        ToolKind::Other
    } else {
        ToolKind::File {
            writes: WRITING_TOOLS.contains(&name),
        }
    }
}

/// Brings `served` in line with `profile`: the tools it does not offer taken away, the
/// ones it offers and `served` lacks added (every plugin tool again when `replaced`:
/// its plugins were loaded anew).
fn sync(
    served: &Registry,
    files: &Arc<Registry>,
    plugins: &ProfilePlugins,
    profile: &Profile,
    quota: &Arc<PrincipalQuota>,
    replaced: bool,
) {
    let plugin_registry = &plugins.toolset.registry;
    let mut builtins: Vec<ToolDefinition> = Vec::new();
    let mut outside: Vec<ToolDefinition> = Vec::new();
    for definition in files.definitions() {
        if profile.offers(&definition.name, builtin_kind(&definition.name)) {
            builtins.push(definition);
        }
    }
    for definition in plugin_registry.definitions() {
        let plugin = plugins
            .plugin_of
            .get(&definition.name)
            .map_or("", String::as_str);
        if profile.offers(&definition.name, ToolKind::Plugin(plugin)) {
            outside.push(definition);
        }
    }
    let wanted = |name: &str| builtins.iter().chain(&outside).any(|d| d.name == name);
    let remove: Vec<String> = served
        .names()
        .into_iter()
        .filter(|name| !wanted(name) || (replaced && !files.has(name)))
        .collect();
    served.withdraw(&remove);
    for definition in builtins {
        if !served.has(&definition.name) {
            let handler = guarded(
                Arc::clone(files),
                definition.name.clone(),
                Arc::clone(quota),
            );
            if let Err(err) = served.register_builtin(definition, handler) {
                warn!("cannot offer a built-in tool to a session: {err}");
            }
        }
    }
    let added: Vec<(ToolDefinition, Arc<dyn Handler>)> = outside
        .into_iter()
        .filter(|definition| !served.has(&definition.name))
        .map(|definition| {
            let handler: Arc<dyn Handler> = Arc::new(guarded(
                Arc::clone(plugin_registry),
                definition.name.clone(),
                Arc::clone(quota),
            ));
            (definition, handler)
        })
        .collect();
    if !added.is_empty() {
        if let Err(err) = served.register_all(added) {
            warn!("cannot offer a plugin's tools to a session: {err}");
        }
    }
}

/// The bytes a built-in tool call is about to write: what the quota counts (the new
/// text given; a failed write still counts).
fn written_bytes(tool: &str, args: &Arguments) -> u64 {
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .map_or(0, str::len) as u64
    };
    match tool {
        "write_file" => text(args.get("content")),
        "edit_file" => text(args.get("new_string")),
        "multi_edit" => args
            .get("edits")
            .and_then(serde_json::Value::as_array)
            .map_or(0, |edits| {
                edits
                    .iter()
                    .map(|edit| text(edit.get("new_string")))
                    .fold(0u64, u64::saturating_add)
            }),
        _ => 0,
    }
}

/// A handler running tool `name` of `from` under `quota`: a calls-per-minute token and
/// a concurrent-calls place per call, and the bytes a file tool writes counted before
/// it writes (over the day's quota: refused, the file untouched).
struct Guarded {
    from: Arc<Registry>,
    name: String,
    quota: Arc<PrincipalQuota>,
    /// The principal's outgoing-HTTP quota, given to each call's plugin requests.
    gate: OutgoingGate,
}

fn guarded(from: Arc<Registry>, name: String, quota: Arc<PrincipalQuota>) -> Guarded {
    let counted = Arc::clone(&quota);
    let shared = Arc::clone(&quota);
    let gate = OutgoingGate::new(move || {
        counted
            .take_http_request()
            .map_err(|exceeded| exceeded.to_string())
    })
    // Across processes (`--state`): each request counted in Redis before it is sent;
    // over the shared limit, or Redis lost (fail closed), the request is refused.
    .with_shared(move || {
        if !shared.shares_http_requests() {
            return None;
        }
        let quota = Arc::clone(&shared);
        Some(Box::pin(async move {
            quota
                .count_shared_http_request()
                .await
                .map_err(|refusal| refusal.to_string())
        }))
    });
    Guarded {
        from,
        name,
        quota,
        gate,
    }
}

impl Handler for Guarded {
    fn call(&self, ctx: CallContext, args: Arguments, env: Environment) -> HandlerFuture {
        let (from, name, quota) = (
            Arc::clone(&self.from),
            self.name.clone(),
            Arc::clone(&self.quota),
        );
        let ctx = ctx.with_outgoing_gate(self.gate.clone());
        Box::pin(async move {
            let refused =
                |exceeded: toolhost_mcp::policy::QuotaExceeded| ToolError::QuotaExceeded {
                    tool: name.clone(),
                    quota: exceeded.quota.name().to_owned(),
                    limit: exceeded.limit,
                    retry_after_secs: exceeded.retry_after_secs(),
                    message: exceeded.to_string(),
                };
            // Across processes (`--state`): refused over the shared limit, or when the
            // shared counter cannot count (fail closed), naming why.
            let shared_refused = |refusal: SharedRefusal| match refusal {
                SharedRefusal::Exceeded(exceeded) => refused(exceeded),
                SharedRefusal::Unavailable(_) => ToolError::QuotaExceeded {
                    tool: name.clone(),
                    quota: "quota_state_unavailable".to_owned(),
                    limit: 0,
                    retry_after_secs: 1,
                    message: refusal.to_string(),
                },
            };
            // A nested call (a code tool's) runs in its caller's concurrent-calls place.
            // (A top-level call was counted across processes by the HTTP layer.)
            let _permit = if ctx.is_nested() {
                quota.begin_nested_call().map_err(refused)?;
                quota.count_shared_call().await.map_err(shared_refused)?;
                None
            } else {
                Some(quota.begin_call().map_err(refused)?)
            };
            let written = written_bytes(&name, &args);
            if written > 0 {
                quota
                    .charge_written_shared(written)
                    .await
                    .map_err(shared_refused)?;
                quota.charge_written(written).map_err(refused)?;
            }
            let call = ToolCall::new(name.clone(), args.raw());
            from.dispatch(&ctx, &call, &env).await
        })
    }

    // The session's registry then serves a composing tool's nested calls: only what the
    // profile offers, each under the principal's quotas.
    fn composes(&self) -> bool {
        self.from.composes(&self.name)
    }

    fn may_call(&self, name: &str) -> bool {
        self.from.may_call(&self.name, name)
    }
}

/// Checks the flags `--policy` needs.
/// `named`: every principal has a name (every static token's line names its client,
/// or there is no token file and OAuth tokens, whose `sub` names them, are taken).
pub(crate) fn check_flags(named: bool, template: bool) -> anyhow::Result<()> {
    if !named {
        bail!("--policy needs --auth-token-file whose every line names its client (TOKEN NAME), or --oauth-issuer (a principal is then its OAuth token's sub): a principal is a token's name");
    }
    if !template {
        bail!("--policy needs --session-root-template: each principal's file tools are built over its profile's root (a profile's `root`, else the template)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policed(flags: &[&str]) -> (tempfile::TempDir, Policed) {
        let base = tempfile::tempdir().unwrap();
        let template =
            SessionRootTemplate::parse(&format!("{}/{{client}}", base.path().display())).unwrap();
        let policed = Policed {
            live: Arc::new(LivePolicy::new(Policy::parse("[profile.x]\n").unwrap())),
            path: PathBuf::from("policy.toml"),
            args: crate::args::registry_args_from(flags).unwrap(),
            template,
            tools: Vec::new(),
            plugin_names: Vec::new(),
            plugins: Mutex::new(HashMap::new()),
            sessions: Mutex::new(Vec::new()),
        };
        (base, policed)
    }

    fn profile(text: &str) -> Profile {
        Policy::parse(text).unwrap().profile("p").unwrap().clone()
    }

    #[test]
    fn ceilings_only_narrow_the_operators_grants() {
        let (_base, policed) = policed(&[
            "--plugin-http",
            "api.example.org",
            "--plugin-http",
            "http://127.0.0.1:8080",
            "--plugin-memory",
            "32MiB",
            "--plugin-max-timeout",
            "20s",
            "--plugin-config",
            "wiki.lang=en",
            "--plugin-config",
            "wiki.token=s3cr3t",
            "--plugin-config-env",
            "wiki.key=WIKI_KEY",
        ]);
        let args = policed
            .narrowed(&profile(
                "[profile.p]\nplugin = { http = [\"api.example.org\"], memory_bytes = 1048576, timeout_ms = 15000, config = [\"wiki.lang\"] }\n",
            ))
            .unwrap();
        assert_eq!(
            args.plugin_http
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["api.example.org"]
        );
        assert_eq!(args.plugin_memory, Some(1 << 20));
        assert_eq!(args.plugin_max_memory, Some(1 << 20));
        // The default per-call limit (10 s) stays under the ceiling; the most a manifest
        // may ask for (20 s) comes down to it.
        assert_eq!(args.plugin_timeout, Some(Duration::from_secs(10)));
        assert_eq!(args.plugin_max_timeout, Some(Duration::from_secs(15)));
        assert_eq!(args.plugin_config, ["wiki.lang=en"]);
        assert!(
            args.plugin_config_env.is_empty(),
            "{:?}",
            args.plugin_config_env
        );
        assert!(args.no_builtins && !args.plan, "plugins only");
        // A ceiling above the operator's is the operator's.
        let args = policed
            .narrowed(&profile(
                "[profile.p]\nplugin = { memory_bytes = 1073741824 }\n",
            ))
            .unwrap();
        assert_eq!(args.plugin_memory, Some(32 << 20));
        // A host the operator does not allow, or a pattern wider than one it does.
        for host in [
            "other.example.org",
            "*.example.org",
            "http://127.0.0.1:9090",
        ] {
            let err = policed
                .narrowed(&profile(&format!(
                    "[profile.p]\nplugin = {{ http = [\"{host}\"] }}\n"
                )))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("policy profile.p.plugin.http: ")
                    && err.ends_with("is not a host the operator allows (--plugin-http); a profile may only narrow them"),
                "{err}"
            );
        }
    }

    #[test]
    fn written_bytes_count_the_new_text() {
        let args = |raw: &str| Arguments::parse("t", raw).unwrap();
        assert_eq!(
            written_bytes("write_file", &args(r#"{"path":"a","content":"héllo"}"#)),
            6
        );
        assert_eq!(
            written_bytes(
                "edit_file",
                &args(r#"{"path":"a","old_string":"x","new_string":"abc"}"#)
            ),
            3
        );
        assert_eq!(
            written_bytes(
                "multi_edit",
                &args(
                    r#"{"path":"a","edits":[{"old_string":"x","new_string":"ab"},{"old_string":"y","new_string":"cde"}]}"#
                )
            ),
            5
        );
        assert_eq!(
            written_bytes("read_file", &args(r#"{"path":"a","content":"x"}"#)),
            0
        );
    }
}
