//! What a plugin's [`Store`](wasmtime::Store) holds: its WASI context (no preopened
//! directory, no socket, no environment, no arguments, no stdin; stdout and stderr
//! captured), its limiter, and the context of the imports the host implements.

use std::sync::Arc;

use wasmtime::component::{HasData, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::host::files::FileGrant;
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
    /// Log lines written during the current call.
    pub log_lines: u32,
}

impl ImportCtx {
    /// Resets the per-call state for a call of `tool`.
    pub fn begin_call(&mut self, tool: &str) {
        tool.clone_into(&mut self.tool);
        self.log_lines = 0;
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
    pub fn new(plugin: Arc<str>, limits: &PluginLimits, files: Arc<FileGrant>) -> Self {
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
                    log_lines: 0,
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
