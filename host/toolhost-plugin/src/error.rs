//! [`PluginError`]: why a plugin could not be loaded: what went wrong
//! ([`PluginErrorKind`]) and, once, the file it is about.

use std::fmt;
use std::path::{Path, PathBuf};

use super::cache_dir::CacheError;
use super::digest::Sha256Digest;
use super::host::file_access::FileAccess;
use super::limit_value::LimitValue;
use super::limits::DefinitionCap;
use toolhost::registry::format_bytes;

/// Why a plugin was not loaded (or the plugin host not built): what went wrong
/// ([`kind`](PluginError::kind)) and the `.wasm` or manifest file it is about
/// ([`path`](PluginError::path)), as ripgrep's `ignore::Error::WithPath` carries it: the
/// path is data, held once, and the text is `FILE: what went wrong`.
///
/// A call's failure is a [`ToolError`](toolhost::registry::ToolError), not this.
///
/// ```
/// use toolhost_plugin::{PluginError, PluginErrorKind};
///
/// let err = PluginErrorKind::NotAFile { found: "a FIFO" }.at("plugins/a.toml");
/// assert!(matches!(err.kind(), PluginErrorKind::NotAFile { found: "a FIFO" }));
/// assert_eq!(err.path(), Some(std::path::Path::new("plugins/a.toml")));
/// assert_eq!(
///     err.to_string(),
///     "plugins/a.toml: is a FIFO, not a regular file; a plugin's .wasm and its manifest must be regular files"
/// );
/// ```
///
/// # Printing
/// The text names the file and what is wrong; an underlying OS error (of
/// [`PluginErrorKind::Io`]) is the [`source`](std::error::Error::source), not repeated in
/// the text: print the chain (`anyhow`'s `{:#}`, or
/// [`ErrorChain`](toolhost::error::ErrorChain)) to show it.
#[derive(Debug)]
pub struct PluginError {
    path: Option<PathBuf>,
    kind: PluginErrorKind,
}

impl PluginError {
    /// What went wrong.
    pub fn kind(&self) -> &PluginErrorKind {
        &self.kind
    }

    /// What went wrong, by value.
    pub fn into_kind(self) -> PluginErrorKind {
        self.kind
    }

    /// The file the error is about: the `.wasm` or its manifest, the compile cache's
    /// directory or key for [`PluginErrorKind::Cache`], the lock file (when known) for
    /// [`PluginErrorKind::Lock`]; `None` for [`PluginErrorKind::Host`].
    pub fn path(&self) -> Option<&Path> {
        match (&self.path, &self.kind) {
            (Some(path), _) => Some(path),
            (None, PluginErrorKind::Cache(err)) => Some(err.path()),
            (None, PluginErrorKind::Lock(err)) => err.path(),
            (None, _) => None,
        }
    }

    /// A stable snake_case name of the kind, for logs.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }
}

impl From<PluginErrorKind> for PluginError {
    /// An error about no file in particular (the host, the cache).
    fn from(kind: PluginErrorKind) -> Self {
        Self { path: None, kind }
    }
}

impl From<CacheError> for PluginError {
    fn from(err: CacheError) -> Self {
        PluginErrorKind::Cache(err).into()
    }
}

impl From<LockError> for PluginError {
    fn from(err: LockError) -> Self {
        PluginErrorKind::Lock(err).into()
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {}", path.display(), self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl std::error::Error for PluginError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The kind's text is part of ours, so its source (not the kind) is next.
        std::error::Error::source(&self.kind)
    }
}

