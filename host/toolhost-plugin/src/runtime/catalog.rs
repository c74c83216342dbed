//! The calls of a 0.3.0 plugin's `resources` and `prompts` exports: each in its own
//! instance (fresh, or an idle one in reuse mode) under the same slot, deadline, fuel
//! and memory limits as a tool call ([`PluginRuntime::call`]), its failures classified
//! the same way.

use toolhost::registry::{CallContext, Environment, ToolError};

use super::PluginRuntime;
use crate::v0_2::exports::toolhost::plugin::tools::{
    Environment as WitEnvironment, ToolError as GuestError,
};
use crate::v0_3::bindings::exports::toolhost::plugin::{prompts, resources};

/// The name a catalog call goes by in errors and logs (in place of a tool's).
pub(crate) const RESOURCES_LIST: &str = "resources/list";
/// See [`RESOURCES_LIST`].
pub(crate) const RESOURCES_READ: &str = "resources/read";
/// See [`RESOURCES_LIST`].
pub(crate) const RESOURCES_TEMPLATES: &str = "resources/templates";
/// See [`RESOURCES_LIST`].
pub(crate) const PROMPTS_LIST: &str = "prompts/list";
/// See [`RESOURCES_LIST`].
pub(crate) const PROMPTS_GET: &str = "prompts/get";

fn wit_env(env: &Environment) -> WitEnvironment {
    WitEnvironment {
        session_id: env.session_id.clone(),
        turn_id: env.turn_id.clone(),
    }
}

impl PluginRuntime {
    /// `resources.templates`, under the plugin's limits (at load).
    pub(crate) async fn resource_templates(
        &self,
    ) -> Result<Vec<resources::ResourceTemplate>, ToolError> {
        let mut running = self.start(RESOURCES_TEMPLATES, &CallContext::new()).await?;
        let outcome = tokio::time::timeout_at(running.deadline.into(), async {
            let (plugin, store) = running.plugin(&self.code).await?;
            plugin.resource_templates(store).await
        })
        .await;
        self.finish(running, outcome)
    }

    /// `resources.list` from `cursor`.
    pub(crate) async fn resource_list(
        &self,
        ctx: &CallContext,
        cursor: Option<&str>,
        env: &Environment,
    ) -> Result<Result<resources::ResourcePage, resources::ResourceError>, ToolError> {
        let env = wit_env(env);
        let mut running = self.start(RESOURCES_LIST, ctx).await?;
        let outcome = tokio::time::timeout_at(running.deadline.into(), async {
            let (plugin, store) = running.plugin(&self.code).await?;
            plugin.resource_list(store, cursor, &env).await
        })
        .await;
        self.finish(running, outcome)
    }

    /// `resources.read` of `uri`.
    pub(crate) async fn resource_read(
        &self,
        ctx: &CallContext,
        uri: &str,
        env: &Environment,
    ) -> Result<Result<Vec<resources::ResourceContents>, resources::ResourceError>, ToolError> {
        let env = wit_env(env);
        let mut running = self.start(RESOURCES_READ, ctx).await?;
        let outcome = tokio::time::timeout_at(running.deadline.into(), async {
            let (plugin, store) = running.plugin(&self.code).await?;
            plugin.resource_read(store, uri, &env).await
        })
        .await;
        self.finish(running, outcome)
    }

    /// `prompts.definitions`, under the plugin's limits (at load).
    pub(crate) async fn prompt_definitions(&self) -> Result<Vec<prompts::Prompt>, ToolError> {
        let mut running = self.start(PROMPTS_LIST, &CallContext::new()).await?;
        let outcome = tokio::time::timeout_at(running.deadline.into(), async {
            let (plugin, store) = running.plugin(&self.code).await?;
            plugin.prompt_definitions(store).await
        })
        .await;
        self.finish(running, outcome)
    }

    /// `prompts.get` of `name` with `arguments`.
    pub(crate) async fn prompt_get(
        &self,
        ctx: &CallContext,
        name: &str,
        arguments: &[(String, String)],
        env: &Environment,
    ) -> Result<Result<prompts::PromptResult, GuestError>, ToolError> {
        let env = wit_env(env);
        let mut running = self.start(PROMPTS_GET, ctx).await?;
        let outcome = tokio::time::timeout_at(running.deadline.into(), async {
            let (plugin, store) = running.plugin(&self.code).await?;
            plugin.prompt_get(store, name, arguments, &env).await
        })
        .await;
        self.finish(running, outcome)
    }
}

impl PluginRuntime {
    /// `error` with the plugin's secret values replaced (a catalog call's error reaches
    /// the client and the log, as a tool call's does).
    pub(crate) fn redacted(&self, error: ToolError) -> ToolError {
        if self.grants.redactor.is_empty() {
            error
        } else {
            crate::classify::redacted(error, &self.grants.redactor)
        }
    }

    /// `text` with the plugin's secret values replaced.
    pub(crate) fn redact_text(&self, text: String) -> String {
        if self.grants.redactor.is_empty() {
            text
        } else {
            self.grants.redactor.redact(&text).into_owned()
        }
    }
}
