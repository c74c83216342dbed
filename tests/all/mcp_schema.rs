//! Every message the MCP server sends, checked against the official `schema.json` of the
//! revision the session speaks: a scripted session per revision (legacy 2024-11-05 to
//! 2025-11-25 through `initialize`, modern 2026-07-28 through per-request `_meta`) that
//! touches every method and notification the server has, over the built-in file tools.
//!
//! The schema files are the MCP project's (`schema/<revision>/schema.json` of
//! modelcontextprotocol/modelcontextprotocol), vendored in `tests/mcp-schemas/`
//! (`$MCP_SCHEMA_DIR` overrides the directory, to try newer files).
//!
//! This file runs the sessions over the in-process stdio server; `mcp_schema_http.rs`
//! runs the same scripts over Streamable HTTP with this file's schemas and checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use toolhost::registry::{
    Arguments, CallContext, Environment, Handler, Registry, ToolDefinition, ToolResult,
};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{MemoryStorage, Storage};
use toolhost_mcp::{McpServer, Revision};

/// The directory of the schema documents: `<dir>/<revision>/schema.json`.
pub(crate) fn schema_dir() -> PathBuf {
    match std::env::var_os("MCP_SCHEMA_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-schemas"),
    }
}

/// One revision's schema document, with validators built on demand for its definitions.
pub(crate) struct Schema {
    revision: Revision,
    document: Value,
    defs: &'static str,
}

impl Schema {
    pub(crate) fn load(dir: &Path, revision: Revision) -> Self {
        let path = dir.join(revision.as_str()).join("schema.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let document: Value = serde_json::from_str(&text).unwrap();
        let defs = if document.get("$defs").is_some() {
            "$defs"
        } else {
            "definitions"
        };
        Self {
            revision,
            document,
            defs,
        }
    }

    pub(crate) fn has(&self, def: &str) -> bool {
        self.document[self.defs].get(def).is_some()
    }

    /// The errors of `instance` against the definition `def` (empty: valid).
    pub(crate) fn errors(&self, def: &str, instance: &Value) -> Vec<String> {
        assert!(self.has(def), "{} has no {def}", self.revision);
        let mut schema = self.document.clone();
        schema["$ref"] = json!(format!("#/{}/{def}", self.defs));
        let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
        validator
            .iter_errors(instance)
            .map(|err| format!("{err} at {}", err.instance_path()))
            .collect()
    }

    #[track_caller]
    pub(crate) fn check(&self, def: &str, instance: &Value) {
        let errors = self.errors(def, instance);
        assert!(
            errors.is_empty(),
            "{}: not a valid {def}: {errors:?}\n{instance:#}",
            self.revision
        );
    }
}

pub(crate) fn registry() -> Arc<Registry> {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    for i in 0..40 {
        storage
            .write(
                &format!("notes/n{i:02}.md"),
                b"alpha\nbeta\n",
                "text/markdown",
            )
            .unwrap();
    }
    let registry = Registry::new();
    register_vfs_tools(&registry, VfsToolOptions::new(storage)).unwrap();
    registry
        .register(
            ToolDefinition::new("chatty", "Logs a line.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tracing::warn!(target: "plugin", plugin = "chatty", "careful");
                Ok(ToolResult::new(json!({"said": 1})))
            },
        )
        .unwrap();
    Arc::new(registry)
}

pub(crate) fn extra_tool() -> (ToolDefinition, Arc<dyn Handler>) {
    let handler = |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
        Ok(ToolResult::new("x"))
    };
    (
        ToolDefinition::new("added", "Added later.", json!({"type": "object"})),
        Arc::new(handler),
    )
}

/// What the server sent, each with the method of the request it answers (if any).
pub(crate) struct Transcript {
    pub(crate) messages: Vec<(Option<String>, Value)>,
}

