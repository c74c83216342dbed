//! Resolving a manifest against the host's policy: grants checked against what the
//! operator allows, limits and import budgets lowered (never raised) from the host's
//! maximum, HTTP hosts and config values matched; the result is a [`Resolved`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolhost::vfs::{FilePolicy, PolicyError};

use super::{manifest_path, parse_bytes, LimitOverrides, Manifest};
use crate::http_policy::HostPattern;
use crate::plugin_config::PluginConfig;
use crate::{FileAccess, PluginError, PluginErrorKind, PluginHostConfig, PluginLimits};

/// What a plugin gets: the manifest resolved against the host's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The manifest file, when there is one.
    pub manifest_path: Option<PathBuf>,
    /// The manifest as read.
    pub manifest: Option<Manifest>,
    /// The file access granted.
    pub files: FileAccess,
    /// The sub-tree file access is confined to.
    pub root: Option<String>,
    /// The limits every call runs under.
    pub limits: PluginLimits,
    /// The hosts the plugin may send HTTP requests to (each covered by the operator's
    /// [`HttpPolicy::allow`](crate::HttpPolicy::allow)).
    pub http: Vec<HostPattern>,
    /// The plugin's configuration: its declared keys with the operator's values.
    pub config: PluginConfig,
    /// Keys the operator set for this plugin that its manifest does not declare (not
    /// given to it; the loader warns, naming them).
    pub undeclared_config: Vec<String>,
}

/// Resolves the manifest of the plugin at `wasm` (if any) against `config`.
///
/// # Errors
/// [`PluginErrorKind::Manifest`], [`PluginErrorKind::GrantDenied`], [`PluginErrorKind::LimitTooHigh`],
/// [`PluginErrorKind::Io`].
pub fn resolve(wasm: &Path, config: &PluginHostConfig) -> Result<Resolved, PluginError> {
    let path = manifest_path(wasm);
    resolve_bytes(wasm, crate::read::read_manifest_bytes(&path)?, config)
}

/// As [`resolve`], for a manifest already read: `bytes` is its content, `None` when the
/// plugin has none. The loader reads the manifest once, checks its digest against the
/// lock file, and resolves those very bytes.
///
/// # Errors
/// As [`resolve`].
pub fn resolve_bytes(
    wasm: &Path,
    bytes: Option<Vec<u8>>,
    config: &PluginHostConfig,
) -> Result<Resolved, PluginError> {
    resolve_bytes_with(wasm, bytes, config, Check::Load)
}

/// [`resolve_bytes`] for loading ([`Check::Load`]) or inspecting ([`Check::Inspect`]).
pub(crate) fn resolve_bytes_with(
    wasm: &Path,
    bytes: Option<Vec<u8>>,
    config: &PluginHostConfig,
    check: Check,
) -> Result<Resolved, PluginError> {
    let path = manifest_path(wasm);
    match bytes {
        None => apply_config(
            &path,
            Resolved {
                manifest_path: None,
                manifest: None,
                files: FileAccess::None,
                root: None,
                limits: config.default_limits.clone(),
                http: Vec::new(),
                config: PluginConfig::default(),
                undeclared_config: Vec::new(),
            },
            config,
            check,
        ),
        Some(bytes) => apply_with(&path, parse_bytes(&path, bytes)?, config, check),
    }
}

/// The `[limits]` keys of the import budgets ([`ImportLimits`](crate::limits::ImportLimits)).
/// Any value is accepted here (0 forbids the operation); the host's maximum caps them.
fn apply_imports(overrides: &LimitOverrides, imports: &mut crate::limits::ImportLimits) {
    fn set<T: Copy>(target: &mut T, value: Option<T>) {
        if let Some(value) = value {
            *target = value;
        }
    }
    set(&mut imports.max_file_calls, overrides.max_file_calls);
    set(&mut imports.max_read_bytes, overrides.max_read_bytes);
    set(
        &mut imports.max_write_bytes_per_call,
        overrides.max_write_bytes_per_call,
    );
    set(
        &mut imports.max_files_written_per_call,
        overrides.max_files_written_per_call,
    );
    set(
        &mut imports.max_write_bytes_total,
        overrides.max_write_bytes_total,
    );
    set(
        &mut imports.max_files_written_total,
        overrides.max_files_written_total,
    );
    set(
        &mut imports.log_lines_per_second,
        overrides.log_lines_per_second,
    );
    set(&mut imports.log_burst, overrides.log_burst);
}

