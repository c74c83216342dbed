//! The plugin host's settings ([`PluginHostConfig`]): the most file access and HTTP a plugin may
//! be granted, the default and maximum limits, the pool, the compile cache.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use toolhost::vfs::FilePolicy;
use toolhost::vfs::Storage;

use super::host::files::FileAccess;
use super::{ConfigValues, DefinitionLimits, HttpPolicy, PluginLimits};

/// Settings of a [`PluginHost`](super::PluginHost).
///
/// The default grants nothing: no file access for any plugin, the default limits, and
/// a fresh instance for every call.
///
/// ```
/// use toolhost_plugin::{FileAccess, PluginHostConfig};
///
/// let config = PluginHostConfig::default();
/// assert_eq!(config.max_file_access, FileAccess::None);
/// assert!(config.fresh_instance_per_call);
/// assert!(config.storage.is_none());
/// ```
#[derive(Clone)]
pub struct PluginHostConfig {
    /// Where compiled components are cached; `None` disables the cache. The default is
    /// [`default_cache_dir`].
    ///
    /// # Sandbox
    /// A cache entry is native code the host runs. [`PluginHost::new`](super::PluginHost::new)
    /// refuses a directory inside, equal to or a parent of any of
    /// [`storage_roots`](Self::storage_roots), owned by another user or writable by its
    /// group or others, and creates it `0700` (files `0600`); every entry is authenticated
    /// before it is loaded. See [`check_cache_dir`](super::check_cache_dir).
    pub cache_dir: Option<PathBuf>,
    /// The directories on disk that the host's stores work in: the root of
    /// [`storage`](Self::storage) when it is an [`OsStorage`](toolhost::vfs::OsStorage)
    /// ([`OsStorage::root`](toolhost::vfs::OsStorage::root)), and that of the built-in file
    /// tools' store. A plugin's grant root lies inside its store's root, so it is covered.
    /// The compile cache is refused anywhere the model or a plugin could write it
    /// (inside, equal to or above one of these). Empty by default: a caller whose stores
    /// are on disk must list them here, the host cannot tell from a `dyn Storage`.
    pub storage_roots: Vec<PathBuf>,
    /// Limits of a plugin whose manifest sets none.
    pub default_limits: PluginLimits,
    /// The most a manifest may ask for; a manifest asking more is refused at load
    /// ([`PluginErrorKind::LimitTooHigh`](super::PluginErrorKind::LimitTooHigh)). The default is
    /// [`PluginLimits::default`], the same as `default_limits`: a manifest may only lower
    /// its limits unless the operator raises this ceiling (the CLI's
    /// `--plugin-max-memory`, `--plugin-max-timeout`).
    ///
    /// # Sandbox
    /// Raising `memory_bytes` here raises what every pool slot may hold; the pool then
    /// runs fewer calls at once to stay within [`PluginHostConfig::max_pool_memory`].
    pub max_limits: PluginLimits,
    /// The most linear memory all pooled plugin instances together may hold: pool slots
    /// x the largest memory a plugin may have. The pool gets as many slots as fit (and
    /// [`PluginHostConfig::max_concurrent_calls`] is lowered to match); a cap too small
    /// for one call is a start-up error. Default [`DEFAULT_MAX_POOL_MEMORY`].
    pub max_pool_memory: u64,
    /// Caps on a plugin's tool definitions and the deadline for asking for them.
    pub definition_limits: DefinitionLimits,
    /// The storage the `files` import works on; `None` gives no plugin any file.
    pub storage: Option<Arc<dyn Storage>>,
    /// The path policy (hidden paths, extensions, size cap) applied to every `files`
    /// call, as for the built-in file tools.
    pub file_policy: FilePolicy,
    /// The most file access any plugin may get. A plugin whose manifest asks for more is
    /// not loaded ([`PluginErrorKind::GrantDenied`](super::PluginErrorKind::GrantDenied)).
    ///
    /// # Sandbox
    /// Anything above [`FileAccess::None`] lets plugin code read (or change) the files
    /// of [`PluginHostConfig::storage`] that its manifest's `root` covers.
    pub max_file_access: FileAccess,
    /// `true` (default): every call gets a fresh instance, so nothing leaks between
    /// calls. `false`: a few instances per plugin are kept and reused, which is faster
    /// but lets a plugin keep state between calls of different sessions.
    pub fresh_instance_per_call: bool,
    /// Calls running at once across all plugins; more wait for a slot. The pooling
    /// allocator is sized from it.
    pub max_concurrent_calls: u32,
    /// Outbound HTTP: the hosts a plugin's manifest may ask for, the private networks
    /// plugins may reach, the resolver. The default allows no host.
    ///
    /// # Sandbox
    /// See [`HttpPolicy::allow`] and [`HttpPolicy::allow_nets`].
    pub http: HttpPolicy,
    /// Configuration values per plugin (`--plugin-config`); a plugin gets those of the
    /// keys its manifest declares. Empty by default.
    pub config: ConfigValues,
    /// How a plugin the compile cache does not hold is compiled: optimized before it
    /// serves (the default), or quick code first with the optimized code swapped in from
    /// the background (for a long-running server). See [`CompileTiers`].
    pub compile_tiers: CompileTiers,
}

