//! Hooks for the fuzz targets (`fuzz/`, feature `fuzzing`): the host's checks of what a
//! plugin returns, callable without compiling a component per input. Not a stable API.
//!
//! Each hook runs exactly the code a real plugin's answer goes through: the same
//! validation of `definitions()` as [`PluginHost::load_file`](super::PluginHost::load_file)
//! and the same classification of a call's return value as a plugin tool's dispatch.

use std::path::Path;

use toolhost::registry::{ToolDefinition, ToolError, ToolResult};

use super::limits::DefinitionLimits;
use super::{PluginError, PluginLimits};
use crate::v0_2::exports::toolhost::plugin::tools::ToolDefinition as WitDefinition;
use crate::v0_2::toolhost::plugin::types::ToolError as GuestError;

/// One tool definition as a plugin's `definitions()` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDefinition {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `parameters`, JSON Schema text.
    pub parameters: String,
}

/// What a plugin's `call` returns: its result text, or its own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawResult {
    /// `ok(text)`: the result's JSON text.
    Ok(String),
    /// `err(invalid-arguments(message))`.
    InvalidArguments(String),
    /// `err(failed(message))`.
    Failed(String),
}

/// Checks `definitions` as the loader does for the plugin at `path`.
///
/// # Errors
/// The [`PluginError`] the loader would report.
pub fn check_definitions(
    path: &Path,
    definitions: Vec<RawDefinition>,
    caps: &DefinitionLimits,
) -> Result<Vec<ToolDefinition>, PluginError> {
    let raw = definitions
        .into_iter()
        .map(|d| WitDefinition {
            name: d.name,
            description: d.description,
            parameters: d.parameters,
            title: None,
            annotations: None,
            output_schema: None,
        })
        .collect();
    super::loader::validate(path, raw, caps)
}

/// Classifies a call's return value as a plugin tool's dispatch does.
///
/// # Errors
/// The [`ToolError`] the caller would get.
pub fn check_result(
    result: RawResult,
    tool: &str,
    limits: &PluginLimits,
) -> Result<ToolResult, ToolError> {
    let result = match result {
        RawResult::Ok(text) => Ok(crate::world::Answer::Json(text)),
        RawResult::InvalidArguments(message) => Err(GuestError::InvalidArguments(message)),
        RawResult::Failed(message) => Err(GuestError::Failed(message)),
    };
    super::classify::returned(result, tool, limits)
}
