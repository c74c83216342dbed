//! Registry values to and from MCP's shapes: tool definitions for `tools/list`, dispatch
//! outcomes for `tools/call`, and the `initialize` answer.

use serde_json::{json, Value};

use toolhost::registry::{ToolDefinition, ToolError, ToolResult};

use super::content::content_block_json_for;
use super::jsonrpc::{raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS};
use super::protocol::{capabilities, server_info};
use super::revision::Revision;

/// The protocol versions this server speaks, newest first: the modern 2026-07-28 and the
/// legacy ones `initialize` can settle on ([`Revision`]). Tools-only servers answer the
/// same in all of them, apart from the envelope.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// The version to answer an `initialize` that asked for `requested`: the same if it is
/// a legacy version served, else the newest legacy one (the client then decides whether
/// it can go on). `initialize` is the legacy era's handshake, so a client asking it for
/// 2026-07-28 gets 2025-11-25: a modern client sends no `initialize` at all.
pub(crate) fn negotiate_version(requested: Option<&str>) -> &'static str {
    requested
        .and_then(Revision::parse)
        .filter(|revision| !revision.is_modern())
        .unwrap_or(Revision::NEWEST_LEGACY)
        .as_str()
}

/// The `initialize` result for a client that asked for `requested`, from a server that
/// does not announce tool list changes.
#[cfg(test)]
pub(crate) fn initialize_result(requested: Option<&str>) -> Value {
    initialize_result_with(requested, false, false)
}

/// The `initialize` result; `list_changed` says whether the server sends
/// `notifications/tools/list_changed` (it does while it watches the plugins directory).
/// With `resources`, it declares the resources and completions capabilities.
pub(crate) fn initialize_result_with(
    requested: Option<&str>,
    list_changed: bool,
    resources: bool,
) -> Value {
    json!({
        "protocolVersion": negotiate_version(requested),
        "capabilities": capabilities(list_changed, resources),
        "serverInfo": server_info(),
    })
}

/// One `tools/list` entry. MCP requires `inputSchema` to be an object schema; a
/// definition whose parameters are not a JSON object is offered as taking any object.
///
/// The metadata goes along when the definition has it: `title`, `annotations` (the
/// behaviour hints, plus the title again as `annotations.title`, where clients of the
/// 2025-03-26 revision look for it) and `outputSchema`.
pub(crate) fn tool_json(definition: &ToolDefinition) -> Value {
    let input_schema = match &definition.parameters {
        Value::Object(_) => definition.parameters.clone(),
        _ => json!({ "type": "object" }),
    };
    let mut tool = json!({
        "name": definition.name,
        "description": definition.description,
        "inputSchema": input_schema,
    });
    if let Some(title) = &definition.title {
        tool["title"] = json!(title);
    }
    if !definition.annotations.is_empty() || definition.title.is_some() {
        let mut annotations = json!(definition.annotations);
        if let Some(title) = &definition.title {
            annotations["title"] = json!(title);
        }
        tool["annotations"] = annotations;
    }
    if let Some(schema) = &definition.output_schema {
        tool["outputSchema"] = schema.clone();
    }
    tool
}

/// One `tools/list` entry for a revision that lists `execution.taskSupport`
/// (2025-11-25): [`tool_json`] with it, when the tool may run as a task (left out for
/// `forbidden`, MCP's default when absent).
pub(crate) fn tool_json_with_execution(definition: &ToolDefinition) -> Value {
    let mut tool = tool_json(definition);
    if !definition.task_support.is_forbidden() {
        tool["execution"] = json!({ "taskSupport": definition.task_support.as_str() });
    }
    tool
}

/// The `tools/list` result.
#[cfg(test)]
pub(crate) fn tools_list_result(definitions: &[ToolDefinition]) -> Value {
    json!({ "tools": definitions.iter().map(tool_json).collect::<Vec<_>>() })
}

/// What a `tools/call` asks for: the tool name and the arguments as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallParams {
    /// The tool's name.
    pub name: String,
    /// The arguments as the JSON text the client sent; empty when absent or null (the
    /// registry reads it as `{}`).
    pub arguments: String,
    /// 2026-07-28: the client's answers to the questions of the server's last
    /// `input_required` result (`inputResponses`), and the `requestState` it carried.
    pub input: Option<Box<crate::elicit::RetryInput>>,
}

/// Reads `tools/call` params. Arguments of the wrong type are passed through as they
/// are, so the registry refuses them as a tool error the model can read and correct.
/// They are passed as the client's own text, not re-encoded, so no number in them is
/// rounded on the way.
///
/// # Errors
/// [`INVALID_PARAMS`] when `name` is missing or not a string: without it there is no
/// tool call to report an error for.
pub(crate) fn call_params(id: &RequestId, params: &Params) -> Result<CallParams, RpcError> {
    let Some(name) = params.str("name") else {
        let got = params.raw("name").map_or("nothing", raw_type_name);
        return Err(RpcError::new(
            id.clone(),
            INVALID_PARAMS,
            format!(
                "Invalid params: tools/call needs \"name\", the tool's name as a string; got {got}"
            ),
        ));
    };
    let arguments = match params.raw("arguments") {
        Some(raw) if raw_type_name(raw) != "null" => raw.get().to_owned(),
        _ => String::new(),
    };
    let input = crate::elicit::RetryInput::read(params);
    Ok(CallParams {
        name,
        arguments,
        input,
    })
}

