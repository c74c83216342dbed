//! The plugin host's settings ([`PluginHostConfig`]): the most file access and HTTP a plugin may
//! be granted, the default and maximum limits, the pool, the compile cache.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost::vfs::FilePolicy;
use toolhost::vfs::Storage;

use super::host::file_access::FileAccess;
use super::limits::DefinitionLimits;
use super::{ConfigValues, HttpPolicy, PluginLimits};

/// Settings of a [`PluginHost`](super::PluginHost), made with
/// [`PluginHostConfig::builder`] and read back through its getters.
///
/// The default grants nothing: no file access for any plugin, the default limits, and
/// a fresh instance for every call. Each setter of [`PluginHostConfigBuilder`] states its
/// default and its bound.
///
/// ```
/// use toolhost_plugin::{FileAccess, PluginHostConfig};
///
/// let config = PluginHostConfig::default();
/// assert_eq!(config.max_file_access(), FileAccess::None);
/// assert!(config.fresh_instance_per_call());
/// assert!(config.storage().is_none());
///
/// let config = PluginHostConfig::builder()
///     .cache_dir(None)
///     .max_concurrent_calls(8)
///     .build();
/// assert_eq!(config.cache_dir(), None);
/// assert_eq!(config.max_concurrent_calls(), 8);
/// ```
#[derive(Clone)]
pub struct PluginHostConfig {
    /// [`PluginHostConfigBuilder::cache_dir`].
    pub(crate) cache_dir: Option<PathBuf>,
    /// [`PluginHostConfigBuilder::storage_roots`].
    pub(crate) storage_roots: Vec<PathBuf>,
    /// [`PluginHostConfigBuilder::default_limits`].
    pub(crate) default_limits: PluginLimits,
    /// [`PluginHostConfigBuilder::max_limits`].
    pub(crate) max_limits: PluginLimits,
    /// [`PluginHostConfigBuilder::max_pool_memory`].
    pub(crate) max_pool_memory: u64,
    /// [`PluginHostConfigBuilder::definition_limits`].
    pub(crate) definition_limits: DefinitionLimits,
    /// [`PluginHostConfigBuilder::storage`].
    pub(crate) storage: Option<Arc<dyn Storage>>,
    /// [`PluginHostConfigBuilder::file_policy`].
    pub(crate) file_policy: FilePolicy,
    /// [`PluginHostConfigBuilder::max_file_access`].
    pub(crate) max_file_access: FileAccess,
    /// [`PluginHostConfigBuilder::fresh_instance_per_call`].
    pub(crate) fresh_instance_per_call: bool,
    /// [`PluginHostConfigBuilder::max_concurrent_calls`].
    pub(crate) max_concurrent_calls: u32,
    /// [`PluginHostConfigBuilder::http`].
    pub(crate) http: HttpPolicy,
    /// [`PluginHostConfigBuilder::config_values`].
    pub(crate) config: ConfigValues,
    /// [`PluginHostConfigBuilder::compile_tiers`].
    pub(crate) compile_tiers: CompileTiers,
    /// [`PluginHostConfigBuilder::plugin_ask`].
    pub(crate) plugin_ask: bool,
    /// [`PluginHostConfigBuilder::plugin_sampling`].
    pub(crate) plugin_sampling: bool,
    /// [`PluginHostConfigBuilder::plugin_tools`].
    pub(crate) plugin_tools: Option<crate::manifest::ToolNames>,
    /// [`PluginHostConfigBuilder::tool_namespace`]: plugin name -> namespace.
    pub(crate) tool_namespaces: std::collections::BTreeMap<String, String>,
}

impl PluginHostConfig {
    /// A builder with every setting at its default (the same as
    /// [`PluginHostConfig::default`]).
    pub fn builder() -> PluginHostConfigBuilder {
        PluginHostConfigBuilder {
            config: Self::default(),
        }
    }

    /// A builder that starts from these settings, to change some of them.
    pub fn to_builder(&self) -> PluginHostConfigBuilder {
        PluginHostConfigBuilder {
            config: self.clone(),
        }
    }

    /// Where compiled components are cached; `None` when the cache is off
    /// ([`PluginHostConfigBuilder::cache_dir`]).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// The directories on disk the host's stores work in
    /// ([`PluginHostConfigBuilder::storage_roots`]).
    pub fn storage_roots(&self) -> &[PathBuf] {
        &self.storage_roots
    }

    /// Limits of a plugin whose manifest sets none
    /// ([`PluginHostConfigBuilder::default_limits`]).
    pub fn default_limits(&self) -> &PluginLimits {
        &self.default_limits
    }

