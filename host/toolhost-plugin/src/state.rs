//! What a plugin's [`Store`](wasmtime::Store) holds: its WASI context (no preopened
//! directory, no socket, no arguments, no stdin, an environment of exactly its
//! configuration values; stdout and stderr captured), its `wasi:http` context and hooks,
//! its limiter, and the context of the imports the host implements.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::host::file_grant::FileGrant;
use super::host::http::{HttpGrant, HttpHooks};
use super::host::quota::{CallBudget, PluginMeter};
use super::host::ImportCtx;
use super::limits::Limiter;
use super::output::Capture;
use super::plugin_config::{PluginConfig, Redactor};
use super::PluginLimits;

/// The data of one plugin store.
pub(crate) struct PluginState {
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

/// What a plugin was granted besides files: its configuration and its HTTP grant.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
    /// The configuration values.
    pub config: Arc<PluginConfig>,
    /// The secrets of `config`, to redact.
    pub redactor: Arc<Redactor>,
    /// The HTTP grant.
    pub http: Arc<HttpGrant>,
    /// Whether the plugin may ask the user (`interaction`, 0.3.0): its manifest says
    /// `[grants] ask = true` and the operator allows it.
    pub ask: bool,
    /// How much the plugin may sample (`sampling`, 0.3.0): its manifest's
    /// `[grants] sampling`, when the operator allows sampling; `None` otherwise.
    pub sampling: Option<crate::manifest::SamplingGrant>,
    /// The tools the plugin may call (`registry`, 0.3.0): what its manifest's
    /// `[grants] tools` asks within what the operator allows (possibly none); `None`
    /// when the manifest asks for none. `Some` makes the plugin a composing one.
    pub tools: Option<Arc<crate::manifest::ToolsGrant>>,
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
    /// TCP, UDP or name lookup off, no argument, stdin closed; its environment variables
    /// are exactly the plugin's configuration values (`grants.config`). HTTP goes only
    /// through `wasi:http`, checked against `grants.http`.
    pub(crate) fn new(
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
                    Arc::clone(&plugin),
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
                    call: toolhost::registry::CallContext::default(),
                    ask_allowed: grants.ask,
                    questions: 0,
                    sampling: grants.sampling,
                    samples: 0,
                    tools: grants.tools.clone(),
                    tool_calls: 0,
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
