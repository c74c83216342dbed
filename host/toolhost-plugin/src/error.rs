//! [`PluginError`]: why a plugin could not be loaded. Every message names the file.

use std::path::PathBuf;

use super::{CacheError, DefinitionCap, FileAccess};

/// Why a plugin was not loaded (or the plugin host not built). Each message names the
/// `.wasm` (or manifest) file, says what was wrong and what to do instead.
///
/// A call's failure is a [`ToolError`](toolhost::registry::ToolError), not this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The file could not be read (or the cache directory could not be created).
    #[error("{}: cannot read it: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a WebAssembly component: not wasm at all, or a core module.
    #[error("{}: not a WebAssembly component: {reason}", path.display())]
    NotAComponent {
        /// The file.
        path: PathBuf,
        /// What it is instead, and how to build a component.
        reason: String,
    },
    /// wasmtime could not compile the component (malformed, or uses a feature this host
    /// does not enable).
    #[error("{}: the component does not compile: {message}", path.display())]
    Compile {
        /// The file.
        path: PathBuf,
        /// wasmtime's error, with its causes.
        message: String,
    },
    /// The component does not implement the `toolhost:plugin/plugin` world: an export
    /// is missing or has another type, or it imports something the host does not give.
    #[error("{}: the component does not implement the toolhost:plugin@0.1.0 `plugin` world: {message}; build it with the toolhost SDK (export_plugin!) against wit/plugin.wit", path.display())]
    WrongWorld {
        /// The file.
        path: PathBuf,
        /// What does not match.
        message: String,
    },
    /// The manifest (`NAME.toml`) is not valid.
    #[error("{}: invalid plugin manifest: {message}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong (names the key).
        message: String,
    },
    /// The manifest asks for a limit above the host's maximum
    /// ([`PluginHostConfig::max_limits`](super::PluginHostConfig::max_limits), by default
    /// the default limits: a manifest may only lower them).
    #[error("{}: the manifest asks for {limit} {asked}, above the host's maximum of {max}; lower it in the manifest, or have the operator raise the maximum ({})", path.display(), raise_hint(limit, asked))]
    LimitTooHigh {
        /// The manifest file.
        path: PathBuf,
        /// Which limit (`timeout`, `memory`, `fuel`, ...).
        limit: &'static str,
        /// The value asked for.
        asked: String,
        /// The host's maximum.
        max: String,
    },
    /// The manifest asks for more file access than the host allows (the CLI flag named in
    /// the message is [`PluginHostConfig::max_file_access`](crate::PluginHostConfig::max_file_access) in a library).
    #[error("{}: the manifest asks for file access \"{asked}\" but the host allows at most \"{allowed}\"; the plugin was not loaded. To allow it, start the host with `--plugin-files {asked}`, or remove the grant from the manifest", path.display())]
    GrantDenied {
        /// The manifest file.
        path: PathBuf,
        /// What the manifest asks for.
        asked: FileAccess,
        /// What the host allows.
        allowed: FileAccess,
    },
    /// A tool definition is invalid: bad name, or parameters that are not a JSON object
    /// schema.
    #[error("{}: tool definition \"{tool}\" is invalid: {reason}", path.display())]
    BadDefinition {
        /// The file.
        path: PathBuf,
        /// The tool's name as declared.
        tool: String,
        /// What is wrong and what to do instead.
        reason: String,
    },
    /// The plugin declares a tool name that is taken (by another tool of the registry, or
    /// twice in the plugin itself). None of the plugin's tools were registered.
    #[error("{}: declares tool \"{name}\", but {taken_by}; none of its tools were registered. Rename the tool or remove the other one", path.display())]
    DuplicateTool {
        /// The file.
        path: PathBuf,
        /// The taken name.
        name: String,
        /// Who has it: `the plugin FILE already declares it` (another plugin of the same
        /// [`PluginHost`](crate::PluginHost)), `a tool of that name is already registered
        /// (not by a plugin)`, or `the plugin declares it twice`.
        taken_by: String,
    },
    /// The plugin's tool definitions are over a cap of
    /// [`DefinitionLimits`](super::DefinitionLimits) (tool count, schema or description
    /// size, schema depth, total size).
    #[error("{}: {}", path.display(), cap.describe(tool.as_deref(), *actual, *limit))]
    DefinitionsTooLarge {
        /// The file.
        path: PathBuf,
        /// The tool over the cap; `None` for a cap on the whole plugin (tool count, total).
        tool: Option<String>,
        /// Which cap.
        cap: DefinitionCap,
        /// The plugin's value (bytes, tools or levels).
        actual: u64,
        /// The cap.
        limit: u64,
    },
    /// The `.wasm` or manifest path is not a regular file (a FIFO, a device, a
    /// directory, a socket): refused without reading, so it cannot block or feed the
    /// host without end.
    #[error("{}: is {found}, not a regular file; a plugin's .wasm and its manifest must be regular files", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is: `a FIFO`, `a directory`, `a character device`, ...
        found: &'static str,
    },
    /// The `.wasm` or manifest file is over its size cap
    /// ([`MAX_COMPONENT_BYTES`](super::MAX_COMPONENT_BYTES),
    /// [`MAX_MANIFEST_BYTES`](super::MAX_MANIFEST_BYTES)); refused before it is read.
    #[error("{}: the {what} is {}, over the host's cap of {}; {}", path.display(), super::format_bytes(*size), super::format_bytes(*limit), too_large_hint(what))]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// `component` or `manifest`.
        what: &'static str,
        /// Its size in bytes (at least; it may have grown while read).
        size: u64,
        /// The cap in bytes.
        limit: u64,
    },
    /// Asking the plugin for its tool definitions failed (trap, timeout, limit).
    #[error("{}: asking the plugin for its tool definitions failed: {message}", path.display())]
    Definitions {
        /// The file.
        path: PathBuf,
        /// What happened.
        message: String,
    },
    /// The plugin host could not be built (engine configuration, cache directory).
    #[error("the plugin host cannot start: {message}")]
    Host {
        /// What failed.
        message: String,
    },
    /// The compile cache directory may not be used: inside a storage root, another
    /// user's, writable by others, or unreadable. The plugin host was not built.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl PluginError {
    /// The file the error is about (`None` for [`PluginError::Host`]).
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            PluginError::Io { path, .. }
            | PluginError::NotAComponent { path, .. }
            | PluginError::Compile { path, .. }
            | PluginError::WrongWorld { path, .. }
            | PluginError::Manifest { path, .. }
            | PluginError::LimitTooHigh { path, .. }
            | PluginError::GrantDenied { path, .. }
            | PluginError::BadDefinition { path, .. }
            | PluginError::DuplicateTool { path, .. }
            | PluginError::DefinitionsTooLarge { path, .. }
            | PluginError::NotAFile { path, .. }
            | PluginError::FileTooLarge { path, .. }
            | PluginError::Definitions { path, .. } => Some(path),
            PluginError::Cache(err) => Some(err.path()),
            PluginError::Host { .. } => None,
        }
    }

    /// A stable snake_case name of the kind, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            PluginError::Io { .. } => "io",
            PluginError::NotAComponent { .. } => "not_a_component",
            PluginError::Compile { .. } => "compile",
            PluginError::WrongWorld { .. } => "wrong_world",
            PluginError::Manifest { .. } => "manifest",
            PluginError::LimitTooHigh { .. } => "limit_too_high",
            PluginError::GrantDenied { .. } => "grant_denied",
            PluginError::BadDefinition { .. } => "bad_definition",
            PluginError::DuplicateTool { .. } => "duplicate_tool",
            PluginError::DefinitionsTooLarge { .. } => "definitions_too_large",
            PluginError::NotAFile { .. } => "not_a_file",
            PluginError::FileTooLarge { .. } => "file_too_large",
            PluginError::Definitions { .. } => "definitions",
            PluginError::Host { .. } => "host",
            PluginError::Cache(_) => "cache",
        }
    }
}

