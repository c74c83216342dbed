//! `toolhost:plugin@0.1.0` (`wit/legacy/plugin-0.1.0.wit`), frozen: the host bindings
//! generated from it (in [`bindings`]), its imports served by the 0.2.0 implementations
//! (`host.rs`), and its exports converted to 0.2.0's types (here), so the rest of the
//! host sees one version.

use super::v0_2::exports::toolhost::plugin::tools::{
    Environment, ToolDefinition, ToolError as GuestError,
};

mod host;

/// The bindings generated from `toolhost:plugin@0.1.0`.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "toolhost:plugin/plugin@0.1.0",
        path: "../../wit/legacy/plugin-0.1.0.wit",
        exports: { default: async },
        imports: { "toolhost:plugin/files": async },
    });
}

use bindings::exports::toolhost::plugin::tools as old;
pub(crate) use bindings::{Plugin, PluginPre};

/// The `tools` export of `toolhost:plugin@0.1.0`: a component carrying it (and not
/// 0.2.0's) targets this world.
pub(crate) const TOOLS_EXPORT: &str = "toolhost:plugin/tools@0.1.0";

/// 0.1.0's tool definitions as 0.2.0's (which adds optional fields, left unset).
pub(crate) fn definitions(old: Vec<old::ToolDefinition>) -> Vec<ToolDefinition> {
    old.into_iter()
        .map(|d| ToolDefinition {
            name: d.name,
            description: d.description,
            parameters: d.parameters,
            title: None,
            annotations: None,
            output_schema: None,
        })
        .collect()
}

/// A call's environment as 0.1.0 takes it.
pub(crate) fn environment(env: &Environment) -> old::Environment {
    old::Environment {
        session_id: env.session_id.clone(),
        turn_id: env.turn_id.clone(),
    }
}

/// 0.1.0's tool error as 0.2.0's.
pub(crate) fn tool_error(error: old::ToolError) -> GuestError {
    match error {
        old::ToolError::InvalidArguments(m) => GuestError::InvalidArguments(m),
        old::ToolError::Failed(m) => GuestError::Failed(m),
    }
}