    /// The most a manifest may ask for ([`PluginHostConfigBuilder::max_limits`]).
    pub fn max_limits(&self) -> &PluginLimits {
        &self.max_limits
    }

    /// The cap on the linear memory of all pooled instances together
    /// ([`PluginHostConfigBuilder::max_pool_memory`]).
    pub fn max_pool_memory(&self) -> u64 {
        self.max_pool_memory
    }

    /// Caps on a plugin's tool definitions
    /// ([`PluginHostConfigBuilder::definition_limits`]).
    pub fn definition_limits(&self) -> &DefinitionLimits {
        &self.definition_limits
    }

    /// The storage the `files` import works on ([`PluginHostConfigBuilder::storage`]).
    pub fn storage(&self) -> Option<&Arc<dyn Storage>> {
        self.storage.as_ref()
    }

    /// The path policy of every `files` call ([`PluginHostConfigBuilder::file_policy`]).
    pub fn file_policy(&self) -> &FilePolicy {
        &self.file_policy
    }

    /// The most file access any plugin may get
    /// ([`PluginHostConfigBuilder::max_file_access`]).
    pub fn max_file_access(&self) -> FileAccess {
        self.max_file_access
    }

    /// Whether every call gets a fresh instance
    /// ([`PluginHostConfigBuilder::fresh_instance_per_call`]).
    pub fn fresh_instance_per_call(&self) -> bool {
        self.fresh_instance_per_call
    }

    /// Calls asked to run at once across all plugins
    /// ([`PluginHostConfigBuilder::max_concurrent_calls`]); the pool may run fewer
    /// ([`PoolPlan::concurrent_calls`](crate::engine::PoolPlan::concurrent_calls)).
    pub fn max_concurrent_calls(&self) -> u32 {
        self.max_concurrent_calls
    }

    /// The operator's outbound HTTP policy ([`PluginHostConfigBuilder::http`]).
    pub fn http(&self) -> &HttpPolicy {
        &self.http
    }

    /// The configuration values per plugin ([`PluginHostConfigBuilder::config_values`]).
    pub fn config_values(&self) -> &ConfigValues {
        &self.config
    }

    /// How a plugin the compile cache does not hold is compiled
    /// ([`PluginHostConfigBuilder::compile_tiers`]).
    pub fn compile_tiers(&self) -> CompileTiers {
        self.compile_tiers
    }

    /// Whether plugins whose manifest asks for it may ask the client's user
    /// ([`PluginHostConfigBuilder::plugin_ask`]).
    pub fn plugin_ask(&self) -> bool {
        self.plugin_ask
    }

    /// Whether plugins whose manifest asks for it may ask the client's model for
    /// completions ([`PluginHostConfigBuilder::plugin_sampling`]).
    pub fn plugin_sampling(&self) -> bool {
        self.plugin_sampling
    }

    /// The tools plugins whose manifest asks for them may call
    /// ([`PluginHostConfigBuilder::plugin_tools`]); `None`: none.
    pub fn plugin_tools(&self) -> Option<&crate::manifest::ToolNames> {
        self.plugin_tools.as_ref()
    }

    /// The namespace the operator gave the plugin `plugin` (its file name without
    /// `.wasm`), if any ([`PluginHostConfigBuilder::tool_namespace`]).
    pub fn tool_namespace(&self, plugin: &str) -> Option<&str> {
        self.tool_namespaces.get(plugin).map(String::as_str)
    }
}

/// Builds a [`PluginHostConfig`]: start from [`PluginHostConfig::builder`] (every
/// setting at its default) or [`PluginHostConfig::to_builder`], call the setters, then
/// [`build`](Self::build). A setting added later gets a setter and a default, so code
/// written against this builder keeps compiling.
///
/// Nothing is checked here: the settings are checked together when
/// [`PluginHost::new`](super::PluginHost::new) starts the host (each setter says what it
/// refuses).
///
/// ```
/// use toolhost_plugin::limits::PluginLimits;
/// use toolhost_plugin::{FileAccess, PluginHost, PluginHostConfig, PluginErrorKind};
///
/// let mut builder = PluginHostConfig::builder();
/// builder.cache_dir(None).max_file_access(FileAccess::Read);
/// let config = builder.build();
/// assert_eq!(config.max_file_access(), FileAccess::Read);
///
/// // Default limits above the maximum are refused when the host starts.
/// let bigger = PluginLimits::default().with_memory_bytes(128 << 20);
/// let err = PluginHost::new(config.to_builder().default_limits(bigger).build()).unwrap_err();
/// assert!(matches!(err.kind(), PluginErrorKind::Host { .. }));
/// assert!(err.to_string().contains("the default memory limit (128 MiB) is above the maximum (64 MiB)"));
/// ```
#[derive(Clone, Debug)]
pub struct PluginHostConfigBuilder {
    config: PluginHostConfig,
}

