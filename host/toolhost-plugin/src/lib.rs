//! Third-party tools as WebAssembly components, run under wasmtime.
//!
//! A plugin is a `.wasm` component (WASI preview 2) targeting the `plugin` world of
//! `wit/plugin.wit`. [`PluginHost::load_dir`] loads every component of a directory and
//! registers the tools each one declares into a [`Registry`](toolhost::registry::Registry), next to the built-in tools;
//! a dispatch of such a tool runs the plugin under its limits.
//!
//! ```
//! use toolhost_plugin::{PluginHost, PluginHostConfig};
//! use toolhost::registry::Registry;
//!
//! let host = PluginHost::new(PluginHostConfig::builder().cache_dir(None).build())?;
//! let registry = Registry::new();
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("broken.wasm"), b"not wasm")?;
//! let report = host.load_dir(dir.path(), &registry);
//! assert!(report.loaded.is_empty());
//! assert!(report.failed[0].error.to_string().contains("broken.wasm: not a WebAssembly component"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Sandbox
//! A plugin is untrusted code. It gets a WASI context with clocks and random numbers
//! only: no preopened directory, no socket, no argument, no stdin, and as environment
//! variables exactly the configuration values of the keys its manifest declares
//! ([`plugin_config`](PluginConfig)); its stdout and stderr are captured (bounded,
//! secrets redacted) and logged. It reaches the host's files only through the `files`
//! import, and only when its manifest asks for a grant the host allows
//! ([`PluginHostConfigBuilder::max_file_access`], deny by default); and the network only
//! through `wasi:http/outgoing-handler`, to the hosts its manifest asks for and the
//! operator allows ([`PluginHostConfigBuilder::http`], none by default), never to a private,
//! loopback or link-local address unless the operator allows that network (see
//! [`HttpPolicy`]).
//!
//! Components built against `toolhost:plugin@0.2.0` (`wit/plugin.wit`) and against the
//! earlier 0.1.0 (`wit/legacy/plugin-0.1.0.wit`) both load: the linker serves the
//! imports of both. Each call
//! runs in a fresh instance (by default) under a wall-time limit enforced by epoch
//! interruption, a memory cap, optional fuel, instance/table counts and an output cap;
//! whatever the plugin does, the call ends with a result or a [`ToolError`] and the host
//! keeps serving. Which failure becomes which error is under [Errors](#errors).
//!
//! A manifest may lower its limits but not raise them past
//! [`PluginHostConfigBuilder::max_limits`], which is the default limits unless the operator
//! raises it. The instance pool holds at most [`PluginHostConfigBuilder::max_pool_memory`]
//! (slots x the largest plugin memory; see [`PoolPlan`], logged at start), and each
//! call's host handles (pollables, streams) are capped ([`PluginLimits::max_handles`]).
//! Loading cannot be held or flooded by one plugin: its files must be regular files
//! under 256 MiB (component) / 64 KiB (manifest), its definitions must come
//! within [`DefinitionLimits`](limits::DefinitionLimits) (count, sizes, depth) and before its deadline, and the
//! plugins of a directory are asked at once.
//!
//! # Cost
//! Measured on a 2-core machine, release host, the `greet` example (a 143 KiB component
//! built with the SDK), through [`Registry::dispatch`](toolhost::registry::Registry::dispatch):
//!
//! | what | time |
//! |---|---|
//! | compiling the component (first start) | ~245 ms |
//! | loading it from the compile cache (second start) | ~0.3 ms, ~1-4 ms for the whole `load_file` |
//! | a call, fresh instance per call (default) | median 44 µs, p99 80-120 µs |
//! | a call, reused instance (`fresh_instance_per_call = false`) | median 4.7 µs |
//! | the same tool as a native closure | median 0.5 µs |
//!
//! A fresh call splits into ~1.5 µs of host setup (store, WASI context, limiter,
//! deadline), ~10 µs instantiation, ~20 µs in the guest (the SDK builds its tool list
//! and parses the arguments) and ~12 µs to drop the store. Fuel metering costs nothing
//! measurable per call. Eight concurrent callers reach ~21 000 calls/s fresh and
//! ~200 000 calls/s reused. A CPU-bound guest is stopped within one epoch tick
//! ([`EPOCH_TICK`](engine::EPOCH_TICK), 10 ms) of its deadline when it has a thread to itself, and shares
//! its thread fairly with other tasks meanwhile (it yields at every tick).
//!
//! # Errors
//! Loading fails with a [`PluginError`] naming the file. A call fails with a
//! [`ToolError`], and the plugin's two channels are kept apart, as wasmtime's
//! `TrappableError` does: the guest *returned* (a result, or its own `tool-error`), or
//! the call *failed* (trap, interrupt, limit, host error). Failures are told apart by
//! downcasting (`wasmtime::Trap`, `PoolConcurrencyLimitError`) and by what the store
//! recorded (a refused memory grow), never by matching the text of the top-level error:
//!
//! | what happened | error |
//! |---|---|
//! | epoch deadline (CPU-bound guest) or timer (waiting guest) | [`ToolError::TimedOut`] with the limit that applied |
//! | fuel ran out | [`ToolError::LimitExceeded`] `fuel (N)` |
//! | a memory grow over the cap was refused, then the guest trapped | [`ToolError::LimitExceeded`] `memory (64 MiB)` |
//! | any other trap (Rust panic, stack overflow, unreachable, out-of-bounds) | [`ToolError::ToolPanicked`]: panic message from stderr, else the trap |
//! | the instance pool is exhausted | [`ToolError::LimitExceeded`] `concurrent plugin instances` |
//! | the store's resource table is full (`max_handles`) | [`ToolError::LimitExceeded`] `host handles (1024)` |
//! | any other host-side error | [`ToolError::ToolPanicked`] with the error's causes |
//! | result text over `max_output_bytes` | [`ToolError::LimitExceeded`] `output (1 MiB)` |
//! | result text not JSON | [`ToolError::Failed`] `the plugin returned invalid JSON: ...` |
//! | guest `invalid-arguments(m)` / `failed(m)` | [`ToolError::InvalidArguments`] / [`ToolError::Failed`] with `m` |
//!
//! [`ToolError`]: toolhost::registry::ToolError
//! [`ToolError::TimedOut`]: toolhost::registry::ToolError::TimedOut
//! [`ToolError::LimitExceeded`]: toolhost::registry::ToolError::LimitExceeded
//! [`ToolError::ToolPanicked`]: toolhost::registry::ToolError::ToolPanicked
//! [`ToolError::Failed`]: toolhost::registry::ToolError::Failed
//! [`ToolError::InvalidArguments`]: toolhost::registry::ToolError::InvalidArguments
#![deny(missing_docs)]

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use wasmtime::component::Linker;
use wasmtime::Engine;

