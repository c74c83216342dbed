//! The command line's side of plugins: the plugin host's settings from the flags, the
//! startup report (one line per plugin), and `host inspect`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::{json, Value};
use tracing::{error, info};

use toolhost::registry::{format_duration, Registry};
use toolhost::tools::FilePolicy;
use toolhost::vfs::Storage;
use toolhost_plugin::{
    format_bytes, CompileSource, FileAccess, LoadReport, PluginHost, PluginHostConfig, PluginInfo,
};

use super::args::{PluginFiles, RegistryArgs};
use super::units::format_elapsed;

/// The plugin host kept alive next to the registry whose plugin tools it runs.
pub(crate) type Host = PluginHost;

/// The plugin host's settings.
pub(crate) type Config = PluginHostConfig;

/// The settings `host inspect` uses: the defaults, with `--cache-dir` if given.
pub(crate) fn inspect_config(cache_dir: Option<PathBuf>) -> Config {
    let mut config = PluginHostConfig::default();
    if let Some(dir) = cache_dir {
        config.cache_dir = Some(dir);
    }
    config
}

/// The plugin host's settings from the flags. File access is off unless
/// `--plugin-files` allows it; then plugins reach `storage` (the `--root` store) under
/// `policy`, the same policy as the built-in file tools.
pub(crate) fn host_config(
    args: &RegistryArgs,
    storage: Option<Arc<dyn Storage>>,
    policy: FilePolicy,
) -> PluginHostConfig {
    let mut config = PluginHostConfig::default();
    if let Some(dir) = &args.cache_dir {
        config.cache_dir = Some(dir.clone());
    }
    // The operator's own default is also allowed as a maximum, so raising it past the
    // built-in ceiling does not make every plugin without a manifest fail to load.
    if let Some(timeout) = args.plugin_timeout {
        config.default_limits.timeout = timeout;
        config.max_limits.timeout = config.max_limits.timeout.max(timeout);
    }
    if let Some(memory) = args.plugin_memory {
        config.default_limits.memory_bytes = memory;
        config.max_limits.memory_bytes = config.max_limits.memory_bytes.max(memory);
    }
    config.max_file_access = match args.plugin_files {
        PluginFiles::None => FileAccess::None,
        PluginFiles::Read => FileAccess::Read,
        PluginFiles::ReadWrite => FileAccess::ReadWrite,
    };
    if config.max_file_access != FileAccess::None {
        config.storage = storage;
    }
    config.file_policy = policy;
    config
}

/// Starts a plugin host and loads every plugin in `dir` into `registry`, logging one line
/// per plugin loaded and one per plugin that failed (the others still load).
///
/// # Errors
/// When the plugin host cannot start (the engine's settings were refused).
pub(crate) fn load(
    dir: &Path,
    registry: &Registry,
    config: PluginHostConfig,
) -> anyhow::Result<Host> {
    let host = PluginHost::new(config).context("cannot start the plugin host")?;
    let report = host.load_dir(dir, registry);
    log_report(dir, &report);
    Ok(host)
}

fn log_report(dir: &Path, report: &LoadReport) {
    for plugin in &report.loaded {
        let compile = compile_text(plugin.compile);
        info!(
            "plugin {} loaded: {} tool(s) [{}], {compile}; files: {}, limits: {} per call, {} memory ({})",
            plugin.name,
            plugin.tools.len(),
            plugin.tools.join(", "),
            plugin.grants,
            format_duration(plugin.limits.timeout),
            format_bytes(plugin.limits.memory_bytes),
            plugin.path.display(),
        );
    }
    for failure in &report.failed {
        error!(
            "plugin {} FAILED to load and is skipped: {}",
            failure.path.display(),
            failure.error
        );
    }
    info!(
        "{} plugin(s) loaded, {} failed, from {}",
        report.loaded.len(),
        report.failed.len(),
        dir.display()
    );
}

/// `host inspect`: what the plugin exports, asks for and imports.
///
/// # Errors
/// When the plugin host cannot start or the file is not a loadable plugin.
pub(crate) fn inspect(file: &Path, config: PluginHostConfig) -> anyhow::Result<PluginInfo> {
    let host = PluginHost::new(config).context("cannot start the plugin host")?;
    // The plugin host's errors already name the file.
    Ok(host.inspect(file)?)
}

/// The `--json` form of [`inspect`]'s report.
pub(crate) fn info_json(info: &PluginInfo) -> Value {
    let limits = &info.limits;
    json!({
        "name": info.name,
        "path": info.path,
        "manifest": info.manifest,
        "grants": {
            "files": info.grants.as_str(),
            "allowed_by_default_host": info.grant_allowed,
            "root": info.root,
        },
        "limits": {
            "timeout_ms": u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
            "memory_bytes": limits.memory_bytes,
            "fuel": limits.fuel,
            "max_output_bytes": limits.max_output_bytes,
            "max_stderr_bytes": limits.max_stderr_bytes,
            "max_instances": limits.max_instances,
            "max_tables": limits.max_tables,
        },
        "tools": info.tools,
        "imports": info.imports,
        "exports": info.exports,
        "compile": compile_json(info.compile),
    })
}

fn compile_json(compile: CompileSource) -> Value {
    let (source, took) = match compile {
        CompileSource::Compiled(took) => ("compiled", took),
        CompileSource::CacheHit(took) => ("cache_hit", took),
    };
    json!({ "source": source, "ms": took.as_micros() as f64 / 1e3 })
}

/// The human form of [`inspect`]'s report.
pub(crate) fn info_text(info: &PluginInfo) -> String {
    let mut out = format!("{} ({})\n", info.name, info.path.display());
    let manifest = info.manifest.as_ref().map_or_else(
        || "none (no grants, default limits)".to_owned(),
        |m| m.display().to_string(),
    );
    out += &format!("  manifest: {manifest}\n");
    let mut files = info.grants.as_str().to_owned();
    if let Some(root) = &info.root {
        files += &format!(", confined to {root}/");
    }
    if info.grants != FileAccess::None {
        files += &format!(
            " (the host must allow it: --plugin-files {})",
            info.grants.as_str()
        );
    }
    out += &format!("  file access: {files}\n");
    let limits = &info.limits;
    let fuel = limits
        .fuel
        .map_or_else(|| "no fuel limit".to_owned(), |f| format!("{f} fuel"));
    out += &format!(
        "  limits: {} per call, {} memory, {fuel}, {} output\n",
        format_duration(limits.timeout),
        format_bytes(limits.memory_bytes),
        format_bytes(limits.max_output_bytes as u64),
    );
    out += &format!("  tools ({}):\n", info.tools.len());
    let width = info.tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for tool in &info.tools {
        let summary = tool.description.lines().next().unwrap_or_default().trim();
        out += format!("    {:width$}  {summary}", tool.name).trim_end();
        out += "\n";
    }
    for (title, items) in [("imports", &info.imports), ("exports", &info.exports)] {
        out += &format!("  {title} ({}):\n", items.len());
        for item in items {
            out += &format!("    {item}\n");
        }
    }
    out += &format!("  {}\n", compile_text(info.compile));
    out
}

fn compile_text(compile: CompileSource) -> String {
    match compile {
        CompileSource::Compiled(took) => format!("compiled in {}", format_elapsed(took)),
        CompileSource::CacheHit(took) => format!("cache hit, loaded in {}", format_elapsed(took)),
    }
}
