//! What a plugin's [`Store`](wasmtime::Store) holds: its WASI context (no preopened
//! directory, no socket, no arguments, no stdin, an environment of exactly its
//! configuration values; stdout and stderr captured), its `wasi:http` context and hooks,
//! its limiter, and the context of the imports the host implements.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::{HasData, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::host::files::FileGrant;
use super::host::http::{HttpGrant, HttpHooks};
use super::host::quota::{CallBudget, PluginMeter};
use super::limits::Limiter;
use super::output::Capture;
use super::plugin_config::{PluginConfig, Redactor};
use super::PluginLimits;

/// The data of one plugin store.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    /// Checks and sends the plugin's outbound HTTP.
    pub http_hooks: HttpHooks,
    /// Memory, table and instance limits, with the record of a refused grow.
    pub limiter: Limiter,
    /// What the `log` and `files` imports work with.
    pub imports: ImportCtx,
}

/// The context of the host-implemented imports (`log`, `files`) of one store.
pub struct ImportCtx {
    /// The plugin's name, attached to its log lines.
    pub plugin: Arc<str>,
    /// The tool being called (empty while loading).
    pub tool: String,
    /// The plugin's file grant.
    pub files: Arc<FileGrant>,
    /// The plugin's lifetime write totals and log rate limit, shared by all its calls.
    pub meter: Arc<PluginMeter>,
    /// What the current call has used of its import budget.
    pub budget: CallBudget,
    /// The plugin's memory cap: no read may be larger (the file is copied into it).
    pub memory_bytes: u64,
    /// Storage calls of plugins in flight on the blocking pool, host-wide (see
    /// [`Shared::io`](super::runtime::Shared::io)).
    pub io: Arc<Semaphore>,
    /// The plugin's configuration values (the `config` import).
    pub config: Arc<PluginConfig>,
    /// Replaces the plugin's secret values in its log lines.
    pub redactor: Arc<Redactor>,
}

impl ImportCtx {
    /// Resets the per-call state for a call of `tool`.
    pub fn begin_call(&mut self, tool: &str) {
        tool.clone_into(&mut self.tool);
        self.budget = CallBudget::default();
    }
}

#[cfg(test)]
impl ImportCtx {
    /// A context for tool `t` of plugin `p` with `files`, its own meter under `limits`,
    /// the default memory cap and `io` storage permits.
    pub fn for_test(files: FileGrant, limits: super::ImportLimits, io: usize) -> Self {
        let plugin: Arc<str> = Arc::from("p");
        Self {
            meter: Arc::new(PluginMeter::new(plugin.clone(), limits)),
            plugin,
            tool: "t".into(),
            files: Arc::new(files),
            budget: CallBudget::default(),
            memory_bytes: super::DEFAULT_MEMORY_BYTES,
            io: Arc::new(Semaphore::new(io)),
            config: Arc::default(),
            redactor: Arc::default(),
        }
    }
}

/// The [`HasData`] marker that hands the generated import bindings an [`ImportCtx`].
pub struct Imports;

impl HasData for Imports {
    type Data<'a> = &'a mut ImportCtx;
}

/// What a plugin was granted besides files: its configuration and its HTTP grant.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// The configuration values.
    pub config: Arc<PluginConfig>,
    /// The secrets of `config`, to redact.
    pub redactor: Arc<Redactor>,
    /// The HTTP grant.
    pub http: Arc<HttpGrant>,
}

/// A store's state with its captured stdout and stderr.
pub struct NewState {
    /// The state to put in the store.
    pub state: PluginState,
    /// The guest's stdout.
    pub stdout: Capture,
    /// The guest's stderr.
    pub stderr: Capture,
}

impl NewState {
    /// A fresh state for `plugin` under `limits`.
    ///
    /// # Sandbox
    /// The WASI context gives clocks and random numbers only: no preopened directory,
    /// TCP, UDP or name lookup off, no argument, stdin closed; its environment variables
    /// are exactly the plugin's configuration values (`grants.config`). HTTP goes only
    /// through `wasi:http`, checked against `grants.http`.
    pub fn new(
        plugin: Arc<str>,
        limits: &PluginLimits,
        files: Arc<FileGrant>,
        meter: Arc<PluginMeter>,
        io: Arc<Semaphore>,
        grants: &Grants,
    ) -> Self {
        let stdout = Capture::new(limits.max_stderr_bytes);
        let stderr = Capture::new(limits.max_stderr_bytes);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for (key, value) in grants.config.env() {
            wasi.env(key, value);
        }
        let wasi = wasi.build();
        NewState {
            state: PluginState {
                wasi,
                table: super::limits::resource_table(limits),
                http: WasiHttpCtx::new(),
                http_hooks: HttpHooks::new(
                    plugin.clone(),
                    Arc::clone(&grants.http),
                    Arc::clone(&meter),
                    Arc::clone(&grants.redactor),
                ),
                limiter: Limiter::new(limits),
                imports: ImportCtx {
                    plugin,
                    tool: String::new(),
                    files,
                    meter,
                    budget: CallBudget::default(),
                    memory_bytes: limits.memory_bytes,
                    io,
                    config: Arc::clone(&grants.config),
                    redactor: Arc::clone(&grants.redactor),
                },
            },
            stdout,
            stderr,
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}