impl PluginHostConfigBuilder {
    /// Where compiled components are cached; `None` disables the cache. Default:
    /// `$XDG_CACHE_HOME/wasm-toolhost`, else `$HOME/.cache/wasm-toolhost`, else none
    /// ([`default_cache_dir`]).
    ///
    /// # Sandbox
    /// A cache entry is native code the host runs. [`PluginHost::new`](super::PluginHost::new)
    /// refuses (with [`PluginErrorKind::Cache`](super::PluginErrorKind::Cache)) a
    /// directory inside, equal to or a parent of any of the
    /// [`storage_roots`](Self::storage_roots), owned by another user or writable by its
    /// group or others, and creates it `0700` (files `0600`); every entry is
    /// authenticated before it is loaded. See
    /// [`check_cache_dir`](crate::cache::check_cache_dir).
    pub fn cache_dir(&mut self, dir: Option<PathBuf>) -> &mut Self {
        self.config.cache_dir = dir;
        self
    }

    /// The directories on disk that the host's stores work in: the root of
    /// [`storage`](Self::storage) when it is an [`OsStorage`](toolhost::vfs::OsStorage)
    /// ([`OsStorage::root`](toolhost::vfs::OsStorage::root)), and that of the built-in file
    /// tools' store. A plugin's grant root lies inside its store's root, so it is covered.
    /// The compile cache is refused anywhere the model or a plugin could write it
    /// (inside, equal to or above one of these). Default: empty; a caller whose stores
    /// are on disk must list them here, the host cannot tell from a `dyn Storage`.
    pub fn storage_roots(&mut self, roots: Vec<PathBuf>) -> &mut Self {
        self.config.storage_roots = roots;
        self
    }

    /// Limits of a plugin whose manifest sets none. Default: [`PluginLimits::default`].
    /// Bound: each limit at most the same limit of [`max_limits`](Self::max_limits);
    /// above it, [`PluginHost::new`](super::PluginHost::new) fails with
    /// [`PluginErrorKind::Host`](super::PluginErrorKind::Host) naming the limit.
    pub fn default_limits(&mut self, limits: PluginLimits) -> &mut Self {
        self.config.default_limits = limits;
        self
    }

    /// The most a manifest may ask for; a manifest asking more is refused at load
    /// ([`PluginErrorKind::LimitTooHigh`](super::PluginErrorKind::LimitTooHigh)). Default:
    /// [`PluginLimits::default`], the same as the default limits: a manifest may only
    /// lower its limits unless the operator raises this ceiling (the CLI's
    /// `--plugin-max-memory`, `--plugin-max-timeout`). Bound: at least
    /// [`default_limits`](Self::default_limits) (else [`PluginHost::new`](super::PluginHost::new)
    /// fails); a memory above 4 GiB sizes pool slots as 4 GiB, all a 32-bit memory can
    /// address.
    ///
    /// # Sandbox
    /// Raising the memory here raises what every pool slot may hold; the pool then
    /// runs fewer calls at once to stay within [`max_pool_memory`](Self::max_pool_memory).
    pub fn max_limits(&mut self, limits: PluginLimits) -> &mut Self {
        self.config.max_limits = limits;
        self
    }

    /// The most linear memory all pooled plugin instances together may hold: pool slots
    /// x the largest memory a plugin may have. Default: 4 GiB, what the default 64
    /// concurrent calls x 64 MiB need, and what a 2-core machine with 8 GiB can give
    /// plugins without swapping. The pool gets as many slots as fit (and the calls that
    /// run at once are lowered to match, with a warning); bound: at least one call's
    /// slot memory, else [`PluginHost::new`](super::PluginHost::new) fails with
    /// [`PluginErrorKind::Host`](super::PluginErrorKind::Host).
    pub fn max_pool_memory(&mut self, bytes: u64) -> &mut Self {
        self.config.max_pool_memory = bytes;
        self
    }

    /// Caps on a plugin's tool definitions and the deadline for asking for them.
    /// Default: [`DefinitionLimits::default`] (its setters give each default).
    pub fn definition_limits(&mut self, limits: DefinitionLimits) -> &mut Self {
        self.config.definition_limits = limits;
        self
    }