use toolhost::registry::{format_bytes, ToolDefinition};

pub mod cache;
mod cache_dir;
mod classify;
mod digest;
pub mod engine;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod host;
pub mod http_policy;
mod limit_value;
pub mod limits;
mod loader;
pub mod lock;
pub mod manifest;
mod media;
pub mod namespace;
mod optimize;
mod output;
pub mod plugin_config;
mod read;
mod runtime;
mod settings;
mod sources;
mod state;
mod v0_1;
mod v0_2;
mod v0_3;
pub mod watch;
mod world;

// What an embedder names. The rest of the API is in the public modules, grouped by
// what it is about ([`limits`], [`http_policy`], [`plugin_config`], [`cache`],
// [`engine`]); the defaults are stated by the setters, not exported as constants.
pub use error::{PluginError, PluginErrorKind};
pub use host::file_access::FileAccess;
pub use http_policy::HttpPolicy;
pub use limits::PluginLimits;
pub use plugin_config::ConfigValues;
pub use settings::{default_cache_dir, CompileTiers, PluginHostConfig, PluginHostConfigBuilder};

use cache::{CompileCache, CompileSource};
use engine::Shard;
use engine::{Metering, PoolPlan};
use http_policy::HostPattern;
use plugin_config::PluginConfig;
use runtime::Shared;
use state::PluginState;

/// Loads plugins and runs their calls: wasmtime engines (epoch interruption, pooling
/// allocator; one per core) with their epoch ticker thread,
/// linkers with WASI p2 and the host's imports, and the compile cache; plus, built the
/// first time a plugin's limits set a fuel limit, the same again with fuel metering
/// ([`Metering`]).
///
/// Cheap to share behind an `Arc`; plugins loaded from it keep working after it is
/// dropped (their handlers hold what they need).
pub struct PluginHost {
    /// The [`Metering::EpochOnly`] engines, for every plugin without a fuel limit.
    plain: Backend,
    /// The [`Metering::Fuel`] engines, once a plugin has asked for fuel.
    fueled: OnceLock<Backend>,
    config: PluginHostConfig,
    pool: PoolPlan,
    shared: Arc<Shared>,
    /// Which file registered each tool through this host, so a duplicate name can name both
    /// plugins' files.
    owners: std::sync::Mutex<std::collections::HashMap<String, std::path::PathBuf>>,
    /// The optimized compiles waiting or running behind quick code
    /// ([`CompileTiers::QuickFirst`]).
    optimizer: Arc<optimize::Optimizer>,
}

