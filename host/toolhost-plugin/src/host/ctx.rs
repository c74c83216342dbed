//! [`ImportCtx`]: what the host-implemented imports (`log`, `files`, `config`) of one
//! store work with, and the [`Imports`] marker that hands it to the generated bindings.

use std::sync::Arc;

use tokio::sync::Semaphore;
use toolhost::registry::CallContext;
use wasmtime::component::HasData;

use super::file_grant::FileGrant;
use super::quota::{CallBudget, PluginMeter};
use crate::plugin_config::{PluginConfig, Redactor};

/// The context of the host-implemented imports (`log`, `files`, `config`) of one store.
pub(crate) struct ImportCtx {
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
    /// [`Shared::io`](crate::runtime::Shared::io)).
    pub io: Arc<Semaphore>,
    /// The plugin's configuration values (the `config` import).
    pub config: Arc<PluginConfig>,
    /// Replaces the plugin's secret values in its log lines.
    pub redactor: Arc<Redactor>,
    /// The running call's context: where its `progress` reports go (nowhere while
    /// loading, or when the caller did not ask for progress).
    pub call: CallContext,
    /// Whether the plugin may ask the user (`interaction`): its manifest asked for it
    /// and the operator allowed it.
    pub ask_allowed: bool,
    /// Questions the current call has asked (`interaction`).
    pub questions: u32,
    /// How much the plugin may sample (`sampling`): its grant, when its manifest asked
    /// for it and the operator allowed it; `None` otherwise.
    pub sampling: Option<super::sampling_grant::SamplingGrant>,
    /// Sampling requests the current call has made.
    pub samples: u32,
    /// The tools the plugin may call (`registry`): what its manifest asked within what
    /// the operator allowed; `None` when its manifest asked for none.
    pub tools: Option<Arc<super::tools_grant::ToolsGrant>>,
    /// Calls the current call has made through `registry`.
    pub tool_calls: u32,
}

impl ImportCtx {
    /// Resets the per-call state for a call of `tool` made with `call`.
    pub(crate) fn begin_call(&mut self, tool: &str, call: CallContext) {
        tool.clone_into(&mut self.tool);
        self.budget = CallBudget::default();
        self.call = call;
        self.questions = 0;
        self.samples = 0;
        self.tool_calls = 0;
    }
}

#[cfg(test)]
impl ImportCtx {
    /// A context for tool `t` of plugin `p` with `files`, its own meter under `limits`,
    /// the default memory cap and `io` storage permits.
    pub(crate) fn for_test(
        files: FileGrant,
        limits: crate::limits::ImportLimits,
        io: usize,
    ) -> Self {
        let plugin: Arc<str> = Arc::from("p");
        Self {
            meter: Arc::new(PluginMeter::new(Arc::clone(&plugin), limits)),
            plugin,
            tool: "t".into(),
            files: Arc::new(files),
            budget: CallBudget::default(),
            memory_bytes: crate::limits::DEFAULT_MEMORY_BYTES,
            io: Arc::new(Semaphore::new(io)),
            config: Arc::default(),
            redactor: Arc::default(),
            call: CallContext::default(),
            ask_allowed: false,
            questions: 0,
            sampling: None,
            samples: 0,
            tools: None,
            tool_calls: 0,
        }
    }
}

/// The [`HasData`] marker that hands the generated import bindings an [`ImportCtx`].
pub(crate) struct Imports;

impl HasData for Imports {
    type Data<'a> = &'a mut ImportCtx;
}
