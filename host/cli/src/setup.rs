//! The one function that builds the registry from the flags, shared by `run`, `tools`
//! and `call`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use tracing::info;

use toolhost::registry::Registry;
use toolhost::tools::walks::{DEFAULT_MAX_WAIT, DEFAULT_WAITING_PER_WALKER};
use toolhost::tools::{register_plan_tool, register_vfs_tools, VfsToolOptions, WalkBudget};
use toolhost::vfs::{OpenError, OsStorage, Storage};
use toolhost_mcp::ApprovalPolicy;
use toolhost_plugin::cache::check_cache_dir;
use toolhost_plugin::lock::LockPolicy;
use toolhost_plugin::watch::PluginWatcher;
use toolhost_plugin::{CompileTiers, LoadReport, PluginHost};

use super::args::{PluginFiles, RegistryArgs};
use super::plugins;

/// A registry built from the flags, with what keeps its tools working.
pub struct Toolset {
    /// The tools, in the order offered to the model: the built-in file tools, the plan
    /// tool, then the plugins' tools.
    pub registry: Arc<Registry>,
    /// The directory the file tools (and granted plugins) work in, when it was opened.
    pub root: Option<PathBuf>,
    /// The built-in file tools' options (storage over `--root`, policy, read cap, walk
    /// budget), when they are registered: what a server offers as MCP resources.
    pub files: Option<VfsToolOptions>,
    /// The plugin host whose instances run the plugin tools, the plugins directory and
    /// what loading it did (for `--watch`).
    plugins: Option<(Arc<PluginHost>, PathBuf, LoadReport)>,
    /// `--require-signer`'s rule, applied again by the watcher at each load.
    lock_policy: Option<LockPolicy>,
}

impl Toolset {
    /// The plugin host whose instances run the plugin tools; `None` without `--plugins`.
    pub fn plugin_host(&self) -> Option<&Arc<PluginHost>> {
        self.plugins.as_ref().map(|(host, _, _)| host)
    }

    /// The plugins loaded at start, and the files that failed (empty without `--plugins`).
    pub fn load_report(&self) -> Option<&LoadReport> {
        self.plugins.as_ref().map(|(_, _, report)| report)
    }

    /// A watcher that keeps the registry's plugin tools in step with the plugins
    /// directory (`--watch`); `None` without `--plugins`.
    pub fn watcher(&self) -> Option<PluginWatcher> {
        let (host, dir, report) = self.plugins.as_ref()?;
        let watcher = PluginWatcher::new(Arc::clone(host), dir, Arc::clone(&self.registry), report);
        Some(match &self.lock_policy {
            Some(policy) => watcher.with_lock_policy(Arc::clone(policy)),
            None => watcher,
        })
    }
}

impl Toolset {
    /// The approval policy of `--confirm` (tool names, or `destructive`) and of the
    /// plugins whose manifest says `confirm = true`; each plugin tool's prompt shows the
    /// plugin's declared grants. The plugins are read as loaded at start (with
    /// `--watch`, a plugin added later is asked about only if `--confirm` names its
    /// tools or says `destructive`).
    ///
    /// # Errors
    /// A `--confirm` name that is no tool served and no built-in tool's name (without
    /// `--watch`, where it may come later): a typo must not leave a tool unguarded.
    pub fn approval(&self, confirm: &[String], watch: bool) -> anyhow::Result<ApprovalPolicy> {
        let mut policy = ApprovalPolicy::new();
        for name in confirm {
            if name == "destructive" {
                policy = policy.confirm_destructive();
                continue;
            }
            let builtin = toolhost::registry::RESERVED_TOOL_NAMES.contains(&name.as_str());
            if !watch && !builtin && !self.registry.has(name) {
                bail!("--confirm {name:?}: no tool of that name is served (the tools are: {}); name a tool, or say `destructive`", self.registry.names().join(", "));
            }
            policy = policy.confirm_tool(name.clone());
        }
        // A plugin's own `confirm = true` and its grants note travel with its tools'
        // definitions (set at load, hot reload included); the policy reads them there.
        Ok(policy)
    }

    /// Before exiting: waits up to `limit` for the optimized compiles behind quick code
    /// ([`build_server_registry`]), so that the compile cache holds them and the next
    /// start is a cache hit. Returns at once when none is running, and without a compile
    /// cache (there is nothing to keep). The wait runs on the blocking pool.
    pub async fn finish_optimizing(self, limit: std::time::Duration) {
        let Some((host, ..)) = self.plugins else {
            return;
        };
        let left = host.optimizing();
        if left == 0 || host.config().cache_dir().is_none() {
            return;
        }
        info!(
            "finishing the optimized compile of {left} plugin(s) for the compile cache before exiting (at most {})",
            toolhost::registry::format_duration(limit)
        );
        let unfinished = tokio::task::spawn_blocking(move || {
            (!host.wait_for_optimized(limit)).then(|| host.optimizing())
        })
        .await;
        if let Ok(Some(left)) = unfinished {
            tracing::warn!(
                "exiting with {left} optimized plugin compile(s) unfinished: the next start compiles those plugins again"
            );
        }
    }
}