/// Checks `grants.root` with the path policy of the built-in tools: the path rules, and
/// hidden segments when the host hides hidden paths. Otherwise a root such as `.git`
/// or `.ssh` would open, to a plugin, what every built-in tool refuses.
fn check_root(root: &str, policy: &FilePolicy) -> Result<(), String> {
    policy.check_root("root", root).map_err(|err| match err {
        PolicyError::Hidden { .. } => format!(
            "grants.root is \"{}\", a hidden path (a segment starts with _ or .), and this host hides hidden paths from every tool (--hide-hidden); give a sub-directory without hidden segments, or start the host without --hide-hidden",
            root.escape_debug()
        ),
        other => format!("grants.root: {other}; give a relative sub-directory such as \"docs\""),
    })
}

/// Applies a parsed manifest to the host's defaults and checks it against the maxima.
///
/// # Errors
/// As [`resolve`].
pub fn apply(
    path: &Path,
    manifest: Manifest,
    config: &PluginHostConfig,
) -> Result<Resolved, PluginError> {
    apply_with(path, manifest, config, Check::Load)
}

/// What [`apply_with`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Loading: everything the host does not allow is an error.
    Load,
    /// Inspecting: show what the manifest asks for, even beyond what the host allows
    /// (file and HTTP grants, missing config values); the caller reports those.
    Inspect,
}

/// Resolves the manifest of the plugin at `wasm` for inspection: as [`resolve`], but a
/// grant the host would refuse and a missing config value are not errors.
///
/// # Errors
/// As [`resolve`], except [`PluginErrorKind::GrantDenied`], [`PluginErrorKind::HttpDenied`] and
/// [`PluginErrorKind::ConfigMissing`].
pub fn resolve_for_inspection(
    wasm: &Path,
    config: &PluginHostConfig,
) -> Result<Resolved, PluginError> {
    let path = manifest_path(wasm);
    resolve_bytes_with(
        wasm,
        crate::read::read_manifest_bytes(&path)?,
        config,
        Check::Inspect,
    )
}