/// What went wrong loading a plugin (see [`PluginError`], which adds the file). Each text
/// says what was wrong and what to do instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginErrorKind {
    /// The file could not be read; the OS error is the source.
    #[error("cannot read it")]
    Io(#[source] std::io::Error),
    /// The file is not a WebAssembly component: not wasm at all, or a core module.
    #[error("not a WebAssembly component: {reason}")]
    NotAComponent {
        /// What it is instead, and how to build a component.
        reason: String,
    },
    /// wasmtime could not compile the component (malformed, or uses a feature this host
    /// does not enable).
    #[error("the component does not compile: {message}")]
    Compile {
        /// wasmtime's error, with its causes.
        message: String,
    },
    /// The component does not implement the `toolhost:plugin/plugin` world: an export
    /// is missing or has another type, or it imports something the host does not give.
    #[error("the component does not implement the toolhost:plugin `plugin` world (0.3.0, 0.2.0 or 0.1.0): {message}; build it with the toolhost SDK (export_plugin!) against wit/plugin.wit")]
    WrongWorld {
        /// What does not match.
        message: String,
    },
    /// The manifest (`NAME.toml`) is not valid.
    #[error("invalid plugin manifest: {message}")]
    Manifest {
        /// What is wrong (names the key).
        message: String,
    },
    /// The manifest asks for a limit above the host's maximum
    /// ([`PluginHostConfig::max_limits`](super::PluginHostConfig::max_limits), by default
    /// the default limits: a manifest may only lower them).
    #[error("the manifest asks for {limit} {asked}, above the host's maximum of {max}; lower it in the manifest, or have the operator raise the maximum ({})", raise_hint(limit, asked))]
    LimitTooHigh {
        /// Which limit (`timeout`, `memory`, `fuel`, or an import budget's manifest key
        /// such as `max_read_bytes`).
        limit: &'static str,
        /// The value asked for.
        asked: LimitValue,
        /// The host's maximum.
        max: LimitValue,
    },
    /// The manifest asks for more file access than the host allows (the CLI flag named in
    /// the message is [`PluginHostConfig::max_file_access`](crate::PluginHostConfig::max_file_access) in a library).
    #[error("the manifest asks for file access \"{asked}\" but the host allows at most \"{allowed}\"; the plugin was not loaded. To allow it, start the host with `--plugin-files {asked}`, or remove the grant from the manifest")]
    GrantDenied {
        /// What the manifest asks for.
        asked: FileAccess,
        /// What the host allows.
        allowed: FileAccess,
    },
    /// The manifest asks for an HTTP host the operator does not allow.
    #[error("the manifest asks for HTTP access to {host}, which the host does not allow; the plugin was not loaded. To allow it, start the host with `--plugin-http {host}` (PluginHostConfig::http), or remove it from [grants] http")]
    HttpDenied {
        /// The pattern asked for, in its canonical spelling.
        host: String,
    },
    /// The manifest declares a required configuration key the operator gave no value.
    #[error("the plugin needs the config key {key}{} and no value was given; the plugin was not loaded. Give it with `--plugin-config {plugin}.{key}=VALUE`, `--plugin-config-env {plugin}.{key}=ENV_VAR` or in a --plugin-config-file ([{plugin}] {key} = ...), or mark it `required = false` in the manifest", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    ConfigMissing {
        /// The plugin's name.
        plugin: String,
        /// The key.
        key: String,
        /// The key's description in the manifest.
        description: Option<String>,
    },
    /// A tool definition is invalid: bad name, or parameters that are not a JSON object
    /// schema.
    #[error("tool definition \"{tool}\" is invalid: {reason}")]
    BadDefinition {
        /// The tool's name as declared.
        tool: String,
        /// What is wrong and what to do instead.
        reason: String,
    },
    /// The plugin declares a tool name that is taken (by another tool of the registry, or
    /// twice in the plugin itself). None of the plugin's tools were registered.
    #[error("declares tool \"{name}\", but {taken_by}; none of its tools were registered. Give one of the two plugins a namespace (`namespace = \"PREFIX\"` at the top of its manifest, or the operator's --plugin-namespace NAME=PREFIX, which offers its tools as PREFIX_NAME), rename the tool, or remove the other one")]
    DuplicateTool {
        /// The taken name.
        name: String,
        /// Who has it: `the plugin FILE already declares it` (another plugin of the same
        /// [`PluginHost`](crate::PluginHost)), `a tool of that name is already registered
        /// (not by a plugin)`, or `the plugin declares it twice`.
        taken_by: String,
    },
    /// The plugin's tool namespace (its manifest's `namespace`, or the operator's)
    /// cannot be used: it makes a tool's name too long. None of its tools were
    /// registered. A namespace that is not valid at all is refused earlier, as a
    /// [`PluginErrorKind::Manifest`] error or by the operator's setting.
    #[error("its tool namespace \"{namespace}\" cannot be used: {reason}")]
    Namespace {
        /// The namespace.
        namespace: String,
        /// What is wrong and what to do instead.
        reason: String,
    },
    /// The plugin's tool definitions are over a cap of
    /// [`DefinitionLimits`](crate::limits::DefinitionLimits) (tool count, schema or description
    /// size, schema depth, total size).
    #[error("{}", cap.describe(tool.as_deref(), *actual, *limit))]
    DefinitionsTooLarge {
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
    #[error(
        "is {found}, not a regular file; a plugin's .wasm and its manifest must be regular files"
    )]
    NotAFile {
        /// What it is: `a FIFO`, `a directory`, `a character device`, ...
        found: &'static str,
    },
    /// The `.wasm` or manifest file is over its size cap
    /// (256 MiB for a component, 64 KiB for a manifest); refused before it is read.
    #[error("the {what} is {}, over the host's cap of {}; {}", format_bytes(*size), format_bytes(*limit), too_large_hint(what))]
    FileTooLarge {
        /// `component` or `manifest`.
        what: &'static str,
        /// Its size in bytes (at least; it may have grown while read).
        size: u64,
        /// The cap in bytes.
        limit: u64,
    },
    /// Asking the plugin for its tool definitions failed (trap, timeout, limit).
    #[error("asking the plugin for its tool definitions failed: {message}")]
    Definitions {
        /// What happened.
        message: String,
    },
    /// A 0.3.0 plugin's prompts or resources could not be offered: asking for them
    /// failed, a prompt name is taken by another plugin or breaks the name rules, or its
    /// resource namespace or a template is refused.
    #[error("the plugin's prompts or resources cannot be offered: {message}")]
    Catalog {
        /// What was wrong, and what to do.
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
    Cache(CacheError),
    /// The component (or its manifest: then the error's path is the manifest) is not the
    /// one pinned in the directory's lock file ([`lock`](super::lock)), or is not listed
    /// there. The text names the lock file and both digests.
    #[error("refused by {}: {mismatch}", lock.display())]
    Unpinned {
        /// The lock file.
        lock: PathBuf,
        /// What differs.
        mismatch: LockMismatch,
    },
    /// The directory's lock file cannot be read or is invalid; no plugin of the directory
    /// is loaded (a broken lock must not mean "no pins").
    #[error(transparent)]
    Lock(LockError),
}