impl std::fmt::Debug for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolset")
            .field("registry", &self.registry)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Builds the registry the flags describe: the built-in file tools over an
/// [`OsStorage`] at `--root` (unless `--no-builtins`), the plan tool with `--plan`, then
/// every plugin in `--plugins`. The call timeout is `--timeout`.
///
/// A plugin that fails to load is logged and skipped; the others still load.
///
/// # Sandbox
/// Opening `--root` uses ambient authority, once: the file tools (and plugins granted file
/// access with `--plugin-files`) reach everything under it, and nothing else.
///
/// # Errors
/// When `--root` cannot be opened as a directory, `--plugins` is not a directory, a tool
/// name is taken twice among the built-ins, the compile cache directory may not be used
/// (inside, equal to or above `--root`, another user's, writable by others: see
/// [`check_cache_dir`]), or the plugin host cannot start.
pub fn build_registry(args: &RegistryArgs) -> anyhow::Result<Toolset> {
    build_registry_with(args, CompileTiers::Optimized)
}

/// [`build_registry`] for a server (`host run`, `host serve`): a plugin the compile
/// cache does not hold starts serving on quick code, and its optimized code is compiled
/// in the background and swapped in ([`CompileTiers::QuickFirst`]), so the first start
/// answers sooner. Call [`Toolset::finish_optimizing`] before exiting.
///
/// # Errors
/// As [`build_registry`].
pub fn build_server_registry(args: &RegistryArgs) -> anyhow::Result<Toolset> {
    build_registry_with(args, CompileTiers::QuickFirst)
}

fn build_registry_with(args: &RegistryArgs, tiers: CompileTiers) -> anyhow::Result<Toolset> {
    let wants_storage = !args.no_builtins || args.plugin_files != PluginFiles::None;
    let (storage, root) = if wants_storage {
        let storage = OsStorage::open(&args.root).map_err(|err| root_error(&args.root, err))?;
        let root = std::fs::canonicalize(&args.root).unwrap_or_else(|_| args.root.clone());
        (Some(Arc::new(storage) as Arc<dyn Storage>), Some(root))
    } else {
        (None, None)
    };
    // A compile cache where the tools (or plugins) write would let them plant native code.
    // PluginHost::new refuses it; an explicit --cache-dir is checked here too, with or
    // without --plugins, so a wrong setting is seen at once.
    if let (Some(cache), Some(root), false) = (&args.cache_dir, &root, args.no_cache) {
        check_cache_dir(cache, std::slice::from_ref(root))?;
    }
    let (registry, options) = registry_over(args, storage.clone())?;
    if let (false, Some(options)) = (args.no_builtins, &options) {
        info!(
            root = %root.as_deref().unwrap_or(&args.root).display(),
            read_only = args.read_only,
            extended = !args.disable_extended,
            hide_hidden = args.hide_hidden,
            allowed_extensions = ?options.allowed_extensions(),
            max_file_bytes = args.max_file_bytes,
            max_read_bytes = args.max_read_bytes,
            "built-in file tools registered"
        );
    }
    let lock_policy = if args.require_signer.is_empty() {
        None
    } else {
        let keys = crate::signing::read_public_keys("--require-signer", &args.require_signer)?;
        Some(crate::signing::signer_policy(keys))
    };
    let plugin_host = match &args.plugins {
        Some(dir) => {
            if !dir.is_dir() {
                bail!(
                    "--plugins {} is not a directory; pass the directory that holds the plugins' .wasm files",
                    dir.display()
                );
            }
            let policy = match &options {
                Some(options) => options.policy(),
                None => Default::default(),
            };
            let mut config = plugins::host_config(args, storage, policy)?.to_builder();
            config
                .storage_roots(root.iter().cloned().collect())
                .compile_tiers(tiers);
            if args.no_cache {
                config.cache_dir(None);
            }
            let config = config.build();
            let (host, report) = plugins::load(
                dir,
                &registry,
                config,
                args.require_lock,
                lock_policy.as_ref(),
            )?;
            Some((host, dir.clone(), report))
        }
        None => None,
    };
    Ok(Toolset {
        registry: Arc::new(registry),
        root,
        files: options.filter(|_| !args.no_builtins),
        plugins: plugin_host,
        lock_policy,
    })
}

