//! The messages of elicitation and approval, checked against the official schemas: the
//! `elicitation/create` request (2025-06-18, 2025-11-25) and the `input_required` result
//! (2026-07-28) the server sends before a call the approval policy names runs.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use toolhost::registry::{
    Arguments, CallContext, Environment, Registry, ToolDefinition, ToolResult,
};
use toolhost_mcp::{ApprovalPolicy, McpServer, Revision};

use crate::mcp_schema::{schema_dir, Schema};

fn registry() -> Arc<Registry> {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("erase", "Erase.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("erased"))
            },
        )
        .unwrap();
    Arc::new(registry)
}

/// Sends each line of `script`, answering the server's questions with `answer`, and
/// gives every message the server sent.
async fn session(script: Vec<Value>, answer: Value) -> Vec<Value> {
    let server =
        McpServer::new(registry()).with_approval(ApprovalPolicy::new().confirm_destructive());
    let (client, server_end) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move { server.serve(server_read, server_write).await });
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let mut messages = Vec::new();
    for message in script {
        write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .expect("an answer")
                .unwrap()
                .expect("a line");
            let value: Value = serde_json::from_str(&line).unwrap();
            messages.push(value.clone());
            if value["method"] == "elicitation/create" {
                let reply = json!({"jsonrpc": "2.0", "id": value["id"], "result": answer});
                write
                    .write_all(format!("{reply}\n").as_bytes())
                    .await
                    .unwrap();
                continue;
            }
            if value["id"] == message["id"] {
                break;
            }
        }
    }
    write.shutdown().await.unwrap();
    drop(write);
    serving.await.unwrap().unwrap();
    messages
}

fn call(id: u64, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "erase", "arguments": {"path": "/"}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[tokio::test]
async fn elicitation_requests_and_input_required_results_fit_the_schemas() {
    let dir = schema_dir();
    for revision in [Revision::V2025_06_18, Revision::V2025_11_25] {
        let schema = Schema::load(&dir, revision);
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": revision.as_str(), "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"}}});
        let messages = session(vec![initialize, call(1, None)], json!({"action": "accept"})).await;
        let asked: Vec<&Value> = messages
            .iter()
            .filter(|message| message["method"] == "elicitation/create")
            .collect();
        assert_eq!(asked.len(), 1, "{revision}: {messages:?}");
        schema.check("JSONRPCRequest", asked[0]);
        schema.check("ElicitRequest", asked[0]);
        let result = messages.last().unwrap();
        schema.check("CallToolResult", &result["result"]);
        assert_eq!(
            result["result"]["content"][0]["text"], "erased",
            "{revision}"
        );
    }
    let revision = Revision::V2026_07_28;
    let schema = Schema::load(&dir, revision);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let messages = session(vec![call(1, Some(meta))], json!({})).await;
    let first = &messages[0];
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    schema.check("CallToolResultResponse", first);
    schema.check("InputRequiredResult", &first["result"]);
    schema.check("ElicitRequest", &first["result"]["inputRequests"]["q0"]);
}
