//! `conformance`: the tools the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) calls by name, so
//! `scripts/conformance` can run it against `host serve --http` with a real plugin.
//!
//! Built against toolhost:plugin@0.3.0: besides the plain tools it has the rich-content
//! tools (`test_image_content`, `test_audio_content`, `test_embedded_resource`,
//! `test_multiple_content_types`), the elicitation tools (through the `interaction`
//! import: its manifest says `[grants] ask = true`, and the host must run with
//! `--plugin-ask`), the resources `test://static-text`, `test://static-binary` and the
//! template `test://template/{id}/data` (namespace `test://`, from its manifest), and
//! the prompts `test_simple_prompt`, `test_prompt_with_arguments`,
//! `test_prompt_with_embedded_resource` and `test_prompt_with_image`, each as the
//! suite's scenario describes it; and `test_sampling`, which asks the client's model
//! through the `sampling` import (its manifest grants `sampling`, and the host must run
//! with `--plugin-sampling`).

use serde_json::{json, Value};
use toolhost_sdk::catalog::{
    Prompt, PromptMessage, Resource, ResourceContents, ResourceError, ResourceTemplate, Resources,
};
use toolhost_sdk::sampling::{self, Message, Request, SamplingContent};
use toolhost_sdk::{
    export_plugin, interaction, log, Content, ContentBlock, Env, ResourceBody, Tool, ToolError,
};

/// A 1x1 red PNG.
const PIXEL_PNG: [u8; 69] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82];

/// A tiny valid WAV: 8 silent 16-bit mono samples at 8 kHz.
const SILENCE_WAV: [u8; 60] = [0x52, 0x49, 0x46, 0x46, 0x34, 0x00, 0x00, 0x00, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x40, 0x1f, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00];

/// Any arguments: the suite sends `{}` or none.
type NoArgs = serde_json::Map<String, Value>;

fn simple_text(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".to_owned())
}

fn error_handling(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    Err(ToolError::failed(
        "This tool intentionally returns an error for testing",
    ))
}

fn with_logging(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    log::info("Tool execution started");
    log::info("Tool processing data");
    log::info("Tool execution completed");
    Ok("Logged three messages at info level.".to_owned())
}

/// Three increasing progress reports (0, 50, 100 of 100), a little over the host's
/// 100 ms forwarding interval apart so that each one reaches the client.
fn with_progress(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    for (i, done) in [0u64, 50, 100].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(120));
        }
        log::progress(done, Some(100), Some(&format!("{done} of 100")));
    }
    Ok("Reported progress 0, 50 and 100 of 100.".to_owned())
}

fn reconnection(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    Ok("Reconnection test completed successfully".to_owned())
}

fn schema_2020_12(args: NoArgs, _env: Env) -> Result<Value, ToolError> {
    Ok(json!({ "received": args }))
}

fn image_content(_args: NoArgs, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new().image(PIXEL_PNG.to_vec(), "image/png"))
}

fn audio_content(_args: NoArgs, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new().audio(SILENCE_WAV.to_vec(), "audio/wav"))
}

fn embedded_resource(_args: NoArgs, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new().embedded_text(
        "test://embedded-resource",
        Some("text/plain"),
        "This is an embedded resource content.",
    ))
}

fn multiple_content_types(_args: NoArgs, _env: Env) -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("Multiple content types test:")
        .image(PIXEL_PNG.to_vec(), "image/png")
        .embedded_text(
            "test://mixed-content-resource",
            Some("application/json"),
            r#"{"test":"data","value":123}"#,
        ))
}

/// Asks the client's user with `schema`; the answer as the suite's text.
fn elicit(message: &str, schema: &Value, prefix: &str) -> Result<String, ToolError> {
    Ok(match interaction::ask(message, schema)? {
        Some(content) => format!("{prefix}action=accept, content={content}"),
        None => format!("{prefix}action=decline, content={{}}"),
    })
}

#[derive(serde::Deserialize)]
struct Elicitation {
    message: String,
}

fn elicitation(args: Elicitation, _env: Env) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    elicit(&args.message, &schema, "User response: ")
}

#[derive(serde::Deserialize)]
struct Sampling {
    prompt: String,
}

/// Asks the client's model to answer `prompt` (100 tokens at most, as the scenario
/// asks) and returns its answer as text.
fn sample(args: Sampling, _env: Env) -> Result<Content, ToolError> {
    let answer = sampling::create_message(Request::new(vec![Message::user(args.prompt)], 100))
        .map_err(|err| ToolError::failed(format!("sampling failed: {err}")))?;
    let text = match answer.content {
        SamplingContent::Text(text) => text,
        _ => "(not text)".to_owned(),
    };
    Ok(Content::new().text(format!("LLM response: {text}")))
}

fn elicitation_defaults(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }
    });
    elicit("Please review the defaults.", &schema, "Elicitation completed: ")
}

fn elicitation_enums(_args: NoArgs, _env: Env) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    });
    elicit("Please pick options.", &schema, "Elicitation completed: ")
}