/// The registry every server starts from, built here alone (the shared one over
/// `--root`, and each session's over its own root with `--session-root-template`): the
/// call timeout, the built-in file tools over `storage` (unless `--no-builtins`), and
/// the plan tool with `--plan`. Also gives the file tools' options (the plugins'
/// policy follows from them).
pub(crate) fn registry_over(
    args: &RegistryArgs,
    storage: Option<Arc<dyn Storage>>,
) -> anyhow::Result<(Registry, Option<VfsToolOptions>)> {
    let registry = Registry::new().with_call_timeout(args.timeout);
    let options = vfs_options(args, storage);
    if let (false, Some(options)) = (args.no_builtins, &options) {
        register_vfs_tools(&registry, options.clone())
            .context("cannot register the built-in file tools")?;
    }
    if args.plan {
        register_plan_tool(&registry).context("cannot register the plan tool")?;
    }
    Ok((registry, options))
}

/// What is wrong with `--root`, said once: the path as given, what is wrong, and what to
/// pass instead; an OS error only when there is one (as the error's cause).
fn root_error(root: &std::path::Path, err: OpenError) -> anyhow::Error {
    let root = root.display();
    match err {
        OpenError::NotFound { .. } => anyhow::anyhow!(
            "--root {root} does not exist; pass an existing directory (it defaults to the current one)"
        ),
        OpenError::NotADirectory { .. } => {
            anyhow::anyhow!("--root {root} is not a directory; pass a directory")
        }
        OpenError::Io { source, .. } => {
            anyhow::Error::new(source).context(format!("cannot open --root {root}"))
        }
        other => anyhow::Error::new(other),
    }
}

/// The file tools' options from the flags, over `storage`.
fn vfs_options(args: &RegistryArgs, storage: Option<Arc<dyn Storage>>) -> Option<VfsToolOptions> {
    storage.map(|storage| {
        let mut options = VfsToolOptions::builder(storage);
        options
            .read_only(args.read_only)
            .disable_extended(args.disable_extended)
            .hide_hidden_paths(args.hide_hidden)
            .allowed_extensions(args.allowed_extensions())
            .max_file_bytes(args.max_file_bytes)
            .max_read_bytes(args.max_read_bytes);
        if let Some(walkers) = args.max_walks {
            options.walk_budget(walk_budget(walkers.get()));
        }
        options.build()
    })
}

/// The process's walk budget for `--max-walks`: made once, so every registry of the
/// process (one per HTTP session) shares it, as they share the default one.
fn walk_budget(walkers: usize) -> Arc<WalkBudget> {
    static BUDGET: std::sync::OnceLock<Arc<WalkBudget>> = std::sync::OnceLock::new();
    Arc::clone(BUDGET.get_or_init(|| {
        Arc::new(WalkBudget::new(
            walkers,
            walkers.saturating_mul(DEFAULT_WAITING_PER_WALKER),
            DEFAULT_MAX_WAIT,
        ))
    }))
}

