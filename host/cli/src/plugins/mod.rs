//! The command line's side of plugins: the plugin host's settings from the flags, the
//! startup report (one line per plugin), and `host inspect` (module [`mod@inspect`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;
use tracing::{error, info};

use toolhost::error::ErrorChain;
use toolhost::registry::format_bytes;
use toolhost::registry::{format_duration, Registry};
use toolhost::vfs::FilePolicy;
use toolhost::vfs::Storage;
use toolhost_plugin::cache::CompileSource;
use toolhost_plugin::lock::{LockPolicy, PluginLock};
use toolhost_plugin::{
    ConfigValues, FileAccess, HttpPolicy, LoadReport, PluginHost, PluginHostConfig, PluginLimits,
};

use super::args::{PluginFiles, RegistryArgs};
use super::output::format_elapsed;

mod inspect;

pub(crate) use inspect::{grants_text, info_json, info_text, inspect, load_flags};

/// The settings `host inspect` uses: the defaults, with `--cache-dir` if given.
pub(crate) fn inspect_config(cache_dir: Option<PathBuf>) -> PluginHostConfig {
    let mut config = PluginHostConfig::builder();
    if let Some(dir) = cache_dir {
        config.cache_dir(Some(dir));
    }
    config.build()
}

/// Sets the `--plugin-namespace` values on `config`.
///
/// # Errors
/// A namespace that is not valid (the flag's parser already refuses one).
pub(crate) fn set_namespaces(
    config: &mut toolhost_plugin::PluginHostConfigBuilder,
    namespaces: &[(String, String)],
) -> anyhow::Result<()> {
    for (name, prefix) in namespaces {
        config
            .tool_namespace(name.clone(), prefix.clone())
            .map_err(|err| anyhow::anyhow!("--plugin-namespace {name}={prefix}: {err}"))?;
    }
    Ok(())
}

/// The plugin host's settings from the flags. File access is off unless
/// `--plugin-files` allows it; then plugins reach `storage` (the `--root` store) under
/// `policy`, the same policy as the built-in file tools.
///
/// The maximum a manifest may ask for is `--plugin-max-timeout` / `--plugin-max-memory`,
/// and without them the default (`--plugin-timeout` / `--plugin-memory`, or the built-in
/// default): a manifest may only lower its limits unless the operator says so. A maximum
/// given below the built-in default lowers the default with it.
///
/// # Errors
/// When `--plugin-timeout` or `--plugin-memory` is above its `--plugin-max-*` flag.
pub(crate) fn host_config(
    args: &RegistryArgs,
    storage: Option<Arc<dyn Storage>>,
    policy: FilePolicy,
) -> anyhow::Result<PluginHostConfig> {
    let mut config = PluginHostConfig::builder();
    if let Some(dir) = &args.cache_dir {
        config.cache_dir(Some(dir.clone()));
    }
    let (mut default, mut max) = (PluginLimits::default(), PluginLimits::default());
    match (args.plugin_timeout, args.plugin_max_timeout) {
        (Some(timeout), Some(ceiling)) if timeout > ceiling => bail!(
            "--plugin-timeout {} is above --plugin-max-timeout {}; raise --plugin-max-timeout or lower --plugin-timeout",
            format_duration(timeout),
            format_duration(ceiling)
        ),
        (timeout, ceiling) => {
            let ceiling = ceiling.or(timeout).unwrap_or(default.timeout());
            let timeout = timeout.unwrap_or(default.timeout()).min(ceiling);
            default = default.with_timeout(timeout);
            max = max.with_timeout(ceiling);
        }
    }
    match (args.plugin_memory, args.plugin_max_memory) {
        (Some(memory), Some(ceiling)) if memory > ceiling => bail!(
            "--plugin-memory {} is above --plugin-max-memory {}; raise --plugin-max-memory or lower --plugin-memory",
            format_bytes(memory),
            format_bytes(ceiling)
        ),
        (memory, ceiling) => {
            let ceiling = ceiling.or(memory).unwrap_or(default.memory_bytes());
            let memory = memory.unwrap_or(default.memory_bytes()).min(ceiling);
            default = default.with_memory_bytes(memory);
            max = max.with_memory_bytes(ceiling);
        }
    }
    config.default_limits(default).max_limits(max);
    if let Some(pool) = args.plugin_pool_memory {
        config.max_pool_memory(pool);
    }
    let access = match args.plugin_files {
        PluginFiles::None => FileAccess::None,
        PluginFiles::Read => FileAccess::Read,
        PluginFiles::ReadWrite => FileAccess::ReadWrite,
    };
    config.max_file_access(access);
    if access != FileAccess::None {
        config.storage(storage);
    }
    let mut http = HttpPolicy::default()
        .with_allow(args.plugin_http.clone())
        .with_allow_nets(args.plugin_http_allow_net.clone());
    if let Some(observer) = crate::observe::http_observer() {
        http = http.with_observer(observer);
    }
    config
        .file_policy(policy)
        .http(http)
        .config_values(config_values(args, |var| std::env::var(var).ok())?)
        .plugin_ask(args.plugin_ask)
        .plugin_sampling(args.plugin_sampling)
        .plugin_tools((!args.plugin_tools.is_empty()).then(|| {
            toolhost_plugin::manifest::ToolNames::only(args.plugin_tools.iter().cloned())
        }));
    set_namespaces(&mut config, &args.plugin_namespace)?;
    Ok(config.build())
}