fn apply_with(
    path: &Path,
    manifest: Manifest,
    config: &PluginHostConfig,
    check: Check,
) -> Result<Resolved, PluginError> {
    let invalid = |message: String| PluginErrorKind::Manifest { message }.at(path.to_owned());
    let files = match manifest.grants.files.as_deref() {
        None => FileAccess::None,
        Some(text) => FileAccess::parse(text).ok_or_else(|| {
            invalid(format!(
                "grants.files is \"{text}\"; use \"none\", \"read\" or \"read-write\""
            ))
        })?,
    };
    if let Some(root) = &manifest.grants.root {
        check_root(root, &config.file_policy).map_err(invalid)?;
    }
    if files == FileAccess::ReadWrite && config.file_policy.read_only() {
        return Err(invalid(
            "grants.files is \"read-write\", but this host is read-only (--read-only): no tool may write files; ask for \"read\", or start the host without --read-only".into(),
        ));
    }
    if files > config.max_file_access && check == Check::Load {
        return Err(PluginErrorKind::GrantDenied {
            asked: files,
            allowed: config.max_file_access,
        }
        .at(path.to_owned()));
    }

    let overrides = &manifest.limits;
    let mut limits = config.default_limits.clone();
    if let Some(ms) = overrides.timeout_ms {
        if ms == 0 {
            return Err(invalid("limits.timeout_ms is 0; give at least 1".into()));
        }
        limits.timeout = Duration::from_millis(ms);
    }
    if overrides.task_timeout_ms == Some(0) {
        return Err(invalid(
            "limits.task_timeout_ms is 0; give at least 1".into(),
        ));
    }
    if let Some(mib) = overrides.memory_mib {
        limits.memory_bytes = mib
            .checked_mul(1024 * 1024)
            .filter(|&bytes| bytes > 0)
            .ok_or_else(|| invalid(format!("limits.memory_mib is {mib}; give 1 to 4096")))?;
    }
    if let Some(fuel) = overrides.fuel {
        if fuel == 0 {
            return Err(invalid(
                "limits.fuel is 0; give a positive amount, or leave it out for no fuel limit"
                    .into(),
            ));
        }
        limits.fuel = Some(fuel);
    }
    let set = |target: &mut usize, value: Option<usize>| {
        if let Some(value) = value {
            *target = value;
        }
    };
    set(&mut limits.max_output_bytes, overrides.max_output_bytes);
    set(&mut limits.max_stderr_bytes, overrides.max_stderr_bytes);
    if let Some(n) = overrides.max_instances {
        limits.max_instances = n;
    }
    if let Some(n) = overrides.max_tables {
        limits.max_tables = n;
    }
    apply_imports(overrides, &mut limits.imports);
    if let Some(n) = overrides.max_handles {
        limits.max_handles = n;
    }
    apply_http_limits(overrides, &mut limits.http).map_err(invalid)?;
    if let Some((limit, asked, max)) = limits.first_above(&config.max_limits) {
        return Err(PluginErrorKind::LimitTooHigh { limit, asked, max }.at(path.to_owned()));
    }
    let mut http = Vec::with_capacity(manifest.grants.http.len());
    for text in &manifest.grants.http {
        let pattern: HostPattern = text
            .parse()
            .map_err(|err| invalid(format!("grants.http: {err}")))?;
        if !http.contains(&pattern) {
            http.push(pattern);
        }
    }
    match config.http.first_denied(&http) {
        Some(denied) if check == Check::Load => {
            return Err(PluginErrorKind::HttpDenied {
                host: denied.to_string(),
            }
            .at(path.to_owned()))
        }
        _ => {}
    }
    apply_config(
        path,
        Resolved {
            manifest_path: Some(path.to_owned()),
            root: manifest.grants.root.clone(),
            config: PluginConfig::default(),
            undeclared_config: Vec::new(),
            manifest: Some(manifest),
            files,
            limits,
            http,
        },
        config,
        check,
    )
}

/// The `[limits]` keys of HTTP ([`HttpLimits`](crate::limits::HttpLimits)).
fn apply_http_limits(
    overrides: &LimitOverrides,
    http: &mut crate::limits::HttpLimits,
) -> Result<(), String> {
    if let Some(n) = overrides.max_http_requests {
        http.max_requests = n;
    }
    if let Some(n) = overrides.max_http_request_bytes {
        http.max_request_bytes = n;
    }
    if let Some(n) = overrides.max_http_response_bytes {
        http.max_response_bytes = n;
    }
    if let Some(ms) = overrides.http_connect_timeout_ms {
        if ms == 0 {
            return Err("limits.http_connect_timeout_ms is 0; give at least 1".into());
        }
        http.connect_timeout = Duration::from_millis(ms);
    }
    Ok(())
}

/// Resolves the manifest's `[config]` keys against the operator's values for the plugin
/// (named by the `.toml`/`.wasm` file stem).
fn apply_config(
    path: &Path,
    mut resolved: Resolved,
    config: &PluginHostConfig,
    check: Check,
) -> Result<Resolved, PluginError> {
    let plugin = path
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or_default();
    let declared = resolved
        .manifest
        .as_ref()
        .map(|manifest| manifest.config.as_slice())
        .unwrap_or_default();
    let (plugin_config, undeclared) =
        PluginConfig::resolve(plugin, declared, &config.config, check == Check::Load).map_err(
            |key| {
                PluginErrorKind::ConfigMissing {
                    plugin: plugin.to_owned(),
                    key: key.name,
                    description: key.description,
                }
                .at(path.to_owned())
            },
        )?;
    resolved.config = plugin_config;
    resolved.undeclared_config = undeclared;
    Ok(resolved)
}
