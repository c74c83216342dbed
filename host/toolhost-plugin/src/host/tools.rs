//! `toolhost:plugin:registry` (0.3.0): a plugin lists and calls the tools of the registry
//! it is loaded into (a code tool running a model's program that calls them).
//!
//! Deny by default and bounded:
//! - a plugin calls a tool only when its manifest names it (`[grants] tools`) and the
//!   operator allows it (`--plugin-tools`,
//!   [`PluginHostConfigBuilder::plugin_tools`](crate::PluginHostConfigBuilder::plugin_tools));
//!   `definitions` lists only those;
//! - one call of the plugin makes at most its `max_tool_calls` (default and at most 64);
//!   the next is refused, naming the limit;
//! - each call goes through the registry's dispatch of the calling tool
//!   ([`Composer`](toolhost::registry::Composer)): every check of a direct call, under what
//!   is left of the calling tool's deadline, cancelled with it; a tool of a composing plugin
//!   (this one included) is never offered nor callable (no recursion);
//! - the result comes back as JSON text within the registry's result cap, and is copied
//!   into the plugin's memory under its memory limit.

use toolhost::registry::{ToolDefinition, ToolError};

use super::ImportCtx;

impl ImportCtx {
    /// `definitions` of the `registry` import: the tools this plugin may call, in the
    /// registry's order (none without a grant, or outside a tool call).
    pub(crate) async fn tool_definitions(&self) -> Vec<ToolDefinition> {
        let (Some(grant), Some(composer)) = (&self.tools, self.call.composer()) else {
            return Vec::new();
        };
        let mut definitions = composer.definitions().await;
        definitions.retain(|definition| grant.tools.allows(&definition.name));
        definitions
    }

    /// `call` of the `registry` import: tool `name` with `arguments`, as its result's
    /// JSON text.
    ///
    /// # Errors
    /// [`ToolError::Failed`] for a tool not granted or a call over `max_tool_calls`;
    /// otherwise what dispatch answers for the call.
    pub(crate) async fn call_tool(
        &mut self,
        name: String,
        arguments: String,
    ) -> Result<String, ToolError> {
        let refused = |message: String| ToolError::Failed {
            tool: name.clone(),
            message,
        };
        let Some(grant) = self.tools.clone() else {
            return Err(refused(format!(
                "tool {name} is not granted to plugin {}: its manifest must name it in `[grants] tools` and the operator must allow it (`--plugin-tools {name}`)",
                self.plugin
            )));
        };
        if self.tool_calls >= grant.max_tool_calls {
            return Err(refused(format!(
                "this call already made {} tool calls, the most plugin {}'s grant allows per call (`[grants] max_tool_calls` = {}); make fewer calls",
                self.tool_calls, self.plugin, grant.max_tool_calls
            )));
        }
        self.tool_calls += 1;
        if !grant.tools.allows(&name) {
            return Err(refused(format!(
                "tool {name} is not granted to plugin {}: its manifest must name it in `[grants] tools` and the operator must allow it (`--plugin-tools {name}`); it may call: {}",
                self.plugin, grant.tools
            )));
        }
        let Some(composer) = self.call.composer() else {
            return Err(refused(
                "tools can be called only while one of the plugin's tools runs (not while it loads or serves a resource or prompt)".into(),
            ));
        };
        // Within this call's own deadline (the plugin's time limit), not only the
        // dispatch's.
        let result = composer
            .call_until(&name, arguments, self.call.deadline())
            .await?;
        let text = if result.blocks.is_empty() {
            serde_json::to_string(&result.content)
        } else {
            serde_json::to_string(&result)
        };
        text.map_err(|err| refused(format!("its result could not be encoded as JSON: {err}")))
    }
}