impl fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginHost")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PluginHost {
    /// Builds the engine, starts the epoch ticker and prepares the linker.
    ///
    /// Logs the pool's size (one `info` line, target `plugin`), and a warning when the
    /// pool's memory cap lowered the calls that may run at once.
    ///
    /// # Errors
    /// [`PluginErrorKind::Host`] when `config.default_limits` exceed `config.max_limits`, one
    /// call does not fit `config.max_pool_memory`, or wasmtime refuses the configuration;
    /// [`PluginErrorKind::Cache`] when the compile cache directory may not be used (see
    /// [`check_cache_dir`](cache::check_cache_dir) and [`CacheError`](cache::CacheError)).
    pub fn new(config: PluginHostConfig) -> Result<Self, PluginError> {
        Self::with_shards(config, engine::engine_shards())
    }

    /// [`new`](Self::new) with `shards` engines of each kind (tests choose the count;
    /// the host takes one per core).
    fn with_shards(config: PluginHostConfig, shards: usize) -> Result<Self, PluginError> {
        if let Some((limit, default, max)) = config.default_limits.first_above(&config.max_limits) {
            return Err(PluginError::from(PluginErrorKind::Host { message: format!(
                    "the default {limit} limit ({default}) is above the maximum ({max}); raise max_limits or lower default_limits"
                ) }));
        }
        let pool = PoolPlan::for_config(&config)?;
        tracing::info!(
            target: "plugin",
            "plugin pool: {} slots x {} = {} of plugin memory at most (cap {}); {} calls at once",
            pool.slots,
            format_bytes(pool.slot_memory),
            format_bytes(pool.total_memory),
            format_bytes(config.max_pool_memory),
            pool.concurrent_calls,
        );
        if pool.concurrent_calls < config.max_concurrent_calls {
            tracing::warn!(
                target: "plugin",
                "plugin calls at once lowered from {} to {} so that every slot's {} fits the pool's cap of {}; raise --plugin-pool-memory (PluginHostConfig::max_pool_memory) for more",
                config.max_concurrent_calls,
                pool.concurrent_calls,
                format_bytes(pool.slot_memory),
                format_bytes(config.max_pool_memory),
            );
        }
        let plain = Backend::build(&pool, Metering::EpochOnly, shards, |engine| {
            Ok(CompileCache::open(
                config.cache_dir.as_deref(),
                &config.storage_roots,
                engine,
            )?)
        })?;
        Ok(Self {
            plain,
            fueled: OnceLock::new(),
            shared: Arc::new(Shared::new(
                pool.concurrent_calls,
                config.fresh_instance_per_call,
                shards,
            )),
            config,
            pool,
            owners: Default::default(),
            optimizer: Arc::default(),
        })
    }

    /// Waits until every optimized compile behind quick code
    /// ([`CompileTiers::QuickFirst`]) has finished (compiled, stored in the compile
    /// cache and swapped in, or failed and logged), or until `limit` has passed. Returns
    /// whether none is left. A host that is about to exit calls it so that the next start
    /// finds the optimized code in the cache; it returns at once when there is none.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolhost_plugin::{PluginHost, PluginHostConfig};
    ///
    /// let host = PluginHost::new(PluginHostConfig::builder().cache_dir(None).build())?;
    /// assert!(host.wait_for_optimized(Duration::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_for_optimized(&self, limit: std::time::Duration) -> bool {
        self.optimizer.wait(limit)
    }

    /// Optimized compiles still waiting or running.
    pub fn optimizing(&self) -> usize {
        self.optimizer.pending()
    }

    /// Plugin calls holding one of the [`PoolPlan::concurrent_calls`] places now (each
    /// holds an instance slot of the pool while it runs).
    ///
    /// ```
    /// use toolhost_plugin::{PluginHost, PluginHostConfig};
    ///
    /// let host = PluginHost::new(PluginHostConfig::builder().cache_dir(None).build())?;
    /// assert_eq!((host.calls_running(), host.idle_instances()), (0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn calls_running(&self) -> u32 {
        let free = u32::try_from(self.shared.slots.available_permits()).unwrap_or(u32::MAX);
        self.pool.concurrent_calls.max(1).saturating_sub(free)
    }

    /// Idle instances kept for reuse now, over all plugins (each holds a slot of the
    /// pool; always 0 with a fresh instance per call).
    pub fn idle_instances(&self) -> u32 {
        self.shared.idle()
    }

    /// The engines, linkers and compile cache for plugins needing `metering`; the fuel
    /// engines are built (and their ticker started) on first use.
    fn backend(&self, metering: Metering) -> Result<&Backend, PluginError> {
        if metering == Metering::EpochOnly {
            return Ok(&self.plain);
        }
        if let Some(backend) = self.fueled.get() {
            return Ok(backend);
        }
        let backend = Backend::build(
            &self.pool,
            Metering::Fuel,
            self.plain.shards.len(),
            |engine| Ok(self.plain.cache.for_engine(engine)),
        )?;
        // Two threads may build one each; the first set wins, the other is dropped
        // (its ticker ends with it).
        Ok(self.fueled.get_or_init(|| backend))
    }

    /// The first engine of the plain backend (for tests).
    #[cfg(test)]
    fn engine(&self) -> &Engine {
        &self.plain.shards[0].engine
    }

    /// How the instance pool was sized (slots, memory per slot, calls at once).
    pub fn pool(&self) -> &PoolPlan {
        &self.pool
    }

    /// The configuration this host was built with.
    pub fn config(&self) -> &PluginHostConfig {
        &self.config
    }
}

