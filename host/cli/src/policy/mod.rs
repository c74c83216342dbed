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
//!
//! Its parts: [`ceilings`] (the operator's plugin flags narrowed by a profile's
//! ceilings, and the plugins loaded under them), [`session_tools`] (a session's
//! registry brought in line with its profile) and [`quota_guard`] (each call under the
//! principal's quotas).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use anyhow::bail;
use tracing::{info, warn};

use toolhost::registry::{Registry, RESERVED_TOOL_NAMES};
use toolhost_mcp::http::{Registries, SessionInfo, SessionRootTemplate};
use toolhost_mcp::policy::quota::PrincipalQuota;
use toolhost_mcp::policy::{FileAccess, LivePolicy, Policy, PolicyError, Principal, Profile};
use toolhost_mcp::FileResources;

use self::ceilings::ProfilePlugins;
use self::session_tools::sync;
use crate::args::RegistryArgs;
use crate::setup::{registry_over, Toolset};

mod ceilings;
mod quota_guard;
mod session_tools;

/// How often `--watch` looks at the policy file: every 500 ms.
const POLL: Duration = Duration::from_millis(500);

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