/// How the operator raises the maximum of `limit` to `asked`: the command-line flag
/// with the value to give (for the limits that have one), and the config field.
fn raise_hint(limit: &str, asked: &str) -> String {
    let flag = match limit {
        "memory" => "--plugin-max-memory",
        "timeout" => "--plugin-max-timeout",
        _ => return "PluginHostConfig::max_limits".to_owned(),
    };
    // `128 MiB` -> `128MiB`, `20s` stays: the flags take whole numbers with a unit, so a
    // rounded value (`1.5s`) is left out.
    let value: String = asked.chars().filter(|c| *c != ' ').collect();
    if value.contains('.') {
        format!("{flag}, PluginHostConfig::max_limits")
    } else {
        format!("{flag} {value}, PluginHostConfig::max_limits")
    }
}

fn too_large_hint(what: &str) -> &'static str {
    match what {
        "manifest" => "a plugin's manifest is a few lines of TOML",
        _ => "is it a plugin built for wasm32-wasip2 (release, stripped)?",
    }
}

/// wasmtime's error with its causes, on one line (`outer: cause: root`).
pub(crate) fn error_chain(err: &wasmtime::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if !text.is_empty() {
            if text.contains(&cause) {
                continue;
            }
            text.push_str(": ");
        }
        text.push_str(cause.trim());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_denied_names_file_and_how_to_allow() {
        let err = PluginError::GrantDenied {
            path: "plugins/wordcount.toml".into(),
            asked: FileAccess::Read,
            allowed: FileAccess::None,
        };
        let text = err.to_string();
        assert!(text.starts_with("plugins/wordcount.toml: the manifest asks for file access \"read\" but the host allows at most \"none\""), "{text}");
        assert!(text.contains("`--plugin-files read`"), "{text}");
        assert_eq!(err.kind(), "grant_denied");
        assert_eq!(
            err.path(),
            Some(std::path::Path::new("plugins/wordcount.toml"))
        );
    }

    #[test]
    fn error_chain_joins_causes_once() {
        let err = wasmtime::Error::msg("root")
            .context("middle")
            .context("outer");
        assert_eq!(error_chain(&err), "outer: middle: root");
    }
}