    /// The storage the `files` import works on; `None` (the default) gives no plugin any
    /// file.
    pub fn storage(&mut self, storage: Option<Arc<dyn Storage>>) -> &mut Self {
        self.config.storage = storage;
        self
    }

    /// The path policy (hidden paths, extensions, size cap, read-only) applied to every
    /// `files` call, as for the built-in file tools. Default: [`FilePolicy::default`].
    pub fn file_policy(&mut self, policy: FilePolicy) -> &mut Self {
        self.config.file_policy = policy;
        self
    }

    /// The most file access any plugin may get. Default: [`FileAccess::None`]. A plugin
    /// whose manifest asks for more is not loaded
    /// ([`PluginErrorKind::GrantDenied`](super::PluginErrorKind::GrantDenied)).
    ///
    /// # Sandbox
    /// Anything above [`FileAccess::None`] lets plugin code read (or change) the files
    /// of [`storage`](Self::storage) that its manifest's `root` covers.
    pub fn max_file_access(&mut self, access: FileAccess) -> &mut Self {
        self.config.max_file_access = access;
        self
    }

    /// `true` (the default): every call gets a fresh instance, so nothing leaks between
    /// calls. `false`: a few instances per plugin are kept and reused, which is faster
    /// but lets a plugin keep state between calls of different sessions (and each call
    /// then needs two pool slots).
    pub fn fresh_instance_per_call(&mut self, fresh: bool) -> &mut Self {
        self.config.fresh_instance_per_call = fresh;
        self
    }

    /// Calls running at once across all plugins; more wait for a slot. The pooling
    /// allocator is sized from it. Default: 64. Bound: at least 1 (0 counts as 1), and at
    /// most what fits [`max_pool_memory`](Self::max_pool_memory): a larger value is
    /// lowered to that when the host starts, with a warning
    /// ([`PoolPlan::concurrent_calls`](crate::engine::PoolPlan::concurrent_calls)).
    pub fn max_concurrent_calls(&mut self, calls: u32) -> &mut Self {
        self.config.max_concurrent_calls = calls;
        self
    }

    /// Outbound HTTP: the hosts a plugin's manifest may ask for, the private networks
    /// plugins may reach, the resolver. Default: [`HttpPolicy::default`], which allows
    /// no host.
    ///
    /// # Sandbox
    /// See [`HttpPolicy::allow`] and [`HttpPolicy::allow_nets`].
    pub fn http(&mut self, policy: HttpPolicy) -> &mut Self {
        self.config.http = policy;
        self
    }

    /// Configuration values per plugin (`--plugin-config`); a plugin gets those of the
    /// keys its manifest declares. Default: none.
    pub fn config_values(&mut self, values: ConfigValues) -> &mut Self {
        self.config.config = values;
        self
    }

    /// How a plugin the compile cache does not hold is compiled: optimized before it
    /// serves (the default, [`CompileTiers::Optimized`]), or quick code first with the
    /// optimized code swapped in from the background (for a long-running server). See
    /// [`CompileTiers`].
    pub fn compile_tiers(&mut self, tiers: CompileTiers) -> &mut Self {
        self.config.compile_tiers = tiers;
        self
    }

    /// Whether a plugin whose manifest says `[grants] ask = true` may ask the client's
    /// user during a call (the 0.3.0 `interaction` import, MCP elicitation;
    /// `--plugin-ask`). Default: `false`: every question is answered `not-allowed`.
    ///
    /// # Sandbox
    /// Both the manifest and the operator must allow it. Even then a call asks at most
    /// 16 questions, each message at most 4 KiB and each schema at most 64 KiB of a JSON
    /// object schema, checked before anything reaches the client; a call served to no
    /// client that can answer gets `unsupported`, never a "yes".
    pub fn plugin_ask(&mut self, allow: bool) -> &mut Self {
        self.config.plugin_ask = allow;
        self
    }

    /// Whether a plugin whose manifest asks for sampling (`[grants] sampling`) may ask
    /// the client's language model for completions during a call (the 0.3.0 `sampling`
    /// import, MCP `sampling/createMessage`; `--plugin-sampling`). Default: `false`:
    /// every request is answered `not-allowed` and nothing reaches the client.
    ///
    /// # Sandbox
    /// Sampling spends the user's tokens and money. Both the manifest and the operator
    /// must allow it; even then a call sends at most the grant's `max_requests` (default
    /// 4, at most 16), each asking for at most its `max_tokens` (default 1,024, at most
    /// 32,768) and carrying at most 64 KiB, checked before anything reaches the client;
    /// a call served to no client that declared sampling gets `unsupported`.
    pub fn plugin_sampling(&mut self, allow: bool) -> &mut Self {
        self.config.plugin_sampling = allow;
        self
    }