/// Engines of one [`Metering`], one per shard, with their linkers and compile cache.
struct Backend {
    metering: Metering,
    /// Shared with every plugin's runtime (to prepare it in the other shards) and
    /// optimized compile.
    shards: Arc<[Shard]>,
    /// Keyed by the engines' fingerprint, the same for every shard.
    cache: CompileCache,
    /// The engine that compiles quick code ([`CompileTiers::QuickFirst`]), built the
    /// first time it is needed.
    quick: OnceLock<Engine>,
}

impl Backend {
    /// `shards` engines configured alike (so one compiled artifact loads into each),
    /// one ticker thread for all of them, and the cache `cache` opens for them.
    fn build(
        plan: &PoolPlan,
        metering: Metering,
        shards: usize,
        cache: impl FnOnce(&Engine) -> Result<CompileCache, PluginError>,
    ) -> Result<Self, PluginError> {
        let shards = (0..shards.max(1))
            .map(|_| {
                let engine = engine::build_with(plan, metering, shards)?;
                Ok(Shard {
                    linker: linker(&engine)?,
                    engine,
                })
            })
            .collect::<Result<Arc<[_]>, PluginError>>()?;
        let engines: Vec<&Engine> = shards.iter().map(|shard| &shard.engine).collect();
        engine::start_ticker(&engines)?;
        Ok(Self {
            metering,
            cache: cache(&shards[0].engine)?,
            shards,
            quick: OnceLock::new(),
        })
    }

    /// The engine that compiles quick code for these engines.
    fn quick_engine(&self) -> Result<&Engine, PluginError> {
        if let Some(engine) = self.quick.get() {
            return Ok(engine);
        }
        let engine = engine::build_quick(self.metering)?;
        Ok(self.quick.get_or_init(|| engine))
    }
}

/// A linker for `engine` with WASI p2 and the host's imports.
fn linker(engine: &Engine) -> Result<Linker<PluginState>, PluginError> {
    let mut linker = Linker::new(engine);
    let link_error = |err: wasmtime::Error| {
        PluginError::from(PluginErrorKind::Host {
            message: format!("cannot link the host imports: {}", error::error_chain(&err)),
        })
    };
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(link_error)?;
    // toolhost:plugin's imports, of every version, so components built against any load.
    world::add_to_linker(&mut linker).map_err(link_error)?;
    // wasi:http/types and outgoing-handler; every request goes through
    // host/http.rs's checks.
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(link_error)?;
    Ok(linker)
}

/// What [`PluginHost::load_dir`] did.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// The lock file the components were checked against, if any.
    pub lock: Option<PathBuf>,
    /// The plugins loaded, in file-name order.
    pub loaded: Vec<LoadedPlugin>,
    /// The files that failed, in file-name order.
    pub failed: Vec<LoadFailure>,
}

/// A plugin whose tools were registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedPlugin {
    /// The plugin's name: its file name without `.wasm`.
    pub name: String,
    /// The namespace its tools and prompts are offered under (the operator's, else its
    /// manifest's): [`namespace`]. `tools` holds the final names.
    pub namespace: Option<String>,
    /// The `.wasm` file.
    pub path: PathBuf,
    /// The tools registered, in the plugin's order.
    pub tools: Vec<String>,
    /// Compiled now, or loaded from the cache, and how long that took.
    pub compile: CompileSource,
    /// The file access granted.
    pub grants: FileAccess,
    /// The sub-tree file access is confined to, if any.
    pub root: Option<String>,
    /// The manifest file, if there is one.
    pub manifest: Option<PathBuf>,
    /// The limits every call runs under.
    pub limits: PluginLimits,
    /// The hosts it may send HTTP requests to.
    pub http: Vec<HostPattern>,
    /// Its configuration keys (values hidden from `Debug`).
    pub config: PluginConfig,
}

