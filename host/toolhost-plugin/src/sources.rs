//! A 0.3.0 plugin's `resources` and `prompts` exports as catalog sources
//! ([`ResourceSource`], [`PromptSource`]), registered under the plugin's name in
//! [`Registry::catalog`](toolhost::registry::Registry::catalog) at load, replaced on hot
//! reload and removed on unload.
//!
//! # Sandbox
//! - Every call runs in its own instance under the plugin's limits, as a tool call.
//! - Every URI a plugin lists or reads must start with its namespace
//!   (`plugin://<name>/`, or the manifest's `[resources] namespace`); an answer naming
//!   any other URI (`file:///etc/passwd`, another plugin's) is refused whole, with an
//!   error naming the URI and the namespace. Templates are checked at load (by the
//!   catalog).
//! - A page holds at most [`MAX_RESOURCES_PER_PAGE`] resources (the rest is cut, the
//!   plugin's cursor kept); a cursor is at most [`MAX_CURSOR_BYTES`]; what a read returns
//!   counts against the plugin's output cap.

use std::collections::BTreeMap;
use std::sync::Arc;

use toolhost::catalog::{
    PromptArgument, PromptDefinition, PromptMessage, PromptResult, PromptSource, ResourceContents,
    ResourceEntry, ResourceError, ResourcePage, ResourceSource, ResourceTemplate, Role,
    SourceFuture,
};
use toolhost::registry::{format_bytes, CallContext, Environment, ToolError};

use crate::runtime::PluginRuntime;
use crate::v0_2::exports::toolhost::plugin::tools::ToolError as GuestError;
use crate::v0_3::bindings::exports::toolhost::plugin::{prompts, resources};
use crate::v0_3::result::{content_block, resource_body};

/// Most resources one page carries; a plugin's longer page is cut.
pub(crate) const MAX_RESOURCES_PER_PAGE: usize = 1000;
/// Longest cursor a plugin may hand out, in bytes.
pub(crate) const MAX_CURSOR_BYTES: usize = 1024;

/// A catalog call's failure as a resource error.
fn failed(error: ToolError) -> ResourceError {
    ResourceError::Failed(error.to_string())
}

/// A plugin's resources.
pub(crate) struct PluginResources {
    pub runtime: Arc<PluginRuntime>,
    pub namespace: String,
    pub templates: Vec<ResourceTemplate>,
}

impl PluginResources {
    /// Refuses `uri` unless it is under the namespace.
    fn check_uri(&self, uri: &str, what: &str) -> Result<(), ResourceError> {
        if uri.starts_with(&self.namespace) {
            return Ok(());
        }
        Err(ResourceError::Failed(format!(
            "plugin {} {what} `{}`, outside its namespace {}; the host refuses it (a fault in the plugin)",
            self.runtime.name,
            uri.escape_debug(),
            self.namespace
        )))
    }

    /// A plugin's resource error, its messages redacted.
    fn guest_error(&self, error: resources::ResourceError) -> ResourceError {
        let clean = |m: String| self.runtime.redact_text(m);
        match error {
            resources::ResourceError::NotFound(m) => ResourceError::NotFound(clean(m)),
            resources::ResourceError::Invalid(m) => ResourceError::Invalid(clean(m)),
            resources::ResourceError::Failed(m) => ResourceError::Failed(clean(m)),
        }
    }