fn resources() -> Resources {
    Resources::new()
        .resource(
            Resource::new("test://static-text", "static-text").with_mime_type("text/plain"),
            ResourceBody::Text("This is the content of the static text resource.".into()),
        )
        .resource(
            Resource::new("test://static-binary", "static-binary").with_mime_type("image/png"),
            ResourceBody::Blob(PIXEL_PNG.to_vec()),
        )
        .template(
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .with_mime_type("application/json"),
        )
        .read_with(|uri, _env| {
            let id = uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'));
            match id {
                Some(id) => Ok(vec![ResourceContents::new(
                    uri,
                    Some("application/json"),
                    ResourceBody::Text(
                        json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                            .to_string(),
                    ),
                )]),
                None => Err(ResourceError::NotFound(format!("no resource at {uri}"))),
            }
        })
}

fn text(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(text.into())
}

fn prompts() -> Vec<Prompt> {
    vec![
        Prompt::new("test_simple_prompt", "A simple prompt.", |_, _| {
            Ok(vec![PromptMessage::user(text("This is a simple prompt for testing."))])
        }),
        Prompt::new("test_prompt_with_arguments", "A prompt with arguments.", |args, _| {
            let arg = |name: &str| args.get(name).cloned().unwrap_or_default();
            Ok(vec![PromptMessage::user(text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            )))])
        })
        .argument("arg1", "First test argument", true)
        .argument("arg2", "Second test argument", true),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            "A prompt with an embedded resource.",
            |args, _| {
                let uri = args.get("resourceUri").cloned().unwrap_or_default();
                Ok(vec![
                    PromptMessage::user(ContentBlock::Resource {
                        uri,
                        mime_type: Some("text/plain".into()),
                        body: ResourceBody::Text("Embedded resource content for testing.".into()),
                    }),
                    PromptMessage::user(text("Please process the embedded resource above.")),
                ])
            },
        )
        .argument("resourceUri", "URI of the resource to embed", true),
        Prompt::new("test_prompt_with_image", "A prompt with an image.", |_, _| {
            Ok(vec![
                PromptMessage::user(ContentBlock::Image {
                    data: PIXEL_PNG.to_vec(),
                    mime_type: "image/png".into(),
                }),
                PromptMessage::user(text("Please analyze the image above.")),
            ])
        }),
    ]
}

fn tools() -> Vec<Tool> {
    vec![
    Tool::new(
        "test_simple_text",
        "Returns a fixed text (conformance scenario tools-call-simple-text).",
        json!({ "type": "object" }),
        simple_text,
    ),
    Tool::new(
        "test_error_handling",
        "Always fails (conformance scenario tools-call-error).",
        json!({ "type": "object" }),
        error_handling,
    ),
    Tool::new(
        "test_tool_with_logging",
        "Logs three lines at info level (conformance scenario tools-call-with-logging).",
        json!({ "type": "object" }),
        with_logging,
    ),
    Tool::new(
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100 (conformance scenario tools-call-with-progress).",
        json!({ "type": "object" }),
        with_progress,
    ),
    Tool::new(
        "test_reconnection",
        "Returns a fixed text (conformance scenario server-sse-polling).",
        json!({ "type": "object" }),
        reconnection,
    ),
    Tool::new(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features (conformance scenario json-schema-2020-12).",
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {
                        "street": { "type": "string" },
                        "city": { "type": "string" }
                    }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" }
            },
            "additionalProperties": false
        }),
        schema_2020_12,
    ),
    Tool::rich(
        "test_image_content",
        "Returns a PNG image (conformance scenario tools-call-image).",
        json!({ "type": "object" }),
        image_content,
    ),
    Tool::rich(
        "test_audio_content",
        "Returns a WAV sound (conformance scenario tools-call-audio).",
        json!({ "type": "object" }),
        audio_content,
    ),
    Tool::rich(
        "test_embedded_resource",
        "Returns an embedded resource (conformance scenario tools-call-embedded-resource).",
        json!({ "type": "object" }),
        embedded_resource,
    ),
    Tool::rich(
        "test_multiple_content_types",
        "Returns text, an image and a resource (conformance scenario tools-call-mixed-content).",
        json!({ "type": "object" }),
        multiple_content_types,
    ),
    Tool::rich(
        "test_sampling",
        "Asks the client's model to answer a prompt (conformance scenario tools-call-sampling).",
        json!({
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
            "required": ["prompt"]
        }),
        sample,
    ),
    Tool::new(
        "test_elicitation",
        "Asks the user for a name and an email (conformance scenario tools-call-elicitation).",
        json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The message to show the user"}},
            "required": ["message"]
        }),
        elicitation,
    ),
    Tool::new(
        "test_elicitation_sep1034_defaults",
        "Asks with default values (conformance scenario elicitation-sep1034-defaults).",
        json!({ "type": "object" }),
        elicitation_defaults,
    ),
    Tool::new(
        "test_elicitation_sep1330_enums",
        "Asks with every enum form (conformance scenario elicitation-sep1330-enums).",
        json!({ "type": "object" }),
        elicitation_enums,
    ),
    ]
}

export_plugin!(tools, resources = resources, prompts = prompts);
