//! What a host offers besides tools: prompts and resources (MCP `prompts/*` and
//! `resources/*`), from sources registered by their owner (a plugin, the host itself).
//!
//! A [`Catalog`] lives in every [`Registry`](crate::registry::Registry)
//! ([`Registry::catalog`](crate::registry::Registry::catalog)), so whoever serves the
//! registry's tools serves its prompts and resources too. Each owner has at most one
//! [`PromptSource`] and one [`ResourceSource`]; [`Catalog::replace`] swaps them in one
//! step (hot reload) and [`Catalog::remove`] takes them away. Two rules keep sources
//! apart: prompt names are unique across the catalog, and a resource source answers only
//! for URIs under its own namespace (`plugin://<owner>/` unless it is given another URI
//! prefix), which overlaps no other source's and is never `file://` (the host's files).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::registry::{CallContext, ContentBlock, Environment, ResourceBody, ToolError};

mod store;

pub use super::content::Role;
pub use store::{Catalog, CatalogError};

/// The future a source returns.
pub type SourceFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// One argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it is, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the prompt needs it.
    #[serde(default)]
    pub required: bool,
}

/// A prompt as `prompts/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDefinition {
    /// Its name, unique in the catalog (the tool name rules).
    pub name: String,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// One message of a filled-in prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: ContentBlock,
}

/// A prompt filled in (`prompts/get`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptResult {
    /// What this prompt is, filled in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages, in order.
    pub messages: Vec<PromptMessage>,
}

/// Prompts from one owner.
pub trait PromptSource: Send + Sync + 'static {
    /// The prompts it offers (read once when it is registered).
    fn definitions(&self) -> Vec<PromptDefinition>;

    /// Prompt `name` filled in with `arguments` (every required one is there: the catalog
    /// checked), within `ctx`'s deadline.
    fn get(
        &self,
        ctx: CallContext,
        name: String,
        arguments: BTreeMap<String, String>,
        env: Environment,
    ) -> SourceFuture<PromptResult, ToolError>;

    /// Values for argument `argument` of prompt `name` that start like `value`
    /// (`completion/complete`), given the arguments already filled in (`context`), within
    /// `ctx`'s deadline; the server sends at most 100 of them. The default completes
    /// nothing.
    fn complete(
        &self,
        ctx: CallContext,
        name: String,
        argument: String,
        value: String,
        context: BTreeMap<String, String>,
        env: Environment,
    ) -> SourceFuture<Vec<String>, ToolError> {
        let _ = (ctx, name, argument, value, context, env);
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// One resource as `resources/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceEntry {
    /// Its URI, under its source's namespace.
    pub uri: String,
    /// Its name, for people.
    pub name: String,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A page of a source's resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourcePage {
    /// The resources on this page.
    pub resources: Vec<ResourceEntry>,
    /// The source's cursor for the next page; `None` on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A family of resources (RFC 6570 level 1 URI template).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceTemplate {
    /// The URI template, under the source's namespace.
    pub uri_template: String,
    /// Its name, for people.
    pub name: String,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the resources are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Their MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A resource read whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceContents {
    /// Its URI.
    pub uri: String,
    /// Its MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its content.
    pub body: ResourceBody,
}

/// Why a resource call failed; the message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// No resource at that URI (MCP -32002).
    #[error("{0}")]
    NotFound(String),
    /// The URI or cursor is not acceptable (MCP -32602).
    #[error("{0}")]
    Invalid(String),
    /// Reading failed (the source's own failure, a time-out, a limit).
    #[error("{0}")]
    Failed(String),
}

/// Resources from one owner, all under its namespace.
pub trait ResourceSource: Send + Sync + 'static {
    /// Its resource templates (read once when it is registered).
    fn templates(&self) -> Vec<ResourceTemplate>;

    /// A page of its resources, from `cursor` (`None`: the first page).
    fn list(
        &self,
        ctx: CallContext,
        cursor: Option<String>,
        env: Environment,
    ) -> SourceFuture<ResourcePage, ResourceError>;

    /// Reads the resource at `uri` (under the source's namespace: the catalog checked).
    fn read(
        &self,
        ctx: CallContext,
        uri: String,
        env: Environment,
    ) -> SourceFuture<Vec<ResourceContents>, ResourceError>;
}

/// The default URI namespace of `owner`'s resources: `plugin://<owner>/`.
pub fn namespace_of(owner: &str) -> String {
    format!("plugin://{owner}/")
}

/// What one owner registered.
#[derive(Clone)]
struct Sources {
    owner: String,
    /// The URI prefix its resources live under.
    namespace: String,
    prompts: Option<(Arc<dyn PromptSource>, Vec<PromptDefinition>)>,
    resources: Option<(Arc<dyn ResourceSource>, Vec<ResourceTemplate>)>,
}

/// The catalog's contents behind its lock.
#[derive(Default)]
struct Entries {
    owners: Vec<Sources>,
}

type Shared = RwLock<Entries>;

#[cfg(test)]
mod tests;