impl PluginErrorKind {
    /// This error about `path` (the `.wasm` or its manifest).
    pub fn at(self, path: impl Into<PathBuf>) -> PluginError {
        PluginError {
            path: Some(path.into()),
            kind: self,
        }
    }

    /// A stable snake_case name of the kind, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Io(_) => "io",
            Self::NotAComponent { .. } => "not_a_component",
            Self::Compile { .. } => "compile",
            Self::WrongWorld { .. } => "wrong_world",
            Self::Manifest { .. } => "manifest",
            Self::LimitTooHigh { .. } => "limit_too_high",
            Self::GrantDenied { .. } => "grant_denied",
            Self::HttpDenied { .. } => "http_denied",
            Self::ConfigMissing { .. } => "config_missing",
            Self::BadDefinition { .. } => "bad_definition",
            Self::DuplicateTool { .. } => "duplicate_tool",
            Self::Namespace { .. } => "namespace",
            Self::DefinitionsTooLarge { .. } => "definitions_too_large",
            Self::NotAFile { .. } => "not_a_file",
            Self::FileTooLarge { .. } => "file_too_large",
            Self::Definitions { .. } => "definitions",
            Self::Catalog { .. } => "catalog",
            Self::Host { .. } => "host",
            Self::Cache(_) => "cache",
            Self::Unpinned { .. } => "unpinned",
            Self::Lock(_) => "lock",
        }
    }
}

/// How the operator raises the maximum of `limit` to `asked`: the command-line flag
/// with the value to give (for the limits that have one), and the config field.
fn raise_hint(limit: &str, asked: &LimitValue) -> String {
    let flag = match limit {
        "memory" => "--plugin-max-memory",
        "timeout" => "--plugin-max-timeout",
        _ => return "PluginHostConfig::max_limits".to_owned(),
    };
    // `128 MiB` -> `128MiB`, `20s` and `1500ms` stay: the flags take whole numbers with a
    // unit, so a rounded size (`1.5 MiB`) is left out.
    let value: String = asked.to_string().chars().filter(|c| *c != ' ').collect();
    if value.contains('.') {
        format!("{flag}, PluginHostConfig::max_limits")
    } else {
        format!("{flag} {value}, PluginHostConfig::max_limits")
    }
}

fn too_large_hint(what: &str) -> &'static str {
    match what {
        "manifest" => "a plugin's manifest is a few lines of TOML",
        "lock file" => "a lock file is a few lines per plugin; write it again with `host lock`",
        _ => "is it a plugin built for wasm32-wasip2 (release, stripped)?",
    }
}

/// wasmtime's error with its causes, on one line (`outer: cause: root`), as
/// [`ErrorChain`](toolhost::error::ErrorChain) prints every error's chain: a
/// `wasmtime::Error` is no `std::error::Error` itself, only through `AsRef`.
pub(crate) fn error_chain(err: &wasmtime::Error) -> String {
    let err: &(dyn std::error::Error + 'static) = err.as_ref();
    toolhost::error::ErrorChain(err).to_string()
}

/// Why a component was refused by the lock. Its `Display` says what differs (both
/// digests) and what to do; [`PluginErrorKind::Unpinned`](crate::PluginErrorKind::Unpinned) adds the lock's path and
/// [`PluginError`] the file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockMismatch {
    /// The lock does not list the component.
    NotListed {
        /// The digest of the component's bytes.
        actual: Sha256Digest,
    },
    /// The component's bytes are not the ones pinned.
    Component {
        /// The digest in the lock.
        pinned: Sha256Digest,
        /// The digest of the bytes read.
        actual: Sha256Digest,
    },
    /// The host's policy refuses the entry (`--require-signer`: not signed by one of the
    /// keys required, or its signature does not hold).
    Refused {
        /// Why, in words for the operator.
        reason: String,
    },
    /// The manifest is not the one pinned (or one appeared, or went missing).
    Manifest {
        /// The digest in the lock; `None`: the lock pins no manifest.
        pinned: Option<Sha256Digest>,
        /// The digest of the manifest read; `None`: there is none.
        actual: Option<Sha256Digest>,
    },
}