/// The plugins' configuration values from `--plugin-config-file`, then
/// `--plugin-config-env`, then `--plugin-config` (a later source replaces an earlier
/// one's value for the same key). `env` reads the host's environment, only for the
/// variables these flags name.
///
/// # Errors
/// A value that is not valid, a variable that is not set, a file that cannot be read;
/// no error shows a value.
fn config_values(
    args: &RegistryArgs,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<ConfigValues> {
    let mut values = ConfigValues::default();
    if let Some(file) = &args.plugin_config_file {
        crate::secret_file::warn_if_others_may_access("--plugin-config-file", file);
        values
            .parse_file(file, &env)
            .map_err(|err| anyhow::anyhow!("--plugin-config-file {err}"))?;
    }
    for text in &args.plugin_config_env {
        values
            .set_from_env(text, &env)
            .map_err(|err| anyhow::anyhow!("--plugin-config-env: {err}"))?;
    }
    for text in &args.plugin_config {
        values
            .set_assignment(text)
            .map_err(|err| anyhow::anyhow!("--plugin-config: {err}"))?;
    }
    Ok(values)
}

/// Starts a plugin host and loads every plugin in `dir` into `registry`, logging one line
/// per plugin loaded and one per plugin that failed (the others still load). When `dir`
/// holds a `plugins.lock`, only the components and manifests it pins load.
///
/// # Errors
/// When the plugin host cannot start (the engine's settings were refused), the lock file
/// cannot be read or is invalid, or there is none and `require_lock` or a `policy`
/// (`--require-signer`) is set. The policy refuses lock entries before anything loads.
pub(crate) fn load(
    dir: &Path,
    registry: &Registry,
    config: PluginHostConfig,
    require_lock: bool,
    policy: Option<&LockPolicy>,
) -> anyhow::Result<(Arc<PluginHost>, LoadReport)> {
    // A lock that cannot be read is a set-up error, never "no pins". Its errors name it.
    let mut lock = PluginLock::read(dir)?;
    if lock.is_none() && policy.is_some() {
        bail!(
            "--require-signer: {} does not exist, so no plugin has a signer; fetch the plugins with `host pull REF --plugins {} --verify-key KEY.pub`",
            PluginLock::path_in(dir).display(),
            dir.display()
        );
    }
    if let (Some(lock), Some(policy)) = (lock.as_mut(), policy) {
        policy(lock);
    }
    if lock.is_none() && require_lock {
        bail!(
            "--require-lock: {} does not exist; pin the plugins of {} with `host lock --plugins {}`, or fetch them with `host pull`",
            PluginLock::path_in(dir).display(),
            dir.display(),
            dir.display()
        );
    }
    // PluginErrorKind::Host already says "the plugin host cannot start: ...".
    let host = PluginHost::new(config)?;
    let report = host.load_dir_pinned(dir, registry, lock.as_ref());
    log_report(dir, &report);
    Ok((Arc::new(host), report))
}

/// Logs what the watcher did on one change (`--watch`): inside the MCP broadcast span, so
/// clients that asked for log lines hear of it too.
pub(crate) fn log_watch_event(event: &toolhost_plugin::watch::WatchEvent) {
    use toolhost_plugin::watch::WatchEvent;
    let _span = toolhost_mcp::broadcast_span().entered();
    crate::observe::watch_event(event);
    match event {
        WatchEvent::Failed { .. } => error!(target: "plugin", "{event}"),
        _ => info!(target: "plugin", "{event}"),
    }
}

fn log_report(dir: &Path, report: &LoadReport) {
    for plugin in &report.loaded {
        let compile = compile_text(plugin.compile);
        let http = if plugin.http.is_empty() {
            "none".to_owned()
        } else {
            plugin
                .http
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let keys: Vec<String> = plugin
            .config
            .entries()
            .iter()
            .map(|entry| entry.key.name.clone())
            .collect();
        info!(
            "plugin {} loaded: {} tool(s) [{}], {compile}; files: {}, http: {http}, config: [{}], limits: {} per call, {} memory ({})",
            plugin.name,
            plugin.tools.len(),
            plugin.tools.join(", "),
            plugin.grants,
            keys.join(", "),
            format_duration(plugin.limits.timeout()),
            format_bytes(plugin.limits.memory_bytes()),
            plugin.path.display(),
        );
    }
    for failure in &report.failed {
        // The error names the file; its chain holds the OS error, if any.
        error!(
            "plugin FAILED to load and is skipped: {}",
            ErrorChain(&failure.error)
        );
    }
    let pins = match &report.lock {
        Some(lock) => format!(" (pinned by {})", lock.display()),
        None => String::new(),
    };
    info!(
        "{} plugin(s) loaded, {} failed, from {}{pins}",
        report.loaded.len(),
        report.failed.len(),
        dir.display()
    );
}

fn compile_text(compile: CompileSource) -> String {
    match compile {
        CompileSource::Compiled(took) => format!("compiled in {}", format_elapsed(took)),
        CompileSource::CacheHit(took) => format!("cache hit, loaded in {}", format_elapsed(took)),
        CompileSource::Quick(took) => format!(
            "quick code compiled in {} (optimized code follows from the background)",
            format_elapsed(took)
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::args::Cli;

    fn args(extra: &[&str]) -> RegistryArgs {
        crate::args::registry_args_from(extra).unwrap()
    }

    fn config(extra: &[&str]) -> anyhow::Result<PluginHostConfig> {
        host_config(&args(extra), None, FilePolicy::default())
    }

    /// (default timeout, max timeout, default memory, max memory)
    fn limits(config: &PluginHostConfig) -> (Duration, Duration, u64, u64) {
        (
            config.default_limits().timeout(),
            config.max_limits().timeout(),
            config.default_limits().memory_bytes(),
            config.max_limits().memory_bytes(),
        )
    }

    #[test]
    fn the_maximum_is_the_default_unless_raised() {
        let secs = Duration::from_secs;
        let config = config(&[]).unwrap();
        assert_eq!(limits(&config), (secs(10), secs(10), 64 << 20, 64 << 20));
        assert_eq!(config.max_pool_memory(), 4 << 30);
        // The operator's own default is its maximum too.
        let raised = config_of(&["--plugin-timeout", "20s", "--plugin-memory", "128MiB"]);
        assert_eq!(limits(&raised), (secs(20), secs(20), 128 << 20, 128 << 20));
        // Raising only the ceiling lets manifests ask for more; the default stays.
        let ceiling = config_of(&[
            "--plugin-max-timeout",
            "30s",
            "--plugin-max-memory",
            "256MiB",
            "--plugin-pool-memory",
            "8GiB",
        ]);
        assert_eq!(limits(&ceiling), (secs(10), secs(30), 64 << 20, 256 << 20));
        assert_eq!(ceiling.max_pool_memory(), 8 << 30);
        // A ceiling under the built-in default lowers the default with it.
        let lowered = config_of(&["--plugin-max-timeout", "2s", "--plugin-max-memory", "16MiB"]);
        assert_eq!(limits(&lowered), (secs(2), secs(2), 16 << 20, 16 << 20));
    }

    fn config_of(extra: &[&str]) -> PluginHostConfig {
        config(extra).unwrap()
    }

    #[test]
    fn a_default_above_its_ceiling_is_refused_naming_both_flags() {
        let err =
            config(&["--plugin-memory", "128MiB", "--plugin-max-memory", "64MiB"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--plugin-memory 128 MiB is above --plugin-max-memory 64 MiB; raise --plugin-max-memory or lower --plugin-memory"
        );
        let err = config(&["--plugin-timeout", "20s", "--plugin-max-timeout", "5s"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--plugin-timeout 20s is above --plugin-max-timeout 5s; raise --plugin-max-timeout or lower --plugin-timeout"
        );
    }

    #[test]
    fn a_manifest_raising_its_memory_needs_the_ceiling_flag() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(dir.path().join("p.toml"), "[limits]\nmemory_mib = 128\n").unwrap();
        let path = toolhost_plugin::manifest::manifest_path(&wasm);
        let refused = toolhost_plugin::manifest::resolve(&wasm, &config_of(&[])).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("(--plugin-max-memory 128MiB, PluginHostConfig::max_limits)"),
            "{refused}"
        );
        assert_eq!(refused.path(), Some(path.as_path()));
        let allowed = toolhost_plugin::manifest::resolve(
            &wasm,
            &config_of(&["--plugin-max-memory", "128MiB"]),
        )
        .unwrap();
        assert_eq!(allowed.limits.memory_bytes(), 128 << 20);
    }

    #[test]
    fn http_and_config_flags_reach_the_plugin_host_and_errors_hide_values() {
        let host = config_of(&[
            "--plugin-http",
            "api.github.com",
            "--plugin-http",
            "http://127.0.0.1:8080",
            "--plugin-http-allow-net",
            "127.0.0.1",
            "--plugin-config",
            "gh.REPO=octo/hello",
        ]);
        let allow: Vec<String> = host
            .http()
            .allow()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(allow, ["api.github.com", "http://127.0.0.1:8080"]);
        assert_eq!(host.http().allow_nets()[0].to_string(), "127.0.0.1/32");
        assert_eq!(
            host.config_values().get("gh", "REPO").unwrap().expose(),
            "octo/hello"
        );
        // Nothing by default.
        let default = config_of(&[]);
        assert!(default.http().allow().is_empty() && default.http().allow_nets().is_empty());
        assert!(default.config_values().is_empty());

        let bad =
            Cli::try_parse_from(["host", "tools", "--plugin-http", "x.org/path"]).unwrap_err();
        assert!(
            bad.to_string().contains(
                "\"x.org/path\" is not a host pattern: give a host, not a URL with a path or query"
            ),
            "{bad}"
        );
        let bad =
            Cli::try_parse_from(["host", "tools", "--plugin-http-allow-net", "lan"]).unwrap_err();
        assert!(
            bad.to_string()
                .contains("\"lan\" is not an IP address or network"),
            "{bad}"
        );
        let err = config(&["--plugin-config", "gh.bad-key=hunter2"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--plugin-config: the config key after \"gh.\" (7 characters, not shown: a mistyped separator may have put part of a value in it) is not a valid name: use letters, digits and _, not starting with a digit (like an environment variable, e.g. GITHUB_TOKEN)"
        );
    }

    #[test]
    fn config_comes_from_the_environment_only_when_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[gh]\nREPO = \"from-file\"\nTOKEN = { env = \"GH_TOKEN\" }\n",
        )
        .unwrap();
        let env = |var: &str| match var {
            "GH_TOKEN" => Some("tok-from-env".to_owned()),
            "REGION" => Some("eu".to_owned()),
            _ => None,
        };
        let values = config_values(
            &args(&[
                "--plugin-config-file",
                file.to_str().unwrap(),
                "--plugin-config-env",
                "gh.REGION",
                "--plugin-config",
                "gh.REPO=from-flag",
            ]),
            env,
        )
        .unwrap();
        assert_eq!(values.keys("gh"), ["REGION", "REPO", "TOKEN"]);
        assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "tok-from-env");
        // A later source wins: the flag over the file.
        assert_eq!(values.get("gh", "REPO").unwrap().expose(), "from-flag");
        let err =
            config_values(&args(&["--plugin-config-env", "gh.MISSING=NOPE"]), env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--plugin-config-env: gh.MISSING is to come from the environment variable NOPE, which is not set (or not UTF-8); export it, or give the value another way"
        );
    }

    #[test]
    fn a_pool_cap_too_small_for_one_call_stops_the_setup() {
        let root = tempfile::tempdir().unwrap();
        let plugins = tempfile::tempdir().unwrap();
        let err = crate::setup::build_registry(&args(&[
            "--root",
            root.path().to_str().unwrap(),
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--plugin-max-memory",
            "256MiB",
            "--plugin-pool-memory",
            "128MiB",
        ]))
        .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "the plugin host cannot start: one plugin call needs 256 MiB of pooled memory (1 slot of 256 MiB), above the pool's cap of 128 MiB; raise the cap (--plugin-pool-memory, PluginHostConfig::max_pool_memory) or lower the plugins' maximum memory (--plugin-max-memory)"
        );
    }
}
