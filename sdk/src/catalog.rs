//! Resources and prompts a plugin offers besides its tools (MCP `resources/*` and
//! `prompts/*`), exported with [`export_plugin!`](crate::export_plugin)'s `resources`
//! and `prompts` arguments.
//!
//! ```
//! use toolhost_sdk::catalog::{Prompt, PromptMessage, Resource, ResourceError, Resources, Role};
//! use toolhost_sdk::{export_plugin, ContentBlock, ResourceBody, Tool};
//!
//! fn resources() -> Resources {
//!     Resources::new()
//!         .resource(
//!             Resource::new("plugin://notes/readme", "readme").with_mime_type("text/plain"),
//!             ResourceBody::Text("Read me.".into()),
//!         )
//!         // Anything else under the namespace: read on demand.
//!         .read_with(|uri, _env| Err(ResourceError::NotFound(format!("no note at {uri}"))))
//! }
//!
//! fn prompts() -> Vec<Prompt> {
//!     vec![Prompt::new("summarize", "Summarize a note.", |arguments, _env| {
//!         let note = arguments.get("note").cloned().unwrap_or_default();
//!         Ok(vec![PromptMessage::user(ContentBlock::Text(format!("Summarize: {note}")))])
//!     })
//!     .argument("note", "The note's text.", true)]
//! }
//!
//! export_plugin!(Vec::<Tool>::new, resources = resources, prompts = prompts);
//! # fn main() {}
//! ```
//!
//! Every URI a plugin lists or reads must start with its namespace: `plugin://<name>/`
//! (the name of its component file), or the prefix its manifest names
//! (`[resources] namespace = "notes://"`); the host refuses anything else. A page holds
//! at most 1,000 resources (the host cuts the rest). Prompt names follow the tool name
//! rules and must not be taken by another plugin. A plugin with no resource and no
//! prompt offers none.

use std::collections::BTreeMap;

use crate::content::{ContentBlock, ResourceBody};
use crate::tool::{Env, ToolError};

/// Why a resource call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceError {
    /// No resource at that URI.
    #[error("{0}")]
    NotFound(String),
    /// The URI or cursor is not one this plugin understands.
    #[error("{0}")]
    Invalid(String),
    /// Reading failed.
    #[error("{0}")]
    Failed(String),
}

/// One resource, as `resources/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resource {
    /// Its URI, under the plugin's namespace.
    pub uri: String,
    /// Its name, for people.
    pub name: String,
    /// A display title.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
}

impl Resource {
    /// The resource at `uri`, called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        }
    }

    /// With a display title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With its MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// With its size in bytes.
    pub fn with_size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }
}

/// A family of resources: an RFC 6570 level 1 URI template such as
/// `plugin://weather/forecast/{city}`, read through [`Resources::read_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceTemplate {
    /// The URI template, under the plugin's namespace.
    pub uri_template: String,
    /// Its name, for people.
    pub name: String,
    /// A display title.
    pub title: Option<String>,
    /// What the resources are.
    pub description: Option<String>,
    /// Their MIME type, when known.
    pub mime_type: Option<String>,
}

impl ResourceTemplate {
    /// The template `uri_template`, called `name`.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With their MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A resource read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceContents {
    /// Its URI.
    pub uri: String,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
    /// Its content.
    pub body: ResourceBody,
}

impl ResourceContents {
    /// The content `body` of `uri`.
    pub fn new(uri: impl Into<String>, mime_type: Option<&str>, body: ResourceBody) -> Self {
        Self {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            body,
        }
    }
}

/// A page of resources and where the next one starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourcePage {
    /// The resources on this page (the host keeps at most 1,000).
    pub resources: Vec<Resource>,
    /// The cursor of the next page (at most 1 KiB); `None` on the last.
    pub next_cursor: Option<String>,
}

impl ResourcePage {
    /// A page of `resources`, followed by the page at `next_cursor`.
    pub fn new(resources: Vec<Resource>, next_cursor: Option<String>) -> Self {
        Self {
            resources,
            next_cursor,
        }
    }
}

type ListFn = Box<dyn Fn(Option<&str>, Env) -> Result<ResourcePage, ResourceError>>;
type ReadFn = Box<dyn Fn(&str, Env) -> Result<Vec<ResourceContents>, ResourceError>>;

/// The resources a plugin offers: fixed ones given whole, templates, and functions for
/// listing and reading the rest.
#[derive(Default)]
pub struct Resources {
    fixed: Vec<(Resource, ResourceBody)>,
    templates: Vec<ResourceTemplate>,
    list: Option<ListFn>,
    read: Option<ReadFn>,
}