/// Runs `script` (lines to send, each with the method it calls, if a request) against a
/// server and returns what came back. `between` runs after the script is sent and
/// before the input closes (a change of the registry, say).
pub(crate) async fn session(
    registry: Arc<Registry>,
    script: Vec<(Option<&str>, Value)>,
    between: impl FnOnce(&Registry),
) -> Transcript {
    let server = McpServer::new(Arc::clone(&registry))
        .with_list_changed(true)
        .with_page_size(5);
    let (client, server_end) = tokio::io::duplex(1 << 22);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move { server.serve(server_read, server_write).await });
    let (read, mut write) = tokio::io::split(client);
    let mut methods = std::collections::HashMap::new();
    let mut lines = BufReader::new(read).lines();
    let mut messages = Vec::new();
    for (method, message) in script {
        if let (Some(method), Some(id)) = (method, message.get("id")) {
            methods.insert(id.to_string(), method.to_owned());
        }
        let mut line = message.to_string();
        if message == json!("garbage") {
            line = "{not json".into();
        }
        write.write_all(line.as_bytes()).await.unwrap();
        write.write_all(b"\n").await.unwrap();
        // One at a time, so the order of the transcript is the script's.
        if method.is_some() {
            loop {
                let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                    .await
                    .expect("an answer")
                    .unwrap()
                    .expect("a line");
                let value: Value = serde_json::from_str(&line).unwrap();
                let answered =
                    value.get("id").is_some() || value.get("error").is_some() || value.is_array();
                messages.push(value);
                if answered || method == Some("subscriptions/listen") {
                    break;
                }
            }
        }
    }
    between(&registry);
    tokio::time::sleep(Duration::from_millis(300)).await;
    write.shutdown().await.unwrap();
    drop(write);
    while let Ok(Some(line)) = lines.next_line().await {
        messages.push(serde_json::from_str(&line).unwrap());
    }
    serving.await.unwrap().unwrap();
    let messages = messages
        .into_iter()
        .map(|message| {
            let method = message
                .get("id")
                .and_then(|id| methods.get(&id.to_string()).cloned());
            (method, message)
        })
        .collect();
    Transcript { messages }
}

pub(crate) fn request(id: u64, method: &str, params: Value) -> (Option<&str>, Value) {
    (
        Some(method),
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
}

pub(crate) fn legacy_script(revision: Revision) -> Vec<(Option<&'static str>, Value)> {
    let version = revision.as_str();
    let mut script = vec![
        request(
            1,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "schema-test", "version": "1"}}),
        ),
        (
            None,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
        request(2, "ping", json!({})),
        request(3, "tools/list", json!({})),
        request(4, "logging/setLevel", json!({"level": "info"})),
        request(5, "tools/call", json!({"name": "chatty", "arguments": {}})),
        request(
            6,
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "notes/n01.md"}}),
        ),
        request(
            7,
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "missing.md"}}),
        ),
        request(
            8,
            "tools/call",
            json!({"name": "grep", "arguments": {"pattern": "beta"}, "_meta": {"progressToken": 77}}),
        ),
        request(9, "nope", json!({})),
        request(10, "tools/call", json!({"arguments": {}})),
        request(11, "tools/list", json!({"cursor": "not ours"})),
    ];
    if revision.accepts_batches() {
        script.push((
            Some("batch"),
            json!([
                {"jsonrpc": "2.0", "id": 20, "method": "ping"},
                {"jsonrpc": "2.0", "id": 21, "method": "tools/list"},
            ]),
        ));
    }
    script
}

pub(crate) fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "schema-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

pub(crate) fn modern_script() -> Vec<(Option<&'static str>, Value)> {
    let meta = modern_meta();
    let mut logging = meta.clone();
    logging["io.modelcontextprotocol/logLevel"] = json!("info");
    let mut progress = meta.clone();
    progress["progressToken"] = json!("p");
    let mut unknown = meta.clone();
    unknown["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    vec![
        request(1, "server/discover", json!({"_meta": meta})),
        request(2, "tools/list", json!({"_meta": meta})),
        request(
            3,
            "tools/call",
            json!({"name": "chatty", "arguments": {}, "_meta": logging}),
        ),
        request(
            4,
            "tools/call",
            json!({"name": "grep", "arguments": {"pattern": "beta"}, "_meta": progress}),
        ),
        request(
            5,
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "missing.md"}, "_meta": meta}),
        ),
        request(6, "server/discover", json!({"_meta": unknown})),
        request(7, "server/discover", json!({})),
        request(8, "ping", json!({"_meta": meta})),
        request(
            9,
            "subscriptions/listen",
            json!({"_meta": meta, "notifications": {"toolsListChanged": true}}),
        ),
        (Some("garbage"), json!("garbage")),
    ]
}

pub(crate) fn result_def(method: &str) -> &'static str {
    match method {
        "initialize" => "InitializeResult",
        "ping" | "logging/setLevel" => "EmptyResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "server/discover" => "DiscoverResult",
        "subscriptions/listen" => "SubscriptionsListenResult",
        other => panic!("no result type for {other}"),
    }
}