    async fn list(
        &self,
        ctx: CallContext,
        cursor: Option<String>,
        env: Environment,
    ) -> Result<ResourcePage, ResourceError> {
        let page = self
            .runtime
            .resource_list(&ctx, cursor.as_deref(), &env)
            .await
            .map_err(|e| failed(self.runtime.redacted(e)))?
            .map_err(|e| self.guest_error(e))?;
        if let Some(cursor) = &page.next_cursor {
            if cursor.len() > MAX_CURSOR_BYTES {
                return Err(ResourceError::Failed(format!(
                    "plugin {} handed out a cursor of {} bytes, over the limit of {MAX_CURSOR_BYTES} (a fault in the plugin)",
                    self.runtime.name,
                    cursor.len()
                )));
            }
        }
        let mut entries = page.resources;
        entries.truncate(MAX_RESOURCES_PER_PAGE);
        for entry in &entries {
            self.check_uri(&entry.uri, "listed")?;
        }
        Ok(ResourcePage {
            resources: entries
                .into_iter()
                .map(|r| ResourceEntry {
                    uri: r.uri,
                    name: r.name,
                    title: r.title,
                    description: r.description,
                    mime_type: r.mime_type,
                    size: r.size,
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }

    async fn read(
        &self,
        ctx: CallContext,
        uri: String,
        env: Environment,
    ) -> Result<Vec<ResourceContents>, ResourceError> {
        self.check_uri(&uri, "was asked for")?;
        let contents = self
            .runtime
            .resource_read(&ctx, &uri, &env)
            .await
            .map_err(|e| failed(self.runtime.redacted(e)))?
            .map_err(|e| self.guest_error(e))?;
        let cap = self.runtime.limits.max_output_bytes;
        let mut size = 0usize;
        for content in &contents {
            self.check_uri(&content.uri, "answered with")?;
            size = size
                .saturating_add(content.uri.len())
                .saturating_add(match &content.body {
                    resources::ResourceBody::Text(text) => text.len(),
                    resources::ResourceBody::Blob(bytes) => bytes.len(),
                });
        }
        if size > cap {
            return Err(ResourceError::Failed(format!(
                "plugin {} returned {} for `{}`, over its output limit of {}",
                self.runtime.name,
                format_bytes(size as u64),
                uri.escape_debug(),
                format_bytes(cap as u64)
            )));
        }
        Ok(contents
            .into_iter()
            .map(|c| ResourceContents {
                uri: c.uri,
                mime_type: c.mime_type,
                body: resource_body(c.body),
            })
            .collect())
    }
}

impl ResourceSource for PluginResources {
    fn templates(&self) -> Vec<ResourceTemplate> {
        self.templates.clone()
    }

    fn list(
        &self,
        ctx: CallContext,
        cursor: Option<String>,
        env: Environment,
    ) -> SourceFuture<ResourcePage, ResourceError> {
        let this = PluginResources {
            runtime: Arc::clone(&self.runtime),
            namespace: self.namespace.clone(),
            templates: Vec::new(),
        };
        Box::pin(async move { this.list(ctx, cursor, env).await })
    }

    fn read(
        &self,
        ctx: CallContext,
        uri: String,
        env: Environment,
    ) -> SourceFuture<Vec<ResourceContents>, ResourceError> {
        let this = PluginResources {
            runtime: Arc::clone(&self.runtime),
            namespace: self.namespace.clone(),
            templates: Vec::new(),
        };
        Box::pin(async move { this.read(ctx, uri, env).await })
    }
}

/// A template as the catalog's.
pub(crate) fn template(t: resources::ResourceTemplate) -> ResourceTemplate {
    ResourceTemplate {
        uri_template: t.uri_template,
        name: t.name,
        title: t.title,
        description: t.description,
        mime_type: t.mime_type,
    }
}

/// A prompt definition as the catalog's.
pub(crate) fn prompt_definition(p: prompts::Prompt) -> PromptDefinition {
    PromptDefinition {
        name: p.name,
        title: p.title,
        description: p.description,
        arguments: p
            .arguments
            .into_iter()
            .map(|a| PromptArgument {
                name: a.name,
                description: a.description,
                required: a.required,
            })
            .collect(),
    }
}

/// A plugin's prompts.
pub(crate) struct PluginPrompts {
    pub runtime: Arc<PluginRuntime>,
    /// The plugin's tool namespace: its prompts are offered as `NAMESPACE_name` and
    /// reach the guest as `name`.
    pub namespace: Option<String>,
    pub definitions: Vec<PromptDefinition>,
}

impl PromptSource for PluginPrompts {
    fn definitions(&self) -> Vec<PromptDefinition> {
        self.definitions.clone()
    }

    fn get(
        &self,
        ctx: CallContext,
        name: String,
        arguments: BTreeMap<String, String>,
        env: Environment,
    ) -> SourceFuture<PromptResult, ToolError> {
        let runtime = Arc::clone(&self.runtime);
        // The catalog routes only this plugin's (namespaced) names here.
        let guest_name = match &self.namespace {
            Some(namespace) => name
                .strip_prefix(namespace.as_str())
                .and_then(|rest| rest.strip_prefix(crate::namespace::NAMESPACE_SEPARATOR))
                .map_or_else(|| name.clone(), str::to_owned),
            None => name.clone(),
        };
        Box::pin(async move {
            let arguments: Vec<(String, String)> = arguments.into_iter().collect();
            let result = runtime
                .prompt_get(&ctx, &guest_name, &arguments, &env)
                .await
                .map_err(|e| runtime.redacted(e))?;
            let result = match result {
                Ok(result) => result,
                Err(GuestError::InvalidArguments(message)) => {
                    return Err(runtime.redacted(ToolError::InvalidArguments {
                        tool: name,
                        message,
                    }))
                }
                Err(GuestError::Failed(message)) => {
                    return Err(runtime.redacted(ToolError::Failed {
                        tool: name,
                        message,
                    }))
                }
            };
            let size: usize = result
                .messages
                .iter()
                .map(|m| prompt_block_len(&m.content))
                .fold(0, usize::saturating_add);
            let cap = runtime.limits.max_output_bytes;
            if size > cap {
                return Err(ToolError::LimitExceeded {
                    tool: name,
                    limit: toolhost::registry::Limit::Output { bytes: cap as u64 },
                    message: format!(
                        "the plugin returned {} of prompt, over its limit of {}",
                        format_bytes(size as u64),
                        format_bytes(cap as u64)
                    ),
                });
            }
            let messages = result
                .messages
                .into_iter()
                .map(|m| {
                    Ok(PromptMessage {
                        role: match m.role {
                            prompts::Role::User => Role::User,
                            prompts::Role::Assistant => Role::Assistant,
                        },
                        content: content_block(m.content, &name)?,
                    })
                })
                .collect::<Result<Vec<_>, ToolError>>()?;
            Ok(PromptResult {
                description: result.description,
                messages,
            })
        })
    }
}

/// The bytes a prompt message carries, for the output cap.
fn prompt_block_len(block: &crate::v0_3::bindings::toolhost::plugin::types::ContentBlock) -> usize {
    use crate::v0_3::bindings::toolhost::plugin::types::{ContentBlock as B, ResourceBody};
    match block {
        B::Text(text) => text.len(),
        B::Image(m) | B::Audio(m) => m.data.len() + m.mime_type.len(),
        B::ResourceLink(link) => link.uri.len() + link.name.len(),
        B::Resource(r) => {
            r.uri.len()
                + match &r.body {
                    ResourceBody::Text(t) => t.len(),
                    ResourceBody::Blob(b) => b.len(),
                }
        }
    }
}
