//! The values that cross the registry: definitions offered to the model, calls it makes,
//! results it sees, and the per-call environment.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as offered to the model: its name, what it does, and its arguments' JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Unique name, 1 to 128 characters of `a-z A-Z 0-9 _ -`.
    pub name: String,
    /// What the tool does, written for the model.
    pub description: String,
    /// JSON Schema of the arguments; dispatch enforces its top-level `required` list.
    pub parameters: Value,
}

impl ToolDefinition {
    /// A definition from its three parts.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
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
}

impl ToolResult {
    /// A result holding `content`.
    pub fn new(content: impl Into<Value>) -> Self {
        Self {
            content: content.into(),
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