    /// Which of its registry's tools a plugin whose manifest asks for them
    /// (`[grants] tools`) may list and call during a call (the 0.3.0 `registry` import;
    /// `--plugin-tools NAME`, repeatable, or `--plugin-tools '*'`). Default: `None`:
    /// `definitions` is empty and every call is refused as not granted.
    ///
    /// # Sandbox
    /// A plugin calls a tool only when both its manifest and this set name it. A nested
    /// call gets every check of a direct call, runs under what is left of the calling
    /// tool's time limit, and counts against the manifest's `max_tool_calls` (default and
    /// at most 64). The tools of a plugin that asks for this grant are never offered to
    /// another (no recursion). With a set given, the instance pool holds one more slot
    /// per concurrent call (see [`PoolPlan`](crate::engine::PoolPlan)): the nested call's
    /// instance, which runs inside its caller's concurrency slot.
    pub fn plugin_tools(&mut self, tools: Option<crate::manifest::ToolNames>) -> &mut Self {
        self.config.plugin_tools = tools;
        self
    }

    /// Offers the tools and prompts of the plugin `plugin` (its file name without
    /// `.wasm`) under `namespace`: its tool `search` becomes `NAMESPACE_search`
    /// ([`namespace`](crate::namespace)); the CLI's `--plugin-namespace NAME=PREFIX`.
    /// It replaces the namespace the plugin's manifest gives (`namespace = "..."`), so
    /// the operator settles a collision between two plugins without editing them.
    /// Default: none, every plugin's own names (or its manifest's namespace). Given
    /// twice for one plugin, the last wins.
    ///
    /// ```
    /// use toolhost_plugin::PluginHostConfig;
    ///
    /// let mut builder = PluginHostConfig::builder();
    /// builder.tool_namespace("github_search", "gh")?;
    /// assert!(builder.tool_namespace("other", "g_h").is_err());
    /// assert_eq!(builder.build().tool_namespace("github_search"), Some("gh"));
    /// # Ok::<(), toolhost_plugin::namespace::NamespaceError>(())
    /// ```
    ///
    /// # Errors
    /// [`NamespaceError`](crate::namespace::NamespaceError) when `namespace` breaks the
    /// rules of [`namespace`](crate::namespace) (1 to 32 characters of `a-z` and `0-9`,
    /// starting with a letter); nothing is set then.
    pub fn tool_namespace(
        &mut self,
        plugin: impl Into<String>,
        namespace: impl Into<String>,
    ) -> Result<&mut Self, crate::namespace::NamespaceError> {
        let namespace = namespace.into();
        crate::namespace::check_namespace(&namespace)?;
        self.config.tool_namespaces.insert(plugin.into(), namespace);
        Ok(self)
    }

    /// The settings as set so far (the builder can go on to build more).
    pub fn build(&self) -> PluginHostConfig {
        self.config.clone()
    }
}

/// How a plugin that is not in the compile cache is compiled
/// ([`PluginHostConfigBuilder::compile_tiers`]). A cache hit is optimized code either way.
///
/// ```
/// use toolhost_plugin::{CompileTiers, PluginHostConfig};
///
/// // A server that answers for hours: start serving on quick code.
/// let config = PluginHostConfig::builder()
///     .compile_tiers(CompileTiers::QuickFirst)
///     .build();
/// assert_eq!(config.compile_tiers(), CompileTiers::QuickFirst);
/// assert_eq!(PluginHostConfig::default().compile_tiers(), CompileTiers::Optimized);
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

/// Default of [`PluginHostConfigBuilder::max_concurrent_calls`].
pub(crate) const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;

/// Default of [`PluginHostConfigBuilder::max_pool_memory`]: 4 GiB, what the default 64
/// concurrent calls x 64 MiB need, and what a 2-core machine with 8 GiB can give plugins
/// without swapping.
pub(crate) const DEFAULT_MAX_POOL_MEMORY: u64 = 4 * 1024 * 1024 * 1024;

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
            plugin_ask: false,
            plugin_sampling: false,
            plugin_tools: None,
            tool_namespaces: std::collections::BTreeMap::new(),
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
            .field("plugin_ask", &self.plugin_ask)
            .field("plugin_sampling", &self.plugin_sampling)
            .field("plugin_tools", &self.plugin_tools)
            .field("tool_namespaces", &self.tool_namespaces)
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
