//! The values that cross the registry: definitions offered to the model, calls it makes,
//! results it sees, and the per-call environment.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ContentBlock;

/// A tool as offered to the model: its name, what it does, and its arguments' JSON Schema,
/// plus optional metadata for clients (a display title, behaviour hints, an output schema).
///
/// ```
/// use serde_json::json;
/// use toolhost::registry::{ToolAnnotations, ToolDefinition};
///
/// let definition = ToolDefinition::new("read_file", "Read a file.", json!({"type": "object"}))
///     .with_title("Read file")
///     .with_annotations(ToolAnnotations::read_only())
///     .with_output_schema(json!({"type": "object"}));
/// assert_eq!(definition.title.as_deref(), Some("Read file"));
/// assert_eq!(definition.annotations.read_only_hint, Some(true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Unique name, 1 to 128 characters of `a-z A-Z 0-9 _ -`.
    pub name: String,
    /// What the tool does, written for the model.
    pub description: String,
    /// JSON Schema of the arguments; dispatch enforces its top-level `required` list.
    pub parameters: Value,
    /// A short human-readable name for clients to display (MCP `title`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Hints about the tool's behaviour (MCP `annotations`). Hints, not guarantees: a
    /// client must not trust them from an untrusted tool.
    #[serde(default, skip_serializing_if = "ToolAnnotations::is_empty")]
    pub annotations: ToolAnnotations,
    /// JSON Schema of the result's content, when the tool declares one (MCP
    /// `outputSchema`; the result is then also given as `structuredContent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Whether a client may (or must) run the tool as a task: started at once and its
    /// result fetched later (MCP `execution.taskSupport`, 2025-11-25).
    /// [`TaskSupport::Forbidden`] by default, as MCP's default.
    #[serde(default, skip_serializing_if = "TaskSupport::is_forbidden")]
    pub task_support: TaskSupport,
    /// The longest a task of this tool runs, when it asks for less than the server's
    /// task time limit (a plugin manifest's `[limits] task_timeout_ms`); the server's
    /// limit applies when it is longer. `None`: the server's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_timeout: Option<std::time::Duration>,
    /// The tool's owner asks that every call be approved by the client's user before it
    /// runs (a plugin manifest's `confirm = true`): an MCP server that asks for approval
    /// asks about this tool whatever its own policy names. Not sent to clients.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_approval: bool,
    /// What the user is shown about the tool's owner when asked to approve a call (a
    /// plugin's declared grants). Not sent to clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_note: Option<String>,
}

impl ToolDefinition {
    /// A definition from its three parts, with no metadata.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            title: None,
            annotations: ToolAnnotations::default(),
            output_schema: None,
            task_support: TaskSupport::Forbidden,
            task_timeout: None,
            needs_approval: false,
            approval_note: None,
        }
    }

    /// This definition asking that every call be approved by the user first, showing
    /// `note` (what the owner was granted) in the question, when given.
    pub fn with_approval(mut self, required: bool, note: Option<String>) -> Self {
        self.needs_approval = required;
        self.approval_note = note;
        self
    }

    /// This definition with a display title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// This definition with behaviour hints.
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// This definition with an output schema.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// This definition with `support` for running as a task.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolhost::registry::{TaskSupport, ToolDefinition};
    ///
    /// let slow = ToolDefinition::new("index", "Index the tree.", json!({"type": "object"}))
    ///     .with_task_support(TaskSupport::Optional);
    /// assert_eq!(slow.task_support, TaskSupport::Optional);
    /// assert_eq!(TaskSupport::parse("required"), Some(TaskSupport::Required));
    /// ```
    pub fn with_task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// This definition asking its tasks to stop after `timeout` at most (the server's
    /// task time limit still applies when it is shorter).
    pub fn with_task_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.task_timeout = Some(timeout);
        self
    }
}

/// Whether a tool runs as a task (MCP `execution.taskSupport`): started at once, its
/// result fetched later, so a long call outlives the request that started it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Only as a plain call (MCP's default).
    #[default]
    Forbidden,
    /// As a plain call or as a task, as the client asks.
    Optional,
    /// Only as a task: a plain call is refused.
    Required,
}

impl TaskSupport {
    /// Every value, in the order MCP lists them.
    pub const ALL: [TaskSupport; 3] = [
        TaskSupport::Forbidden,
        TaskSupport::Optional,
        TaskSupport::Required,
    ];

    /// Its name on the wire (`"forbidden"`, `"optional"`, `"required"`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }

    /// The value named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|support| support.as_str() == name)
    }

    /// Whether it is [`TaskSupport::Forbidden`] (the default, left out when serialized).
    pub fn is_forbidden(&self) -> bool {
        *self == TaskSupport::Forbidden
    }
}

/// Hints about what a tool does, as MCP's tool annotations. `None` means "not said"
/// (clients then assume the MCP defaults: not read-only, destructive, not idempotent,
/// open world).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy or overwrite data (meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it twice with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches outside the host (the network, other systems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// A tool that only reads, within the host: read-only, idempotent, closed world.
    pub fn read_only() -> Self {
        Self {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
        }
    }

    /// Whether no hint is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A call the model made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for this call, echoed back with the result.
    pub id: String,
    /// The tool to run.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, empty for none.
    pub arguments: String,
}

impl ToolCall {
    /// A call of `name` with `arguments` (JSON text) and an empty id.
    pub fn new(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: String::new(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// What a tool returns; `content` is JSON-encoded for the model (`Value::Null` for none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The result the model sees.
    pub content: Value,
    /// Whether `content` is structured: the tool declares an output schema and `content`
    /// follows it (a JSON object). Set by [`Registry::dispatch`](super::Registry::dispatch),
    /// which overwrites what a handler put here; the MCP layer then also gives the content
    /// as `structuredContent`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub structured: bool,
    /// Rich content (images, audio, resources, several text blocks): when not empty, what
    /// the client gets as the result's content blocks, in order, instead of `content` as
    /// one text block; `content` then holds the structured JSON (with `structured`) or
    /// `Null`. Every byte counts against the result cap (binary data as base64).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ContentBlock>,
}

impl ToolResult {
    /// A result holding `content`.
    pub fn new(content: impl Into<Value>) -> Self {
        Self {
            content: content.into(),
            structured: false,
            blocks: Vec::new(),
        }
    }

    /// A rich result: `blocks` for the client, and `structured` JSON (`Null` for none).
    pub fn with_blocks(blocks: Vec<ContentBlock>, structured: Value) -> Self {
        Self {
            content: structured,
            structured: false,
            blocks,
        }
    }
}

/// What changes per call. Nothing else goes in here: a handler captures its storage, clock
/// and the like when it is registered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// The agent session, a UUID string.
    pub session_id: String,
    /// The model reply this call belongs to, a UUID string (one per reply).
    pub turn_id: String,
}

impl Environment {
    /// An environment with a fresh session id and turn id.
    pub fn generate() -> Self {
        Self {
            session_id: uuid::Uuid::new_v4().to_string(),
            turn_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// The same session with a fresh turn id (call once per model reply).
    pub fn next_turn(&self) -> Self {
        Self {
            session_id: self.session_id.clone(),
            turn_id: uuid::Uuid::new_v4().to_string(),
        }
    }
}