/// The `tools/call` result for a dispatch outcome. A result's content is JSON-encoded
/// into one text block (a JSON string is given as its text); a [`ToolError`] becomes
/// `isError: true` with the model-facing message, never a protocol error.
///
/// A [structured](ToolResult::structured) result (the tool declares an output schema, and
/// dispatch checked the content against it) is given twice, as MCP asks: as the text
/// block, and as the object itself in `structuredContent`.
#[cfg(test)]
pub(crate) fn call_result(outcome: &Result<ToolResult, ToolError>) -> Value {
    call_result_for(outcome, Revision::NEWEST_LEGACY)
}

/// [`call_result`] for a client of `revision`: a block the revision has no type for is
/// given as text ([`content_block_json_for`]).
pub(crate) fn call_result_for(
    outcome: &Result<ToolResult, ToolError>,
    revision: Revision,
) -> Value {
    let content = match outcome {
        Ok(result) if !result.blocks.is_empty() => Value::Array(
            result
                .blocks
                .iter()
                .map(|block| content_block_json_for(block, revision))
                .collect(),
        ),
        Ok(result) => json!([{ "type": "text", "text": content_text(&result.content) }]),
        Err(err) => json!([{ "type": "text", "text": err.to_string() }]),
    };
    let mut result = json!({
        "content": content,
        "isError": outcome.is_err(),
    });
    if let Ok(ToolResult {
        content: content @ Value::Object(_),
        structured: true,
        ..
    }) = outcome
    {
        result["structuredContent"] = content.clone();
    }
    result
}

