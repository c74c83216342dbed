//! `conformance`: the tools the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) calls by name, so
//! `scripts/conformance` can run it against `host serve --http` with a real plugin.
//!
//! Only the scenarios a tools-only host can pass have a tool here; image, audio and
//! resource content, sampling and elicitation have none (see
//! tests/conformance/expected-failures.yml for why).

use serde_json::{json, Value};
use toolhost_sdk::{export_plugin, log, Env, Tool, ToolError};

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

export_plugin!(|| vec![
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
]);