/// A file [`PluginHost::load_dir`] could not load.
#[derive(Debug)]
pub struct LoadFailure {
    /// The file.
    pub path: PathBuf,
    /// Why (its message names the file).
    pub error: PluginError,
}

/// What [`PluginHost::inspect`] found out about a plugin.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    /// The plugin's name: its file name without `.wasm`.
    pub name: String,
    /// The namespace its tools and prompts would be offered under (the operator's, else
    /// its manifest's); `tools` holds the final names.
    pub namespace: Option<String>,
    /// The `.wasm` file.
    pub path: PathBuf,
    /// The manifest file, if there is one.
    pub manifest: Option<PathBuf>,
    /// The file access the manifest asks for.
    pub grants: FileAccess,
    /// Whether this host allows that access (if not, loading fails with
    /// [`PluginErrorKind::GrantDenied`]).
    pub grant_allowed: bool,
    /// The sub-tree file access is confined to, if any.
    pub root: Option<String>,
    /// The hosts the manifest asks to send HTTP requests to.
    pub http: Vec<HostPattern>,
    /// Whether this host allows all of them (if not, loading fails with
    /// [`PluginErrorKind::HttpDenied`]).
    pub http_allowed: bool,
    /// The configuration keys the manifest declares, with this host's values (a key the
    /// operator set no value for has none; loading fails with
    /// [`PluginErrorKind::ConfigMissing`] if it is required).
    ///
    /// # Sandbox
    /// Holds secret values: show [`ConfigEntry::key`](crate::plugin_config::ConfigEntry::key) and
    /// whether a value is set, never a secret's value.
    pub config: PluginConfig,
    /// The limits calls would run under.
    pub limits: PluginLimits,
    /// Whether the manifest asks to ask the client's user during a call
    /// (`[grants] ask = true`, the 0.3.0 `interaction` import).
    pub ask: bool,
    /// Whether this host allows plugins to ask (`--plugin-ask`,
    /// [`PluginHostConfigBuilder::plugin_ask`]); a plugin asks only when both are true,
    /// else every question is refused (`not-allowed`) and the plugin still loads.
    pub ask_allowed: bool,
    /// What the manifest asks to sample (`[grants] sampling`, the 0.3.0 `sampling`
    /// import): requests per call and tokens per request; `None` when it asks nothing.
    pub sampling: Option<manifest::SamplingGrant>,
    /// Whether this host allows plugins to sample (`--plugin-sampling`,
    /// [`PluginHostConfigBuilder::plugin_sampling`]); a plugin samples only when it
    /// asks and this is true, else every request is refused (`not-allowed`) and the
    /// plugin still loads.
    pub sampling_allowed: bool,
    /// Which of its registry's tools the manifest asks to call (`[grants] tools` and
    /// `max_tool_calls`, the 0.3.0 `registry` import); `None` when it asks none.
    pub tools_grant: Option<manifest::ToolsGrant>,
    /// The tools this host lets plugins call (`--plugin-tools`,
    /// [`PluginHostConfigBuilder::plugin_tools`]); a plugin calls a tool only when both
    /// name it, else the call is refused as not granted and the plugin still loads.
    pub tools_allowed: Option<manifest::ToolNames>,
    /// The tools it declares.
    pub tools: Vec<ToolDefinition>,
    /// The prompts it offers (a 0.3.0 `rich-plugin`; empty otherwise).
    pub prompts: Vec<toolhost::catalog::PromptDefinition>,
    /// Whether it offers resources (a 0.3.0 `rich-plugin` whose templates or first page
    /// of resources are not empty).
    pub offers_resources: bool,
    /// Its resource templates (empty when it offers none, or only listed resources).
    pub resource_templates: Vec<toolhost::catalog::ResourceTemplate>,
    /// The URI prefix its resources must start with: the manifest's
    /// `[resources] namespace`, else `plugin://<name>/`.
    pub resource_namespace: String,
    /// The component's imports (`wasi:cli/stderr@0.2.x`, `toolhost:plugin/files@0.2.0`, ...).
    pub imports: Vec<String>,
    /// The component's exports.
    pub exports: Vec<String>,
    /// Compiled now, or loaded from the cache.
    pub compile: CompileSource,
}

#[cfg(test)]
mod tests;
