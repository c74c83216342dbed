//! A plugin's manifest, `NAME.toml` next to `NAME.wasm`: the grants it asks for and the
//! limits it wants, resolved against the host's policy.
//!
//! ```toml
//! # wordcount.toml
//! [grants]
//! files = "read"          # "none" (default), "read" or "read-write"
//! root = "docs"           # optional: the plugin sees only this sub-tree, as its root
//!
//! [limits]                # each optional; the host's default applies otherwise
//! timeout_ms = 5000       # wall time per call
//! memory_mib = 32         # linear memory
//! fuel = 1000000          # instructions per call (roughly)
//! max_output_bytes = 65536
//! max_stderr_bytes = 16384
//! max_instances = 16
//! max_tables = 16
//! # what the plugin may do through the host's imports (see ImportLimits); a manifest
//! # may only lower these below the host's maximum (by default, the defaults)
//! max_file_calls = 1000               # files calls per tool call
//! max_read_bytes = 268435456          # bytes read per tool call
//! max_write_bytes_per_call = 16777216 # bytes written per tool call
//! max_files_written_per_call = 100    # files written per tool call
//! max_write_bytes_total = 1073741824  # bytes written over the host's lifetime
//! max_files_written_total = 10000     # files written over the host's lifetime
//! log_lines_per_second = 100          # log lines a second, all calls together
//! log_burst = 1000                    # log lines at once before the rate applies
//! max_handles = 256       # host handles (pollables, streams) held at once
//! ```
//!
//! No manifest means no grant and the default limits. An unknown key is an error naming
//! it. A manifest asking for more file access than the host allows is refused
//! ([`PluginErrorKind::GrantDenied`]): the plugin is not loaded, and the log says how to
//! allow it. Refusing, rather than loading with less, keeps a tool that could never work
//! out of the model's tool list. A limit above the host's maximum is refused the same
//! way ([`PluginErrorKind::LimitTooHigh`]). The host's maximum is, unless the operator raises
//! it, its default: a manifest may lower its limits, not raise them.
//!
//! The manifest must be a regular file of at most
//! [`MAX_MANIFEST_BYTES`](super::MAX_MANIFEST_BYTES): a FIFO, device or directory is
//! refused without being read ([`PluginErrorKind::NotAFile`]), so it cannot block start-up.
//!
//! # Sandbox
//! `grants.root` is checked with the host's path policy, as any path argument of a
//! built-in tool ([`FilePolicy::check_root`]): a root with a hidden segment (`.git`,
//! `.ssh`, `_private`) is refused when the host hides hidden paths, and a `read-write`
//! grant is refused when the host is read-only. Every path the plugin then passes is
//! checked again as the full store path (root + path) by the `files` import.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use toolhost::vfs::{FilePolicy, PolicyError};

use super::{FileAccess, PluginError, PluginErrorKind, PluginHostConfig, PluginLimits};

/// The manifest as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `[grants]`.
    #[serde(default)]
    pub grants: Grants,
    /// `[limits]`.
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// The `[grants]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// `files = "none" | "read" | "read-write"`.
    #[serde(default)]
    pub files: Option<String>,
    /// `root = "sub/dir"`: confines file access to that sub-tree.
    #[serde(default)]
    pub root: Option<String>,
}

/// The `[limits]` table; each key overrides the host's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Wall time per call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Linear memory cap, in MiB.
    pub memory_mib: Option<u64>,
    /// Fuel per call.
    pub fuel: Option<u64>,
    /// Cap on the result's JSON text, in bytes.
    pub max_output_bytes: Option<usize>,
    /// Bytes of stderr (and stdout) kept per call.
    pub max_stderr_bytes: Option<usize>,
    /// Core instances per store.
    pub max_instances: Option<u32>,
    /// Tables (and memories) per store.
    pub max_tables: Option<u32>,
    /// `files` calls per tool call.
    pub max_file_calls: Option<u32>,
    /// Bytes read through `files` per tool call.
    pub max_read_bytes: Option<u64>,
    /// Bytes written through `files` per tool call.
    pub max_write_bytes_per_call: Option<u64>,
    /// Files written through `files` per tool call.
    pub max_files_written_per_call: Option<u32>,
    /// Bytes written by the plugin over the host's lifetime.
    pub max_write_bytes_total: Option<u64>,
    /// Files written by the plugin over the host's lifetime.
    pub max_files_written_total: Option<u64>,
    /// Log lines per second (all calls of the plugin together).
    pub log_lines_per_second: Option<u32>,
    /// Log lines at once before the rate applies.
    pub log_burst: Option<u32>,
    /// Host handles (pollables, streams) held at once.
    pub max_handles: Option<u32>,
}

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
}

