//! Calling the other tools of the registry the plugin is loaded into: a plugin that
//! composes them (a code tool running a model's program, a tool that greps and then
//! reads what it found).
//!
//! It is a grant of its own: the plugin's manifest names the tools it may call, and the
//! operator must allow them too:
//!
//! ```toml
//! # find_and_read.toml, next to find_and_read.wasm; the host runs with
//! # --plugin-tools grep --plugin-tools read_file (or --plugin-tools '*')
//! [grants]
//! tools = ["grep", "read_file"]   # or tools = "*"
//! max_tool_calls = 8              # calls per call of the plugin: 1 to 64, default 64
//! ```
//!
//! ```no_run
//! use toolhost_sdk::{registry, ToolError};
//!
//! /// The first file that mentions `word`, read whole.
//! fn find_and_read(word: &str) -> Result<String, ToolError> {
//!     let hits = registry::call_json("grep", &serde_json::json!({"pattern": word}))?;
//!     let Some(path) = hits["matches"][0]["path"].as_str() else {
//!         return Err(ToolError::failed(format!("no file mentions {word:?}")));
//!     };
//!     let file = registry::call_json("read_file", &serde_json::json!({"path": path}))?;
//!     Ok(file["content"].as_str().unwrap_or_default().to_owned())
//! }
//! ```
//!
//! Each call goes through the host's registry with every check of a direct call (the
//! tool's argument checks, the result cap, approval when the operator asks for it),
//! under what is left of the calling tool's time limit, and counts against
//! `max_tool_calls`: the call after the last allowed one fails, naming the limit. A tool
//! that is not granted fails the same way, saying so. The tools of a plugin that itself
//! holds this grant (this plugin's own included) are never offered nor callable: there
//! is no recursion.

use crate::bindings::toolhost::plugin::registry as wit;
use crate::bindings::toolhost::plugin::types::ToolError as WitError;
use crate::ToolError;

/// A tool this plugin may call, as the model would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Definition {
    /// Its name, to pass to [`call`].
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments, as JSON text.
    pub parameters: String,
    /// A short human-readable name, when it has one.
    pub title: Option<String>,
    /// JSON Schema of its structured result, as JSON text, when it declares one.
    pub output_schema: Option<String>,
}

/// The tools this plugin may call, in the registry's order: those its manifest and the
/// operator both name (empty without the grant).
pub fn definitions() -> Vec<Definition> {
    wit::definitions()
        .into_iter()
        .map(|definition| Definition {
            name: definition.name,
            description: definition.description,
            parameters: definition.parameters,
            title: definition.title,
            output_schema: definition.output_schema,
        })
        .collect()
}

/// Calls tool `name` with `arguments` (a JSON object as text) and returns its result as
/// JSON text: the structured result, or the result's JSON (a string result is a JSON
/// string).
///
/// # Errors
/// The tool's own error, the host's checks ([`ToolError::InvalidArguments`] for bad
/// arguments), or [`ToolError::Failed`] for a tool not granted, a call over
/// `max_tool_calls`, or a call past the calling tool's deadline.
pub fn call(name: &str, arguments: &str) -> Result<String, ToolError> {
    wit::call(name, arguments).map_err(|err| match err {
        WitError::InvalidArguments(message) => ToolError::InvalidArguments(message),
        WitError::Failed(message) => ToolError::Failed(message),
    })
}

/// [`call`] with `arguments` serialised to JSON, and the result parsed.
///
/// # Errors
/// As [`call`]; [`ToolError::Failed`] when the arguments do not serialise or the result
/// does not parse.
pub fn call_json(
    name: &str,
    arguments: &impl serde::Serialize,
) -> Result<serde_json::Value, ToolError> {
    let arguments = serde_json::to_string(arguments).map_err(|err| {
        ToolError::failed(format!("the arguments for {name} are not JSON: {err}"))
    })?;
    let text = call(name, &arguments)?;
    serde_json::from_str(&text)
        .map_err(|err| ToolError::failed(format!("the result of {name} is not JSON: {err}")))
}