/// A result's content as the text the model reads.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::registry::{ContentBlock, ResourceBody};

    #[test]
    fn negotiates_the_clients_version_when_supported() {
        for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
            assert_eq!(negotiate_version(Some(version)), version);
        }
        assert_eq!(negotiate_version(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate_version(None), "2025-11-25");
        // initialize is the legacy handshake: never the modern revision.
        assert_eq!(negotiate_version(Some("2026-07-28")), "2025-11-25");
        assert_eq!(
            initialize_result(Some("2025-06-18")),
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": false}, "logging": {}},
                "serverInfo": {"name": "wasm-toolhost", "version": env!("CARGO_PKG_VERSION")},
            })
        );
        assert_eq!(
            initialize_result_with(None, true, false)["capabilities"]["tools"]["listChanged"],
            true
        );
        let listed: Vec<&str> = Revision::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(SUPPORTED_PROTOCOL_VERSIONS, listed);
    }

    #[test]
    fn tool_entries() {
        let schema = json!({"type":"object","properties":{"p":{"type":"string"}},"required":["p"]});
        assert_eq!(
            tools_list_result(&[
                ToolDefinition::new("a", "Does a.", schema.clone()),
                ToolDefinition::new("b", "Does b.", Value::Null),
            ]),
            json!({"tools": [
                {"name": "a", "description": "Does a.", "inputSchema": schema},
                {"name": "b", "description": "Does b.", "inputSchema": {"type": "object"}},
            ]})
        );
    }

    #[test]
    fn tool_entries_carry_title_hints_and_output_schema() {
        use toolhost::registry::ToolAnnotations;

        let output = json!({"type":"object","properties":{"n":{"type":"integer"}}});
        let full = ToolDefinition::new("count", "Counts.", json!({"type":"object"}))
            .with_title("Count things")
            .with_annotations(ToolAnnotations {
                read_only_hint: Some(true),
                open_world_hint: Some(false),
                ..ToolAnnotations::default()
            })
            .with_output_schema(output.clone());
        assert_eq!(
            tool_json(&full),
            json!({
                "name": "count",
                "title": "Count things",
                "description": "Counts.",
                "inputSchema": {"type": "object"},
                "annotations": {"title": "Count things", "readOnlyHint": true, "openWorldHint": false},
                "outputSchema": output,
            })
        );
        // Hints without a title; a title without hints.
        let hints = ToolDefinition::new("a", "", json!({"type":"object"}))
            .with_annotations(ToolAnnotations::read_only());
        assert_eq!(
            tool_json(&hints)["annotations"],
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
        );
        assert_eq!(tool_json(&hints).get("title"), None);
        let titled = ToolDefinition::new("a", "", json!({"type":"object"})).with_title("A");
        assert_eq!(tool_json(&titled)["annotations"], json!({"title": "A"}));
        assert_eq!(tool_json(&titled).get("outputSchema"), None);
    }

    #[test]
    fn structured_results_are_given_as_structured_content_too() {
        let structured = ToolResult {
            content: json!({"n": 1, "items": ["a"]}),
            structured: true,
            ..Default::default()
        };
        assert_eq!(
            call_result(&Ok(structured)),
            json!({
                "content": [{"type": "text", "text": "{\"items\":[\"a\"],\"n\":1}"}],
                "structuredContent": {"n": 1, "items": ["a"]},
                "isError": false,
            })
        );
        // Not marked structured by dispatch: text only, whatever the shape.
        assert_eq!(
            call_result(&Ok(ToolResult::new(json!({"n": 1})))).get("structuredContent"),
            None
        );
        // MCP's structuredContent is an object: a non-object is never given as one.
        let odd = ToolResult {
            content: json!([1]),
            structured: true,
            ..Default::default()
        };
        assert_eq!(call_result(&Ok(odd)).get("structuredContent"), None);
    }

    #[test]
    fn call_params_read_name_and_arguments() {
        let params = |text: &str| Params::parse(text).unwrap();
        let one = RequestId::from(1);
        assert_eq!(
            call_params(&one, &params(r#"{"name":"t","arguments":{"a":[1,"x"]}}"#)),
            Ok(CallParams {
                name: "t".into(),
                arguments: r#"{"a":[1,"x"]}"#.into(),
                input: None,
            })
        );
        // The arguments' own text: numbers beyond u64 and f64 are not rounded.
        assert_eq!(
            call_params(
                &one,
                &params(r#"{"name":"t","arguments":{"n": 18446744073709551617, "x":1e400}}"#)
            )
            .unwrap()
            .arguments,
            r#"{"n": 18446744073709551617, "x":1e400}"#
        );
        assert_eq!(
            call_params(&one, &params(r#"{"name":"t","arguments":null}"#)),
            Ok(CallParams {
                name: "t".into(),
                arguments: String::new(),
                input: None,
            })
        );
        assert_eq!(
            call_params(&one, &params(r#"{"name":"t","arguments":5}"#)),
            Ok(CallParams {
                name: "t".into(),
                arguments: "5".into(),
                input: None,
            })
        );
        assert_eq!(
            call_params(&RequestId::from(2), &params(r#"{"arguments":{}}"#)),
            Err(RpcError::new(
                RequestId::from(2),
                INVALID_PARAMS,
                "Invalid params: tools/call needs \"name\", the tool's name as a string; got nothing"
            ))
        );
        assert_eq!(
            call_params(&RequestId::from(2), &params(r#"{"name":3}"#))
                .unwrap_err()
                .message,
            "Invalid params: tools/call needs \"name\", the tool's name as a string; got number"
        );
    }

    #[test]
    fn call_results() {
        assert_eq!(
            call_result(&Ok(ToolResult::new("Hello, Ada!"))),
            json!({"content":[{"type":"text","text":"Hello, Ada!"}],"isError":false})
        );
        assert_eq!(
            call_result(&Ok(ToolResult::new(json!({"files":[],"n":1})))),
            json!({"content":[{"type":"text","text":"{\"files\":[],\"n\":1}"}],"isError":false})
        );
        assert_eq!(
            call_result(&Ok(ToolResult::default())),
            json!({"content":[{"type":"text","text":"null"}],"isError":false})
        );
        let err = ToolError::UnknownTool {
            name: "nope".into(),
        };
        assert_eq!(
            call_result(&Err(err.clone())),
            json!({"content":[{"type":"text","text": err.to_string()}],"isError":true})
        );
    }

    #[test]
    fn rich_results_give_their_blocks_binary_as_base64() {
        use toolhost::registry::{EmbeddedResource, Media, ResourceLink};
        let blocks = vec![
            ContentBlock::text("hi"),
            ContentBlock::Image(Media {
                data: b"png".to_vec(),
                mime_type: "image/png".into(),
            }),
            ContentBlock::Audio(Media {
                data: vec![0, 255],
                mime_type: "audio/wav".into(),
            }),
            ContentBlock::ResourceLink(ResourceLink {
                uri: "plugin://p/a".into(),
                name: "a".into(),
                mime_type: Some("text/plain".into()),
                description: None,
            }),
            ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://p/b".into(),
                mime_type: None,
                body: ResourceBody::Text("bee".into()),
            }),
            ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://p/c".into(),
                mime_type: Some("application/octet-stream".into()),
                body: ResourceBody::Blob(b"abc".to_vec()),
            }),
        ];
        let mut result = ToolResult::with_blocks(blocks, json!({"n": 1}));
        result.structured = true;
        assert_eq!(
            call_result(&Ok(result)),
            json!({
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image", "data": "cG5n", "mimeType": "image/png"},
                    {"type": "audio", "data": "AP8=", "mimeType": "audio/wav"},
                    {"type": "resource_link", "uri": "plugin://p/a", "name": "a", "mimeType": "text/plain"},
                    {"type": "resource", "resource": {"uri": "plugin://p/b", "text": "bee"}},
                    {"type": "resource", "resource": {"uri": "plugin://p/c", "mimeType": "application/octet-stream", "blob": "YWJj"}},
                ],
                "isError": false,
                "structuredContent": {"n": 1},
            })
        );
        // Blocks without structured JSON: no structuredContent.
        let plain = ToolResult::with_blocks(vec![ContentBlock::text("x")], Value::Null);
        assert_eq!(
            call_result(&Ok(plain)),
            json!({"content": [{"type": "text", "text": "x"}], "isError": false})
        );
    }
}