/// The manifest path of a plugin: `NAME.toml` next to `NAME.wasm`.
pub fn manifest_path(wasm: &Path) -> PathBuf {
    wasm.with_extension("toml")
}

/// Reads and parses `path`; `Ok(None)` when there is no such file.
///
/// # Errors
/// [`PluginErrorKind::Io`] when it exists but cannot be read, [`PluginErrorKind::NotAFile`] when
/// it is not a regular file, [`PluginErrorKind::FileTooLarge`] over
/// [`MAX_MANIFEST_BYTES`](super::MAX_MANIFEST_BYTES), [`PluginErrorKind::Manifest`] when it
/// is not valid.
pub fn read(path: &Path) -> Result<Option<Manifest>, PluginError> {
    let bytes = match super::read::read_regular_file(path, "manifest", super::MAX_MANIFEST_BYTES) {
        Ok(bytes) => bytes,
        Err(err)
            if matches!(err.kind(), PluginErrorKind::Io(source)
                if source.kind() == std::io::ErrorKind::NotFound) =>
        {
            return Ok(None)
        }
        Err(err) => return Err(err),
    };
    let text = String::from_utf8(bytes).map_err(|err| {
        PluginErrorKind::Manifest {
            message: format!(
                "it is not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
                err.utf8_error().valid_up_to()
            ),
        }
        .at(path.to_owned())
    })?;
    parse(path, &text).map(Some)
}

