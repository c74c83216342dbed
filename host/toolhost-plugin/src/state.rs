//! What a plugin's [`Store`](wasmtime::Store) holds: its WASI context (no preopened
//! directory, no socket, no environment, no arguments, no stdin; stdout and stderr
//! captured), its limiter, and the context of the imports the host implements.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::host::files::FileGrant;
use super::host::quota::{CallBudget, PluginMeter};
use super::host::ImportCtx;
use super::limits::Limiter;
use super::output::Capture;
use super::PluginLimits;

/// The data of one plugin store.
pub(crate) struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Memory, table and instance limits, with the record of a refused grow.
    pub limiter: Limiter,
    /// What the `log` and `files` imports work with.
    pub imports: ImportCtx,
}

/// A store's state with its captured stdout and stderr.
pub(crate) struct NewState {
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
    pub(crate) fn new(
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
