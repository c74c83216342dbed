//! What a plugin's [`Store`](wasmtime::Store) holds: its WASI context (no preopened
//! directory, no socket, no environment, no arguments, no stdin; stdout and stderr
//! captured), its limiter, and the context of the imports the host implements.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::{HasData, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::host::files::FileGrant;
use super::host::quota::{CallBudget, PluginMeter};
use super::limits::Limiter;
use super::output::Capture;
use super::PluginLimits;

/// The data of one plugin store.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
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
        }
    }
}

/// The [`HasData`] marker that hands the generated import bindings an [`ImportCtx`].
pub struct Imports;

impl HasData for Imports {
    type Data<'a> = &'a mut ImportCtx;
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
    /// TCP, UDP or name lookup off, no environment variable, no argument, stdin closed.
    pub fn new(
        plugin: Arc<str>,
        limits: &PluginLimits,
        files: Arc<FileGrant>,
        meter: Arc<PluginMeter>,
        io: Arc<Semaphore>,
    ) -> Self {
        let stdout = Capture::new(limits.max_stderr_bytes);
        let stderr = Capture::new(limits.max_stderr_bytes);
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        NewState {
            state: PluginState {
                wasi,
                table: super::limits::resource_table(limits),
                limiter: Limiter::new(limits),
                imports: ImportCtx {
                    plugin,
                    tool: String::new(),
                    files,
                    meter,
                    budget: CallBudget::default(),
                    memory_bytes: limits.memory_bytes,
                    io,
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