impl std::fmt::Debug for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resources")
            .field("fixed", &self.fixed)
            .field("templates", &self.templates)
            .finish_non_exhaustive()
    }
}

impl Resources {
    /// None.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `resource`, whose content is `body`: listed (on the first page, unless
    /// [`Resources::list_with`] lists instead) and read.
    pub fn resource(mut self, resource: Resource, body: ResourceBody) -> Self {
        self.fixed.push((resource, body));
        self
    }

    /// With a template (its resources are read through [`Resources::read_with`]).
    pub fn template(mut self, template: ResourceTemplate) -> Self {
        self.templates.push(template);
        self
    }

    /// Lists resources with `list` (from a cursor; `None`: the first page) instead of
    /// the fixed ones.
    pub fn list_with(
        mut self,
        list: impl Fn(Option<&str>, Env) -> Result<ResourcePage, ResourceError> + 'static,
    ) -> Self {
        self.list = Some(Box::new(list));
        self
    }

    /// Reads a URI that is not one of the fixed resources with `read`.
    pub fn read_with(
        mut self,
        read: impl Fn(&str, Env) -> Result<Vec<ResourceContents>, ResourceError> + 'static,
    ) -> Self {
        self.read = Some(Box::new(read));
        self
    }

    /// The templates.
    pub fn templates(&self) -> &[ResourceTemplate] {
        &self.templates
    }

    /// A page of resources from `cursor`.
    ///
    /// # Errors
    /// What the list function returns.
    pub fn list(&self, cursor: Option<&str>, env: Env) -> Result<ResourcePage, ResourceError> {
        match &self.list {
            Some(list) => list(cursor, env),
            None => Ok(ResourcePage {
                resources: self.fixed.iter().map(|(r, _)| r.clone()).collect(),
                next_cursor: None,
            }),
        }
    }

    /// Reads `uri`.
    ///
    /// # Errors
    /// [`ResourceError::NotFound`] for a URI that is neither fixed nor read by the read
    /// function, or what the read function returns.
    pub fn read(&self, uri: &str, env: Env) -> Result<Vec<ResourceContents>, ResourceError> {
        if let Some((resource, body)) = self.fixed.iter().find(|(r, _)| r.uri == uri) {
            return Ok(vec![ResourceContents {
                uri: resource.uri.clone(),
                mime_type: resource.mime_type.clone(),
                body: body.clone(),
            }]);
        }
        match &self.read {
            Some(read) => read(uri, env),
            None => Err(ResourceError::NotFound(format!(
                "this plugin has no resource `{uri}`"
            ))),
        }
    }
}

/// Who says a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// One message of a filled-in prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: ContentBlock,
}

impl PromptMessage {
    /// A message the user says.
    pub fn user(content: ContentBlock) -> Self {
        Self {
            role: Role::User,
            content,
        }
    }

    /// A message the assistant says.
    pub fn assistant(content: ContentBlock) -> Self {
        Self {
            role: Role::Assistant,
            content,
        }
    }
}

/// One argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it is.
    pub description: Option<String>,
    /// Whether the prompt needs it (the host checks it is given).
    pub required: bool,
}

type PromptFn =
    Box<dyn Fn(&BTreeMap<String, String>, Env) -> Result<Vec<PromptMessage>, ToolError>>;

/// One prompt: a name, what it is for, its arguments, and the function that fills it in.
pub struct Prompt {
    name: String,
    title: Option<String>,
    description: String,
    arguments: Vec<PromptArgument>,
    handler: PromptFn,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("arguments", &self.arguments)
            .finish_non_exhaustive()
    }
}

impl Prompt {
    /// Prompt `name` (the tool name rules), for `description`, filled in by `handler`
    /// from its arguments by name.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(&BTreeMap<String, String>, Env) -> Result<Vec<PromptMessage>, ToolError>
            + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            arguments: Vec::new(),
            handler: Box::new(handler),
        }
    }

    /// With a display title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// With an argument.
    pub fn argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required,
        });
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its title, if set.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// What it is for.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its arguments.
    pub fn arguments(&self) -> &[PromptArgument] {
        &self.arguments
    }

    /// Fills it in with `arguments`.
    ///
    /// # Errors
    /// What the handler returns.
    pub fn get(
        &self,
        arguments: &BTreeMap<String, String>,
        env: Env,
    ) -> Result<Vec<PromptMessage>, ToolError> {
        (self.handler)(arguments, env)
    }
}
