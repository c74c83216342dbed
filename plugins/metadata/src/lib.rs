//! `metadata`: declares its definitions through the raw bindings (0.3.0, world
//! `rich-plugin` as the SDK binds it, with no resources or prompts), with every
//! metadata field set on `weather` and none on `plain`, so the loader's mapping of
//! `title`, `annotations` and `output-schema` is tested end to end (the SDK's `Tool`
//! builders for them are separate).

use toolhost_sdk::bindings::exports::toolhost::plugin::tools::{
    Environment, Guest, ToolDefinition, ToolError,
};
use toolhost_sdk::bindings::toolhost::plugin::types::{ToolAnnotations, ToolResult};
use toolhost_sdk::__private::{
    no_prompt, no_resource, no_resources, PromptsGuest, ResourcesGuest, WitPrompt,
    WitPromptResult, WitResourceContents, WitResourceError, WitResourcePage,
    WitResourceTemplate,
};

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

    fn call(name: String, _arguments: String, _env: Environment) -> Result<ToolResult, ToolError> {
        // No blocks and the JSON as `structured`: the host answers exactly as for a 0.2.0
        // JSON result.
        let json = match name.as_str() {
            "weather" => r#"{"celsius":21.5}"#,
            _ => "\"plain\"",
        };
        Ok(ToolResult {
            content: Vec::new(),
            structured: Some(json.into()),
        })
    }
}

impl ResourcesGuest for Metadata {
    fn list(cursor: Option<String>, env: Environment) -> Result<WitResourcePage, WitResourceError> {
        no_resources(cursor, env)
    }

    fn templates() -> Vec<WitResourceTemplate> {
        Vec::new()
    }

    fn read(uri: String, _env: Environment) -> Result<Vec<WitResourceContents>, WitResourceError> {
        Err(no_resource(&uri))
    }
}

impl PromptsGuest for Metadata {
    fn definitions() -> Vec<WitPrompt> {
        Vec::new()
    }

    fn get(
        name: String,
        _arguments: Vec<(String, String)>,
        _env: Environment,
    ) -> Result<WitPromptResult, ToolError> {
        Err(no_prompt(&name))
    }
}

toolhost_sdk::bindings::__export_rich_plugin_world!(Metadata with_types_in toolhost_sdk::bindings);