pub(crate) fn notification_def(method: &str) -> &'static str {
    match method {
        "notifications/progress" => "ProgressNotification",
        "notifications/message" => "LoggingMessageNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/subscriptions/acknowledged" => "SubscriptionsAcknowledgedNotification",
        other => panic!("unexpected notification {other}"),
    }
}

/// Checks every message of `transcript` against `schema`; returns how many of each
/// kind were checked (results, errors, notifications).
pub(crate) fn check_all(schema: &Schema, transcript: &Transcript) -> (usize, usize, usize) {
    let modern = schema.revision.is_modern();
    let (result_message, error_message) = if schema.has("JSONRPCResultResponse") {
        ("JSONRPCResultResponse", "JSONRPCErrorResponse")
    } else {
        ("JSONRPCResponse", "JSONRPCError")
    };
    let (mut results, mut errors, mut notes) = (0, 0, 0);
    for (method, message) in &transcript.messages {
        if let Some(batch) = message.as_array() {
            schema.check("JSONRPCBatchResponse", message);
            for member in batch {
                schema.check(result_message, member);
                results += 1;
            }
            continue;
        }
        if let Some(result) = message.get("result") {
            let method = method.as_deref().expect("an answered request");
            schema.check(result_message, message);
            schema.check(result_def(method), result);
            assert_eq!(
                result.get("resultType") == Some(&json!("complete")),
                modern,
                "{message}"
            );
            results += 1;
        } else if message.get("error").is_some() {
            let unreadable_id = message.get("id").is_none_or(Value::is_null);
            if unreadable_id && schema.revision.null_error_id() {
                // Up to 2025-06-18 the schema has an error's id required and never null:
                // no answer to an unreadable id fits it, and JSON-RPC 2.0's null is given.
                assert_eq!(message["id"], Value::Null, "{message}");
            } else {
                schema.check(error_message, message);
            }
            if message["error"]["code"] == -32022 {
                schema.check("UnsupportedProtocolVersionError", message);
            }
            errors += 1;
        } else {
            let method = message["method"].as_str().expect("a notification");
            schema.check("JSONRPCNotification", message);
            schema.check(notification_def(method), message);
            notes += 1;
        }
    }
    (results, errors, notes)
}

/// The script a session of `revision` runs: `initialize` first (legacy), or `_meta` on
/// every request (modern).
pub(crate) fn script(revision: Revision) -> Vec<(Option<&'static str>, Value)> {
    if revision.is_modern() {
        modern_script()
    } else {
        legacy_script(revision)
    }
}

/// Checks every message of `transcript` against `schema`, and that each kind of message
/// was there to be checked; gives the number of results and errors checked.
pub(crate) fn check_transcript(
    revision: Revision,
    schema: &Schema,
    transcript: &Transcript,
) -> (usize, usize) {
    let (results, errors, notes) = check_all(schema, transcript);
    let methods: Vec<&str> = transcript
        .messages
        .iter()
        .filter_map(|(_, m)| m.get("method").and_then(Value::as_str))
        .collect();
    for expected in [
        "notifications/progress",
        "notifications/message",
        "notifications/tools/list_changed",
    ] {
        assert!(
            methods.contains(&expected),
            "{revision}: no {expected} in {methods:?}"
        );
    }
    if revision.is_modern() {
        assert!(methods.contains(&"notifications/subscriptions/acknowledged"));
    }
    assert!(notes >= 3, "{revision}: {notes}");
    (results, errors)
}

#[tokio::test(flavor = "current_thread")]
async fn every_message_fits_the_schema_of_its_revision() {
    use tracing_subscriber::layer::SubscriberExt;
    let dir = schema_dir();
    // The log layer, so notifications/message are part of the transcripts. A current
    // thread runtime: every call runs on this thread, under this subscriber.
    let _default = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(toolhost_mcp::log_layer()),
    );
    for revision in Revision::ALL {
        let schema = Schema::load(&dir, revision);
        let transcript = session(registry(), script(revision), |registry| {
            registry.register_all(vec![extra_tool()]).unwrap();
        })
        .await;
        let checked = check_transcript(revision, &schema, &transcript);
        if revision.is_modern() {
            assert_eq!(checked, (6, 4), "{revision}");
        } else {
            let batch = if revision.accepts_batches() { 2 } else { 0 };
            assert_eq!(checked, (8 + batch, 3), "{revision}");
        }
    }
}

