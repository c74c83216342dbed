//! `metadata`: declares its definitions through the raw 0.2.0 bindings, with every
//! metadata field set on `weather` and none on `plain`, so the loader's mapping of
//! `title`, `annotations` and `output-schema` is tested end to end (the SDK's `Tool`
//! builders for them are separate).

use toolhost_sdk::bindings::exports::toolhost::plugin::tools::{
    Environment, Guest, ToolDefinition, ToolError,
};
use toolhost_sdk::bindings::toolhost::plugin::types::ToolAnnotations;

struct Metadata;

const EMPTY: &str = r#"{"type":"object","properties":{}}"#;

impl Guest for Metadata {
    fn definitions() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition {
                name: "weather".into(),
                description: "Current weather.".into(),
                parameters: EMPTY.into(),
                title: Some("Get weather".into()),
                annotations: Some(ToolAnnotations {
                    read_only_hint: Some(true),
                    destructive_hint: None,
                    idempotent_hint: Some(true),
                    open_world_hint: Some(true),
                }),
                output_schema: Some(
                    r#"{"type":"object","properties":{"celsius":{"type":"number"}},"required":["celsius"]}"#
                        .into(),
                ),
            },
            ToolDefinition {
                name: "plain".into(),
                description: "No metadata.".into(),
                parameters: EMPTY.into(),
                title: None,
                annotations: None,
                output_schema: None,
            },
        ]
    }

    fn call(name: String, _arguments: String, _env: Environment) -> Result<String, ToolError> {
        match name.as_str() {
            "weather" => Ok(r#"{"celsius":21.5}"#.into()),
            _ => Ok("\"plain\"".into()),
        }
    }
}

toolhost_sdk::bindings::__export_plugin_world!(Metadata with_types_in toolhost_sdk::bindings);