/// How a plugin that is not in the compile cache is compiled
/// ([`PluginHostConfig::compile_tiers`]). A cache hit is optimized code either way.
///
/// ```
/// use toolhost_plugin::{CompileTiers, PluginHostConfig};
///
/// // A server that answers for hours: start serving on quick code.
/// let config = PluginHostConfig {
///     compile_tiers: CompileTiers::QuickFirst,
///     ..PluginHostConfig::default()
/// };
/// assert_eq!(PluginHostConfig::default().compile_tiers, CompileTiers::Optimized);
/// # let _ = config;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CompileTiers {
    /// Cranelift's optimizing settings before the plugin is loaded: the first start
    /// takes longest, and every call runs at full speed. Best for a host that makes a
    /// few calls and exits (the CLI's `host call` and `host tools`).
    #[default]
    Optimized,
    /// Quick code first: compiled without Cranelift's optimizer and with its single-pass
    /// register allocator, in about half the time, so the plugin serves sooner; its code
    /// runs up to about twice as slow. One background thread then compiles the optimized
    /// code (on every core, as at start), stores it in the compile cache and swaps it in:
    /// calls that start after that run it, calls already running finish on the quick
    /// code. The next start finds the optimized code in the cache. A failed optimized
    /// compile is logged and the plugin keeps its quick code; quick code is never
    /// cached. [`PluginHost::wait_for_optimized`](super::PluginHost::wait_for_optimized)
    /// lets a host that is about to exit finish the cache entries first (`host run`
    /// does, at the end of its input).
    QuickFirst,
}

/// Default of [`PluginHostConfig::max_concurrent_calls`].
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;

/// Default of [`PluginHostConfig::max_pool_memory`]: 4 GiB, what the default 64
/// concurrent calls x 64 MiB need, and what a 2-core machine with 8 GiB can give plugins
/// without swapping.
pub const DEFAULT_MAX_POOL_MEMORY: u64 = 4 * 1024 * 1024 * 1024;

impl Default for PluginHostConfig {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            storage_roots: Vec::new(),
            default_limits: PluginLimits::default(),
            max_limits: PluginLimits::default(),
            max_pool_memory: DEFAULT_MAX_POOL_MEMORY,
            definition_limits: DefinitionLimits::default(),
            storage: None,
            file_policy: FilePolicy::default(),
            max_file_access: FileAccess::None,
            fresh_instance_per_call: true,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            http: HttpPolicy::default(),
            config: ConfigValues::default(),
            compile_tiers: CompileTiers::Optimized,
        }
    }
}

impl fmt::Debug for PluginHostConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginHostConfig")
            .field("cache_dir", &self.cache_dir)
            .field("storage_roots", &self.storage_roots)
            .field("default_limits", &self.default_limits)
            .field("max_limits", &self.max_limits)
            .field("max_pool_memory", &self.max_pool_memory)
            .field("definition_limits", &self.definition_limits)
            .field("storage", &self.storage.as_ref().map(|_| "Storage"))
            .field("file_policy", &self.file_policy)
            .field("max_file_access", &self.max_file_access)
            .field("fresh_instance_per_call", &self.fresh_instance_per_call)
            .field("max_concurrent_calls", &self.max_concurrent_calls)
            .field("http", &self.http)
            .field("config", &self.config)
            .field("compile_tiers", &self.compile_tiers)
            .finish()
    }
}

/// `$XDG_CACHE_HOME/wasm-toolhost`, else `$HOME/.cache/wasm-toolhost`; `None` when
/// neither variable is set (the cache is then off).
pub fn default_cache_dir() -> Option<PathBuf> {
    cache_dir_from(
        std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn cache_dir_from(xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    // XDG says a relative value is invalid and must be ignored.
    match xdg.filter(|dir| dir.is_absolute()) {
        Some(dir) => Some(dir.join("wasm-toolhost")),
        None => home
            .filter(|dir| dir.is_absolute())
            .map(|home| home.join(".cache").join("wasm-toolhost")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_access_spellings_round_trip_and_order() {
        for access in [FileAccess::None, FileAccess::Read, FileAccess::ReadWrite] {
            assert_eq!(FileAccess::parse(access.as_str()), Some(access));
        }
        assert_eq!(FileAccess::parse("write"), None);
        assert!(FileAccess::None < FileAccess::Read && FileAccess::Read < FileAccess::ReadWrite);
    }

    #[test]
    fn default_config_grants_nothing() {
        let config = PluginHostConfig::default();
        assert_eq!(config.max_file_access, FileAccess::None);
        assert!(config.storage.is_none());
        assert_eq!(config.default_limits, PluginLimits::default());
        assert!(config.fresh_instance_per_call);
        assert!(config.http.allow.is_empty() && config.http.allow_nets.is_empty());
        assert!(config.config.is_empty());
    }

    #[test]
    fn cache_dir_prefers_absolute_xdg() {
        let xdg = Some(PathBuf::from("/x"));
        let home = Some(PathBuf::from("/home/u"));
        assert_eq!(
            cache_dir_from(xdg, home.clone()),
            Some(PathBuf::from("/x/wasm-toolhost"))
        );
        assert_eq!(
            cache_dir_from(Some(PathBuf::from("rel")), home),
            Some(PathBuf::from("/home/u/.cache/wasm-toolhost"))
        );
        assert_eq!(cache_dir_from(None, None), None);
    }
}