#[test]
fn the_check_can_fail() {
    let dir = schema_dir();
    let modern = Schema::load(&dir, Revision::V2026_07_28);
    // A modern list without its cache hints and result type is not a ListToolsResult.
    assert!(!modern
        .errors("ListToolsResult", &json!({"tools": []}))
        .is_empty());
    let legacy = Schema::load(&dir, Revision::V2024_11_05);
    assert!(legacy
        .errors("ListToolsResult", &json!({"tools": []}))
        .is_empty());
    assert!(!legacy
        .errors("CallToolResult", &json!({"content": [{"type": "text"}]}))
        .is_empty());
}

/// A 2025-11-25 client of tasks, one request at a time over stdio: every answer it gets
/// fits the schema's task types (`CreateTaskResult`, `GetTaskResult`, ...).
#[tokio::test]
async fn task_messages_fit_the_2025_11_25_schema() {
    use toolhost::registry::TaskSupport;
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("nap", "Nap.", json!({"type": "object"}))
                .with_task_support(TaskSupport::Optional),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(ToolResult::new("rested"))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("wait", "Wait until cancelled.", json!({"type": "object"}))
                .with_task_support(TaskSupport::Required),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                ctx.cancellation().cancelled().await;
                Ok(ToolResult::new("stopped"))
            },
        )
        .unwrap();
    let schema = Schema::load(&schema_dir(), Revision::V2025_11_25);
    let server = McpServer::new(Arc::new(registry));
    let (client, server_end) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move { server.serve(server_read, server_write).await });
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    // The status notifications that come between the answers.
    let told = std::cell::RefCell::new(Vec::<Value>::new());
    let mut ask = async |id: u64, method: &str, params: Value| -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .expect("an answer")
                .unwrap()
                .expect("a line");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                return message;
            }
            told.borrow_mut().push(message);
        }
    };
    let init = ask(1, "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})).await;
    schema.check("InitializeResult", &init["result"]);
    assert!(
        init["result"]["capabilities"]["tasks"].is_object(),
        "{init}"
    );
    let list = ask(2, "tools/list", json!({})).await;
    schema.check("ListToolsResult", &list["result"]);
    assert_eq!(
        list["result"]["tools"][1]["execution"],
        json!({"taskSupport": "required"})
    );
    let created = ask(
        3,
        "tools/call",
        json!({"name": "nap", "task": {"ttl": 60000}}),
    )
    .await;
    schema.check("CreateTaskResult", &created["result"]);
    let task = created["result"]["task"]["taskId"].clone();
    let got = ask(4, "tasks/get", json!({"taskId": task})).await;
    schema.check("GetTaskResult", &got["result"]);
    let result = ask(5, "tasks/result", json!({"taskId": task})).await;
    schema.check("GetTaskPayloadResult", &result["result"]);
    schema.check("CallToolResult", &result["result"]);
    let listed = ask(6, "tasks/list", json!({})).await;
    schema.check("ListTasksResult", &listed["result"]);
    let waiting = ask(7, "tools/call", json!({"name": "wait", "task": {}})).await;
    let cancelled = ask(
        8,
        "tasks/cancel",
        json!({"taskId": waiting["result"]["task"]["taskId"]}),
    )
    .await;
    schema.check("CancelTaskResult", &cancelled["result"]);
    assert_eq!(cancelled["result"]["status"], "cancelled");
    for answer in [&init, &list, &created, &got, &result, &listed, &cancelled] {
        schema.check("JSONRPCResultResponse", answer);
    }
    let unknown = ask(9, "tasks/get", json!({"taskId": "nope"})).await;
    schema.check("JSONRPCErrorResponse", &unknown);
    let plain = ask(10, "tools/call", json!({"name": "wait"})).await;
    schema.check("JSONRPCErrorResponse", &plain);
    assert_eq!(plain["error"]["code"], -32601);
    // One notifications/tasks/status per change: nap completed, wait cancelled.
    let told = told.take();
    let changes: Vec<(&Value, &Value)> = told
        .iter()
        .map(|note| (&note["params"]["taskId"], &note["params"]["status"]))
        .collect();
    assert_eq!(
        changes,
        [
            (&task, &json!("completed")),
            (&waiting["result"]["task"]["taskId"], &json!("cancelled"))
        ],
        "{told:?}"
    );
    for note in &told {
        schema.check("JSONRPCNotification", note);
        schema.check("TaskStatusNotification", note);
    }
    write.shutdown().await.unwrap();
    drop(lines);
    serving.await.unwrap().unwrap();
}