/// `--watch`: polls the plugins directory while the server runs (abort the task to stop).
pub(crate) fn start_watching(
    watch: bool,
    registry: &RegistryArgs,
    toolset: &Toolset,
) -> Option<tokio::task::JoinHandle<()>> {
    let watcher = toolset.watcher().filter(|_| watch)?;
    info!(
        dir = %registry.plugins.as_deref().unwrap_or(std::path::Path::new("")).display(),
        "watching the plugins directory: plugins added, changed or removed are loaded or unloaded without a restart"
    );
    Some(tokio::spawn(watcher.run(
        toolhost_plugin::watch::DEFAULT_POLL_INTERVAL,
        plugins::log_watch_event,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> RegistryArgs {
        crate::args::registry_args_from(extra).unwrap()
    }

    #[test]
    fn builtins_in_spec_order_then_plan() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let set = build_registry(&args(&["--root", root, "--plan"])).unwrap();
        // The file tools over a directory (no `search`: it is not searchable), then the plan.
        let mut expected: Vec<&str> = toolhost::tools::DEFAULT_TOOL_NAMES
            .into_iter()
            .filter(|name| *name != "search")
            .collect();
        expected.push("todo_write");
        assert_eq!(set.registry.names(), expected);
        assert_eq!(set.root, Some(std::fs::canonicalize(dir.path()).unwrap()));
        let set = build_registry(&args(&["--root", root, "--read-only"])).unwrap();
        assert_eq!(
            set.registry.names(),
            ["read_file", "list_files", "grep", "glob"]
        );
        let set = build_registry(&args(&["--root", root, "--disable-extended"])).unwrap();
        assert_eq!(
            set.registry.names(),
            ["read_file", "list_files", "write_file", "delete_file"]
        );
    }

    /// A bad --root is said once, with no OS error repeated and no hint
    /// written for a model.
    #[test]
    fn a_bad_root_is_said_once() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = build_registry(&args(&["--root", missing.to_str().unwrap()])).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "--root {} does not exist; pass an existing directory (it defaults to the current one)",
                missing.display()
            )
        );
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = build_registry(&args(&["--root", file.to_str().unwrap()])).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "--root {} is not a directory; pass a directory",
                file.display()
            )
        );
    }

    #[test]
    fn no_builtins_opens_nothing() {
        let set = build_registry(&args(&[
            "--root",
            "/does/not/exist",
            "--no-builtins",
            "--plan",
        ]))
        .unwrap();
        assert_eq!(set.registry.names(), ["todo_write"]);
        assert_eq!(set.root, None);
    }

    #[test]
    fn timeout_reaches_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let set = build_registry(&args(&[
            "--root",
            dir.path().to_str().unwrap(),
            "--timeout",
            "250ms",
        ]))
        .unwrap();
        assert_eq!(
            set.registry.call_timeout(),
            std::time::Duration::from_millis(250)
        );
    }

    /// `--root R --cache-dir C` (with and without `--plugins`): refused, naming the
    /// cache directory as `shown` and the root canonicalised.
    fn refused_cache(
        root: &std::path::Path,
        cache: &std::path::Path,
        shown: &std::path::Path,
        relation: &str,
    ) {
        let plugins = tempfile::tempdir().unwrap();
        let real_root = std::fs::canonicalize(root).unwrap();
        let (root, cache) = (root.to_str().unwrap(), cache.to_str().unwrap());
        for extra in [&["--plugins", plugins.path().to_str().unwrap()][..], &[]] {
            let mut flags = vec!["--root", root, "--cache-dir", cache];
            flags.extend(extra);
            let err = build_registry(&args(&flags)).unwrap_err();
            let text = format!("{err:#}");
            assert!(
                text.contains(&format!(
                    "the compile cache directory {} is {relation} the storage root {}",
                    shown.display(),
                    real_root.display()
                )),
                "{flags:?}: {text}"
            );
            assert!(text.contains("--no-cache"), "{text}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_dir_inside_equal_to_or_above_the_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let root = top.join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(root.join("cache")).unwrap();
        let cache = root.join("cache");
        refused_cache(&root, &cache, &cache, "inside");
        // Not there yet: resolved through the root.
        let later = root.join("not").join("yet");
        refused_cache(&root, &later, &later, "inside");
        refused_cache(
            &root,
            &root.join("x").join("..").join("c"),
            &root.join("c"),
            "inside",
        );
        refused_cache(&root, &root, &root, "the same directory as");
        refused_cache(&root, &top, &top, "a parent of");
        // Through a symbolic link from outside the root.
        std::os::unix::fs::symlink(&root, top.join("link")).unwrap();
        refused_cache(&root, &top.join("link").join("cache"), &cache, "inside");
        refused_cache(
            &root,
            &top.join("link").join("new"),
            &root.join("new"),
            "inside",
        );
        // The root through a link, the cache by its real path.
        refused_cache(&top.join("link"), &cache, &cache, "inside");
        // A relative cache directory is resolved from the working directory.
        let relative = std::env::current_dir().unwrap();
        refused_cache(
            &relative,
            std::path::Path::new("cache"),
            &std::fs::canonicalize(&relative).unwrap().join("cache"),
            "inside",
        );
        assert!(
            !root.join("not").exists() && !root.join("new").exists(),
            "nothing was created in the root"
        );
        // Next to the root is fine.
        let next = top.join("cache");
        build_registry(&args(&[
            "--root",
            root.to_str().unwrap(),
            "--cache-dir",
            next.to_str().unwrap(),
        ]))
        .unwrap();
    }

    #[tokio::test]
    async fn max_read_bytes_reaches_read_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "0123456789a").unwrap();
        let set = build_registry(&args(&[
            "--root",
            dir.path().to_str().unwrap(),
            "--max-read-bytes",
            "10",
        ]))
        .unwrap();
        let read = set
            .registry
            .dispatch(
                &toolhost::registry::CallContext::new(),
                &toolhost::registry::ToolCall::new("read_file", r#"{"path":"a.md"}"#),
                &toolhost::registry::Environment::default(),
            )
            .await;
        assert_eq!(
            read.unwrap_err(),
            toolhost::registry::ToolError::FileTooLarge {
                tool: "read_file".into(),
                path: "a.md".into(),
                size: 11,
                limit: 10
            }
        );
    }

    #[test]
    fn bad_plugins_dir() {
        let dir = tempfile::tempdir().unwrap();
        let err = build_registry(&args(&[
            "--root",
            dir.path().to_str().unwrap(),
            "--plugins",
            "/does/not/exist",
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--plugins /does/not/exist is not a directory; pass the directory that holds the plugins' .wasm files"
        );
    }
}
