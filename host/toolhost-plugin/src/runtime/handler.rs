//! The registry [`Handler`] each of a plugin's tools is registered with.

use std::sync::Arc;

use toolhost::registry::{Arguments, CallContext, Environment, Handler, HandlerFuture};

use super::PluginRuntime;

/// The registry handler of one plugin tool.
pub(crate) struct PluginTool {
    /// The plugin.
    pub runtime: Arc<PluginRuntime>,
    /// The tool's name.
    pub tool: Arc<str>,
}

impl Handler for PluginTool {
    fn call(&self, ctx: CallContext, arguments: Arguments, env: Environment) -> HandlerFuture {
        let runtime = Arc::clone(&self.runtime);
        let tool = Arc::clone(&self.tool);
        Box::pin(async move { runtime.call(&tool, &ctx, &arguments, &env).await })
    }

    /// A plugin whose manifest asks for `[grants] tools` composes (even when the
    /// operator allows it none): its tools are never offered to another composing tool.
    fn composes(&self) -> bool {
        self.runtime.composes()
    }

    /// What the manifest asks within what the operator allows.
    fn may_call(&self, name: &str) -> bool {
        self.runtime.may_call(name)
    }
}