impl fmt::Display for LockMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockMismatch::NotListed { actual } => write!(
                f,
                "it is not listed in the lock file (its digest is {actual}); pin it with `host lock` if you trust it, or remove it"
            ),
            LockMismatch::Refused { reason } => write!(f, "{reason}"),
            LockMismatch::Component { pinned, actual } => write!(
                f,
                "its digest is {actual}, but the lock pins {pinned}: the file changed since it was pinned; pull it again, or pin the new file with `host lock` if you trust it"
            ),
            LockMismatch::Manifest {
                pinned: Some(pinned),
                actual: Some(actual),
            } => write!(
                f,
                "its manifest's digest is {actual}, but the lock pins {pinned}: the manifest changed since it was pinned; restore it, or pin it with `host lock` if you trust it"
            ),
            LockMismatch::Manifest {
                pinned: Some(pinned),
                actual: None,
            } => write!(
                f,
                "the lock pins a manifest ({pinned}) but there is none; restore it, or pin the plugin without one with `host lock`"
            ),
            LockMismatch::Manifest {
                pinned: None,
                actual: Some(actual),
            } => write!(
                f,
                "it has a manifest ({actual}) but the lock pins none; remove the manifest, or pin it with `host lock` if you trust it"
            ),
            LockMismatch::Manifest {
                pinned: None,
                actual: None,
            } => f.write_str("its manifest does not match the lock"),
        }
    }
}

/// Why a lock file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The file could not be read (not a regular file, over [`MAX_LOCK_BYTES`](crate::lock::MAX_LOCK_BYTES), an I/O
    /// error); the message names it.
    #[error(transparent)]
    Read(Box<PluginError>),
    /// The file is not a valid lock file.
    #[error("{}: invalid lock file: {message}", path.display())]
    Invalid {
        /// The lock file.
        path: PathBuf,
        /// What is wrong (names the line or the entry).
        message: String,
    },
    /// The file could not be written.
    #[error("{}: cannot write the lock file: {error}", path.display())]
    Write {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A component of the directory could not be read while pinning it.
    #[error(transparent)]
    Component(Box<PluginError>),
}

impl LockError {
    /// The file the error is about.
    pub fn path(&self) -> Option<&Path> {
        match self {
            LockError::Read(err) | LockError::Component(err) => err.path(),
            LockError::Invalid { path, .. } | LockError::Write { path, .. } => Some(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_denied_names_file_and_how_to_allow() {
        let err = PluginErrorKind::GrantDenied {
            asked: FileAccess::Read,
            allowed: FileAccess::None,
        }
        .at("plugins/wordcount.toml");
        let text = err.to_string();
        assert!(text.starts_with("plugins/wordcount.toml: the manifest asks for file access \"read\" but the host allows at most \"none\""), "{text}");
        assert!(text.contains("`--plugin-files read`"), "{text}");
        assert_eq!(err.name(), "grant_denied");
        assert_eq!(
            err.path(),
            Some(std::path::Path::new("plugins/wordcount.toml"))
        );
    }

    #[test]
    fn an_os_error_is_printed_once() {
        let err = PluginErrorKind::Io(std::io::Error::from(std::io::ErrorKind::NotFound))
            .at("plugins/a.wasm");
        assert_eq!(err.to_string(), "plugins/a.wasm: cannot read it");
        assert_eq!(
            toolhost::error::ErrorChain(&err).to_string(),
            "plugins/a.wasm: cannot read it: entity not found"
        );
        assert!(
            matches!(err.kind(), PluginErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn limit_too_high_carries_both_values_as_data() {
        let err = PluginErrorKind::LimitTooHigh {
            limit: "memory",
            asked: LimitValue::Bytes(128 << 20),
            max: LimitValue::Bytes(64 << 20),
        }
        .at("p.toml");
        assert_eq!(
            err.to_string(),
            "p.toml: the manifest asks for memory 128 MiB, above the host's maximum of 64 MiB; lower it in the manifest, or have the operator raise the maximum (--plugin-max-memory 128MiB, PluginHostConfig::max_limits)"
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