/// Parses manifest text; `path` is for the error message.
///
/// # Errors
/// [`PluginErrorKind::Manifest`] naming the bad or unknown key.
pub fn parse(path: &Path, text: &str) -> Result<Manifest, PluginError> {
    toml::from_str(text).map_err(|err| {
        let line = err
            .span()
            .map(|span| format!("line {}: ", text.as_bytes()[..span.start.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1))
            .unwrap_or_default();
        PluginErrorKind::Manifest { message: format!(
                "{line}{}; the keys are [grants] files, root and [limits] timeout_ms, memory_mib, fuel, max_output_bytes, max_stderr_bytes, max_instances, max_tables, max_file_calls, max_read_bytes, max_write_bytes_per_call, max_files_written_per_call, max_write_bytes_total, max_files_written_total, log_lines_per_second, log_burst, max_handles",
                err.message().trim()
            ) }.at(path.to_owned())
    })
}

/// Resolves the manifest of the plugin at `wasm` (if any) against `config`.
///
/// # Errors
/// [`PluginErrorKind::Manifest`], [`PluginErrorKind::GrantDenied`], [`PluginErrorKind::LimitTooHigh`],
/// [`PluginErrorKind::Io`].
pub fn resolve(wasm: &Path, config: &PluginHostConfig) -> Result<Resolved, PluginError> {
    let path = manifest_path(wasm);
    match read(&path)? {
        None => Ok(Resolved {
            manifest_path: None,
            manifest: None,
            files: FileAccess::None,
            root: None,
            limits: config.default_limits.clone(),
        }),
        Some(manifest) => apply(&path, manifest, config),
    }
}

/// The `[limits]` keys of the import budgets ([`ImportLimits`](super::ImportLimits)).
/// Any value is accepted here (0 forbids the operation); the host's maximum caps them.
fn apply_imports(overrides: &LimitOverrides, imports: &mut super::ImportLimits) {
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
    if files == FileAccess::ReadWrite && config.file_policy.read_only {
        return Err(invalid(
            "grants.files is \"read-write\", but this host is read-only (--read-only): no tool may write files; ask for \"read\", or start the host without --read-only".into(),
        ));
    }
    if files > config.max_file_access {
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
    if let Some((limit, asked, max)) = limits.first_above(&config.max_limits) {
        return Err(PluginErrorKind::LimitTooHigh { limit, asked, max }.at(path.to_owned()));
    }
    Ok(Resolved {
        manifest_path: Some(path.to_owned()),
        root: manifest.grants.root.clone(),
        manifest: Some(manifest),
        files,
        limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_file_access: FileAccess) -> PluginHostConfig {
        PluginHostConfig {
            cache_dir: None,
            max_file_access,
            ..PluginHostConfig::default()
        }
    }

    fn resolve_text(text: &str, config: &PluginHostConfig) -> Result<Resolved, PluginError> {
        let path = Path::new("plugins/p.toml");
        apply(path, parse(path, text)?, config)
    }

    #[test]
    fn full_manifest_parses_and_overrides_within_max() {
        let text = r#"
            [grants]
            files = "read"
            root = "docs"
            [limits]
            timeout_ms = 5000
            memory_mib = 32
            fuel = 1000000
            max_output_bytes = 4096
        "#;
        let resolved = resolve_text(text, &config(FileAccess::ReadWrite)).unwrap();
        assert_eq!(resolved.files, FileAccess::Read);
        assert_eq!(resolved.root.as_deref(), Some("docs"));
        assert_eq!(resolved.limits.timeout, Duration::from_millis(5000));
        assert_eq!(resolved.limits.memory_bytes, 32 << 20);
        assert_eq!(resolved.limits.fuel, Some(1_000_000));
        assert_eq!(resolved.limits.max_output_bytes, 4096);
        assert_eq!(
            resolved.limits.max_stderr_bytes,
            PluginLimits::default().max_stderr_bytes
        );
    }

    #[test]
    fn empty_manifest_is_the_defaults_with_no_grant() {
        let resolved = resolve_text("", &config(FileAccess::ReadWrite)).unwrap();
        assert_eq!(resolved.files, FileAccess::None);
        assert_eq!(resolved.limits, PluginLimits::default());
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        for (text, line, key) in [
            ("[grants]\nnetwork = true\n", 2, "network"),
            ("[limits]\ntimeout_ms = 5\ncpu = 3\n", 3, "cpu"),
            ("[extra]\n", 1, "extra"),
        ] {
            let err = resolve_text(text, &config(FileAccess::None)).unwrap_err();
            assert!(
                matches!(err.kind(), PluginErrorKind::Manifest { .. }),
                "{err:?}"
            );
            let message = err.to_string();
            let start = format!(
                "plugins/p.toml: invalid plugin manifest: line {line}: unknown field `{key}`"
            );
            assert!(message.starts_with(&start), "{message}");
        }
    }

    #[test]
    fn bad_values_say_what_to_give() {
        let err = resolve_text("[grants]\nfiles = \"all\"\n", &config(FileAccess::None))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("grants.files is \"all\"; use \"none\", \"read\" or \"read-write\""),
            "{err}"
        );
        let err = resolve_text("[grants]\nroot = \"../up\"\n", &config(FileAccess::None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("grants.root: argument \"root\""), "{err}");
        let err =
            resolve_text("[limits]\ntimeout_ms = \"5s\"\n", &config(FileAccess::None)).unwrap_err();
        assert!(matches!(err.kind(), PluginErrorKind::Manifest { .. }));
        let err = resolve_text("[limits]\nfuel = 0\n", &config(FileAccess::None)).unwrap_err();
        assert!(err.to_string().contains("limits.fuel is 0"), "{err}");
    }

    #[test]
    fn deny_by_default_refuses_a_read_grant() {
        let err =
            resolve_text("[grants]\nfiles = \"read\"\n", &PluginHostConfig::default()).unwrap_err();
        match err.kind() {
            PluginErrorKind::GrantDenied { asked, allowed } => {
                assert_eq!(*asked, FileAccess::Read);
                assert_eq!(*allowed, FileAccess::None);
            }
            other => panic!("expected GrantDenied, got {other:?}"),
        }
        let err = resolve_text(
            "[grants]\nfiles = \"read-write\"\n",
            &config(FileAccess::Read),
        )
        .unwrap_err();
        assert!(matches!(
            err.kind(),
            PluginErrorKind::GrantDenied {
                asked: FileAccess::ReadWrite,
                allowed: FileAccess::Read,
                ..
            }
        ));
        // Asking for nothing is always fine.
        let ok = resolve_text("[grants]\nfiles = \"none\"\n", &PluginHostConfig::default());
        assert_eq!(ok.unwrap().files, FileAccess::None);
    }

    #[test]
    fn limits_above_max_are_refused_with_both_values() {
        let err =
            resolve_text("[limits]\ntimeout_ms = 120000\n", &config(FileAccess::None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for timeout 120s, above the host's maximum of 10s; lower it in the manifest, or have the operator raise the maximum (--plugin-max-timeout 120s, PluginHostConfig::max_limits)"
        );
        let err = resolve_text(
            "[limits]\nmax_output_bytes = 2000000\n",
            &config(FileAccess::None),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for output 1.9 MiB, above the host's maximum of 1 MiB; lower it in the manifest, or have the operator raise the maximum (PluginHostConfig::max_limits)"
        );
        let err =
            resolve_text("[limits]\nmemory_mib = 1024\n", &config(FileAccess::None)).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                PluginErrorKind::LimitTooHigh {
                    limit: "memory",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// Issue 9 item 2: a root is checked with the tools' path policy at load, and the
    /// error names the root and the rule.
    #[test]
    fn a_root_the_path_policy_refuses_is_a_load_error() {
        let hiding = PluginHostConfig {
            file_policy: toolhost::vfs::FilePolicy {
                hide_hidden_paths: true,
                ..toolhost::vfs::FilePolicy::default()
            },
            ..config(FileAccess::ReadWrite)
        };
        for root in [".git", ".ssh", "docs/_private", "a/.config/b"] {
            let text = format!("[grants]\nfiles = \"read-write\"\nroot = \"{root}\"\n");
            match resolve_text(&text, &hiding) {
                Err(err) if matches!(err.kind(), PluginErrorKind::Manifest { .. }) => assert_eq!(
                    err.to_string(),
                    format!("plugins/p.toml: invalid plugin manifest: grants.root is \"{root}\", a hidden path (a segment starts with _ or .), and this host hides hidden paths from every tool (--hide-hidden); give a sub-directory without hidden segments, or start the host without --hide-hidden")
                ),
                other => panic!("root {root}: expected a manifest error, got {other:?}"),
            }
            // The same root is fine for a host that shows hidden paths to its tools.
            let resolved = resolve_text(&text, &config(FileAccess::ReadWrite)).unwrap();
            assert_eq!(resolved.root.as_deref(), Some(root));
        }
        assert!(resolve_text("[grants]\nfiles = \"read\"\nroot = \"docs\"\n", &hiding).is_ok());
    }

    #[test]
    fn import_budgets_can_be_lowered_but_not_raised() {
        let text = "[limits]\nmax_file_calls = 10\nmax_read_bytes = 1024\nmax_write_bytes_per_call = 0\nmax_files_written_per_call = 5\nmax_write_bytes_total = 2048\nmax_files_written_total = 50\nlog_lines_per_second = 1\nlog_burst = 10\n";
        let resolved = resolve_text(text, &config(FileAccess::None)).unwrap();
        assert_eq!(
            resolved.limits.imports,
            super::super::ImportLimits {
                max_file_calls: 10,
                max_read_bytes: 1024,
                max_write_bytes_per_call: 0,
                max_files_written_per_call: 5,
                max_write_bytes_total: 2048,
                max_files_written_total: 50,
                log_lines_per_second: 1,
                log_burst: 10,
            }
        );
        let err = resolve_text(
            "[limits]\nmax_files_written_per_call = 1000\n",
            &config(FileAccess::None),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for max_files_written_per_call 1000, above the host's maximum of 100; lower it in the manifest, or have the operator raise the maximum (PluginHostConfig::max_limits)"
        );
        let mut raised = config(FileAccess::None);
        raised.max_limits.imports.max_files_written_per_call = 1000;
        let resolved =
            resolve_text("[limits]\nmax_files_written_per_call = 1000\n", &raised).unwrap();
        assert_eq!(resolved.limits.imports.max_files_written_per_call, 1000);
    }

    #[test]
    fn missing_manifest_is_no_grant_and_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        let resolved = resolve(&wasm, &config(FileAccess::ReadWrite)).unwrap();
        assert_eq!(resolved.manifest_path, None);
        assert_eq!(resolved.files, FileAccess::None);
        std::fs::write(
            dir.path().join("p.toml"),
            "[grants]\nfiles = \"read-write\"\n",
        )
        .unwrap();
        let resolved = resolve(&wasm, &config(FileAccess::ReadWrite)).unwrap();
        assert_eq!(resolved.files, FileAccess::ReadWrite);
        assert_eq!(resolved.manifest_path, Some(dir.path().join("p.toml")));
    }
}
