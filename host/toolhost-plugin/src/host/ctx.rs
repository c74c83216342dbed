//! [`ImportCtx`]: what the host-implemented imports (`log`, `files`) of one store work
//! with, and the [`Imports`] marker that hands it to the generated bindings.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::HasData;

use super::files::FileGrant;
use super::quota::{CallBudget, PluginMeter};

/// The context of the host-implemented imports (`log`, `files`) of one store.
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
}

impl ImportCtx {
    /// Resets the per-call state for a call of `tool`.
    pub(crate) fn begin_call(&mut self, tool: &str) {
        tool.clone_into(&mut self.tool);
        self.budget = CallBudget::default();
    }
}

#[cfg(test)]
impl ImportCtx {
    /// A context for tool `t` of plugin `p` with `files`, its own meter under `limits`,
    /// the default memory cap and `io` storage permits.
    pub(crate) fn for_test(files: FileGrant, limits: crate::ImportLimits, io: usize) -> Self {
        let plugin: Arc<str> = Arc::from("p");
        Self {
            meter: Arc::new(PluginMeter::new(Arc::clone(&plugin), limits)),
            plugin,
            tool: "t".into(),
            files: Arc::new(files),
            budget: CallBudget::default(),
            memory_bytes: crate::DEFAULT_MEMORY_BYTES,
            io: Arc::new(Semaphore::new(io)),
        }
    }
}

/// The [`HasData`] marker that hands the generated import bindings an [`ImportCtx`].
pub(crate) struct Imports;

impl HasData for Imports {
    type Data<'a> = &'a mut ImportCtx;
}
