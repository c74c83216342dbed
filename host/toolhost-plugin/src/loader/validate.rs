//! Checking the definitions a plugin declares: within [`DefinitionLimits`] (count, sizes,
//! schema depth), valid unique names, parameters and output schema JSON object schemas,
//! turned into registry [`ToolDefinition`]s.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use toolhost::registry::{check_name, ToolAnnotations, ToolDefinition};

use crate::limits::{DefinitionCap, DefinitionLimits};
use crate::{PluginError, PluginErrorKind};

/// The plugin's definitions as registry definitions, checked: within `caps` (count,
/// sizes, schema depth), valid unique names, parameters a JSON object schema, at least
/// one tool.
pub(crate) fn validate(
    path: &Path,
    raw: Vec<crate::v0_2::exports::toolhost::plugin::tools::ToolDefinition>,
    caps: &DefinitionLimits,
) -> Result<Vec<ToolDefinition>, PluginError> {
    if raw.is_empty() {
        return Err(PluginErrorKind::Definitions {
            message:
                "the plugin declares no tools; export at least one (export_plugin! in the SDK)"
                    .into(),
        }
        .at(path.to_owned()));
    }
    let over = |tool: Option<&str>, cap: DefinitionCap, actual: usize, limit: usize| {
        PluginErrorKind::DefinitionsTooLarge {
            tool: tool.map(str::to_owned),
            cap,
            actual: actual as u64,
            limit: limit as u64,
        }
        .at(path.to_owned())
    };
    if raw.len() > caps.max_tools {
        return Err(over(None, DefinitionCap::Tools, raw.len(), caps.max_tools));
    }
    // Sizes before parsing anything: a tool over its own cap is named first, then the
    // plugin's total.
    let mut total = 0_usize;
    for definition in &raw {
        let name = Some(definition.name.as_str());
        if definition.description.len() > caps.max_description_bytes {
            return Err(over(
                name,
                DefinitionCap::Description,
                definition.description.len(),
                caps.max_description_bytes,
            ));
        }
        if definition.parameters.len() > caps.max_schema_bytes {
            return Err(over(
                name,
                DefinitionCap::Schema,
                definition.parameters.len(),
                caps.max_schema_bytes,
            ));
        }
        let title = definition.title.as_deref().map_or(0, str::len);
        if title > caps.max_title_bytes {
            return Err(over(
                name,
                DefinitionCap::Title,
                title,
                caps.max_title_bytes,
            ));
        }
        let output = definition.output_schema.as_deref().map_or(0, str::len);
        if output > caps.max_schema_bytes {
            return Err(over(
                name,
                DefinitionCap::OutputSchema,
                output,
                caps.max_schema_bytes,
            ));
        }
        total = total
            .saturating_add(definition.name.len())
            .saturating_add(definition.description.len())
            .saturating_add(definition.parameters.len())
            .saturating_add(title)
            .saturating_add(output);
    }
    if total > caps.max_total_bytes {
        return Err(over(
            None,
            DefinitionCap::Total,
            total,
            caps.max_total_bytes,
        ));
    }
    let bad = |tool: &str, reason: String| {
        PluginErrorKind::BadDefinition {
            tool: tool.to_owned(),
            reason,
        }
        .at(path.to_owned())
    };
    let mut seen = HashSet::new();
    let mut definitions = Vec::with_capacity(raw.len());
    for definition in raw {
        let name = definition.name;
        check_name(&name).map_err(|err| bad(&name, err.to_string()))?;
        if !seen.insert(name.clone()) {
            return Err(PluginErrorKind::DuplicateTool {
                name,
                taken_by: "the plugin declares it twice".into(),
            }
            .at(path.to_owned()));
        }
        let parameters: Value = serde_json::from_str(&definition.parameters).map_err(|err| {
            bad(&name, format!("parameters are not valid JSON ({err}); give a JSON Schema object as text, e.g. {{\"type\":\"object\",\"properties\":{{}}}}"))
        })?;
        let depth = json_depth(&parameters);
        if depth > caps.max_schema_depth {
            return Err(over(
                Some(&name),
                DefinitionCap::SchemaDepth,
                depth,
                caps.max_schema_depth,
            ));
        }
        let Value::Object(schema) = &parameters else {
            return Err(bad(&name, "parameters must be a JSON Schema object such as {\"type\":\"object\",\"properties\":{}}".into()));
        };
        if let Some(kind) = schema
            .get("type")
            .filter(|kind| kind.as_str() != Some("object"))
        {
            return Err(bad(&name, format!("parameters have \"type\": {kind}; the arguments of a tool are an object, so use \"type\": \"object\"")));
        }
        let mut tool = ToolDefinition::new(name, definition.description, parameters);
        if let Some(title) = definition.title {
            if title.trim().is_empty() || title.contains(|c: char| c.is_control()) {
                return Err(bad(&tool.name, "its title is empty or holds control characters (a line break, a tab); give a short one-line name such as \"Get weather\", or none".into()));
            }
            tool = tool.with_title(title);
        }
        if let Some(hints) = definition.annotations {
            tool = tool.with_annotations(ToolAnnotations {
                read_only_hint: hints.read_only_hint,
                destructive_hint: hints.destructive_hint,
                idempotent_hint: hints.idempotent_hint,
                open_world_hint: hints.open_world_hint,
            });
        }
        if let Some(text) = definition.output_schema {
            let schema = output_schema(&text, caps).map_err(|err| match err {
                OutputSchemaError::TooDeep(depth) => over(
                    Some(&tool.name),
                    DefinitionCap::OutputSchemaDepth,
                    depth,
                    caps.max_schema_depth,
                ),
                OutputSchemaError::Invalid(reason) => bad(&tool.name, reason),
            })?;
            tool = tool.with_output_schema(schema);
        }
        definitions.push(tool);
    }
    Ok(definitions)
}

/// An output schema's text as JSON: an object schema (`"type": "object"`, as MCP
/// requires of `outputSchema`) within the depth cap.
///
/// # Errors
/// `Err(Ok(reason))` when it is not such a schema, `Err(Err((depth, cap)))` when it
/// nests too deep.
fn output_schema(text: &str, caps: &DefinitionLimits) -> Result<Value, OutputSchemaError> {
    let schema: Value = serde_json::from_str(text).map_err(|err| {
        OutputSchemaError::Invalid(format!("its output schema is not valid JSON ({err}); give a JSON Schema object as text, e.g. {{\"type\":\"object\",\"properties\":{{}}}}"))
    })?;
    let depth = json_depth(&schema);
    if depth > caps.max_schema_depth {
        return Err(OutputSchemaError::TooDeep(depth));
    }
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "object" => Ok(schema),
        _ => Err(OutputSchemaError::Invalid("its output schema must be a JSON Schema object with \"type\": \"object\" (MCP structured results are objects); return an object and describe it, or declare no output schema".into())),
    }
}

/// Why an output schema was refused.
enum OutputSchemaError {
    /// Not an object schema (the reason).
    Invalid(String),
    /// Nested this deep, over the cap.
    TooDeep(usize),
}

/// The nesting depth of `value`: 1 for a scalar or an empty container, one more per
/// level. serde_json refuses input nested past 128 levels, so the recursion is bounded.
fn json_depth(value: &Value) -> usize {
    let children = match value {
        Value::Array(items) => items.iter().map(json_depth).max(),
        Value::Object(map) => map.values().map(json_depth).max(),
        _ => return 1,
    };
    1 + children.unwrap_or(0)
}
