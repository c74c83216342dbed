//! The protocol matrix: every feature the MCP server has, on every revision it speaks,
//! over both transports (stdio through `McpServer::serve` on in-memory pipes, Streamable
//! HTTP through the real `HttpServer` on 127.0.0.1:0), each cell asserting what
//! docs/protocol.md promises there (served, refused with its error, or downgraded), and
//! every message the server sent in that cell checked against the revision's official
//! schema. The table in docs/protocol.md ("Matrix: revision × feature × transport") is
//! this file's `expected`.
//!
//! One fresh server per cell, over a Rust-native registry (handlers, a prompt source, a
//! resource source, a memory root): no wasm.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use toolhost::registry::{
    Arguments, CallContext, ContentBlock, EmbeddedResource, Environment, Media, Registry,
    ResourceBody, ResourceLink, TaskSupport, ToolDefinition, ToolResult,
};
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, Storage};
use toolhost_mcp::http::{HttpConfig, HttpServer, Registries, SessionKey};
use toolhost_mcp::{ApprovalPolicy, FileResources, McpServer, Revision};

use crate::mcp_schema::{extra_tool, schema_dir, Schema};
use crate::mcp_schema_catalog::{Docs, Prompts};
use crate::mcp_schema_http::{get, post};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

/// The registry every cell serves: a tool per feature, the catalog's prompt and
/// resource sources (namespace `plugin://docs/`).
fn registry() -> Arc<Registry> {
    let registry = Registry::new();
    let tool = |name: &str| ToolDefinition::new(name, name, json!({"type": "object"}));
    registry
        .register(
            tool("echo"),
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::new("hi")) },
        )
        .unwrap();
    registry
        .register(
            tool("rich"),
            |_c: CallContext, _a: Arguments, _e: Environment| async {
                let media = |mime: &str| Media {
                    data: vec![1, 2, 3],
                    mime_type: mime.into(),
                };
                Ok(ToolResult::with_blocks(
                    vec![
                        ContentBlock::Image(media("image/png")),
                        ContentBlock::Audio(media("audio/wav")),
                        ContentBlock::ResourceLink(ResourceLink {
                            uri: "plugin://docs/a".into(),
                            name: "a".into(),
                            mime_type: Some("text/plain".into()),
                            description: None,
                        }),
                        ContentBlock::Resource(EmbeddedResource {
                            uri: "plugin://docs/b".into(),
                            mime_type: Some("text/plain".into()),
                            body: ResourceBody::Text("b".into()),
                        }),
                    ],
                    Value::Null,
                ))
            },
        )
        .unwrap();
    registry
        .register(
            tool("stats").with_output_schema(json!({
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            })),
            |_c: CallContext, _a: Arguments, _e: Environment| async {
                Ok(ToolResult::new(json!({"n": 1})))
            },
        )
        .unwrap();
    registry
        .register(
            tool("ask"),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                let answer = match ctx.interaction() {
                    None => "no interaction",
                    Some(asking) => match asking.confirm("Go on?".into()).await {
                        Ok(true) => "confirmed",
                        Ok(false) => "declined",
                        Err(_) => "failed",
                    },
                };
                Ok(ToolResult::new(answer))
            },
        )
        .unwrap();
    registry
        .register(
            tool("choose"),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                let Some(asking) = ctx.interaction() else {
                    return Ok(ToolResult::new("no interaction"));
                };
                let answer = match asking.ask("Which?".into(), multi_select()).await {
                    Ok(Some(values)) => values["colors"].to_string(),
                    Ok(None) => "declined".into(),
                    Err(err) => format!("refused: {err}"),
                };
                Ok(ToolResult::new(answer))
            },
        )
        .unwrap();
    registry
        .register(
            tool("guarded"),
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::new("ran")) },
        )
        .unwrap();
    registry
        .register(
            tool("count").with_task_support(TaskSupport::Optional),
            |ctx: CallContext, _a: Arguments, _e: Environment| async move {
                ctx.report_progress(1, Some(2), || Some("half".into()));
                tokio::time::sleep(Duration::from_millis(150)).await;
                ctx.report_progress(2, Some(2), || None);
                Ok(ToolResult::new("counted"))
            },
        )
        .unwrap();
    registry
        .register(
            tool("chatty"),
            |_c: CallContext, _a: Arguments, _e: Environment| async {
                tracing::warn!(target: "plugin", plugin = "chatty", "careful");
                Ok(ToolResult::new("said"))
            },
        )
        .unwrap();
    registry
        .catalog()
        .replace("docs", Some(Arc::new(Prompts)), Some(Arc::new(Docs)), None)
        .unwrap();
    Arc::new(registry)
}

/// A form with a multiple choice: 2025-11-25 added those to elicitation's schemas.
fn multi_select() -> Value {
    json!({"type": "object", "properties": {"colors": {
        "type": "array", "items": {"type": "string", "enum": ["red", "green"]}}}})
}

/// The test client's answer to a question: accept, with values for a form.
fn accept(question: &Value) -> Value {
    if question["requestedSchema"]["properties"]
        .get("colors")
        .is_some()
    {
        json!({"action": "accept", "content": {"colors": ["red"]}})
    } else {
        json!({"action": "accept"})
    }
}

/// The root's files (`a.md`), and its storage to change them.
fn files() -> (FileResources, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    storage.write("a.md", b"# a\n", "text/markdown").unwrap();
    (
        FileResources::new(VfsToolOptions::builder(Arc::clone(&storage)).build()),
        storage,
    )
}

/// How long the servers wait for an answer to a question: long enough for the test
/// client's immediate answers, short for the cell that leaves one unanswered.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

fn approval() -> ApprovalPolicy {
    ApprovalPolicy::new().confirm_tool("guarded")
}

type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

enum Wire {
    Stdio {
        write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
        lines: Lines,
        serving: tokio::task::JoinHandle<()>,
    },
    Http {
        addr: std::net::SocketAddr,
        session: Option<String>,
        stream: Option<tokio::sync::mpsc::UnboundedReceiver<Value>>,
        stop: tokio::sync::oneshot::Sender<()>,
        serving: tokio::task::JoinHandle<()>,
    },
}

/// A client of one server (one cell): legacy ones `initialize` declaring elicitation,
/// modern ones put `_meta` on every request. Every message the server sends is kept, with
/// the method of the request it answers, and checked against the schema at the end.
struct Client {
    revision: Revision,
    registry: Arc<Registry>,
    storage: Arc<dyn Storage>,
    wire: Wire,
    next_id: u64,
    methods: HashMap<u64, (String, bool)>,
    received: Vec<Value>,
    /// What the server declared: `initialize`'s capabilities, or `server/discover`'s.
    capabilities: Value,
    /// Whether the server's questions are answered (else left to time out).
    answers: bool,
}

impl Client {
    async fn start(revision: Revision, transport: Transport) -> Self {
        let registry = registry();
        let (files, storage) = files();
        let wire = match transport {
            Transport::Stdio => {
                let server = McpServer::new(Arc::clone(&registry))
                    .with_list_changed(true)
                    .with_resources(files)
                    .with_approval(approval())
                    .with_confirm_timeout(CONFIRM_TIMEOUT);
                let (client, server_end) = tokio::io::duplex(1 << 22);
                let (server_read, server_write) = tokio::io::split(server_end);
                let serving =
                    tokio::spawn(
                        async move { server.serve(server_read, server_write).await.unwrap() },
                    );
                let (read, write) = tokio::io::split(client);
                Wire::Stdio {
                    write,
                    lines: BufReader::new(read).lines(),
                    serving,
                }
            }
            Transport::Http => {
                let config = HttpConfig::new(Some(SessionKey::random().unwrap()))
                    .with_list_changed(true)
                    .with_approval(approval())
                    .with_confirm_timeout(CONFIRM_TIMEOUT);
                let server = HttpServer::bind(
                    "127.0.0.1:0".parse().unwrap(),
                    config,
                    Registries::shared_with_files(Arc::clone(&registry), files),
                )
                .await
                .unwrap();
                let addr = server.local_addr();
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                let serving = tokio::spawn(async move {
                    server
                        .serve(async {
                            let _ = stopped.await;
                        })
                        .await
                        .unwrap();
                });
                Wire::Http {
                    addr,
                    session: None,
                    stream: None,
                    stop,
                    serving,
                }
            }
        };
        let mut client = Self {
            revision,
            registry,
            storage,
            wire,
            next_id: 1,
            methods: HashMap::new(),
            received: Vec::new(),
            capabilities: Value::Null,
            answers: true,
        };
        if !revision.is_modern() {
            let init = client
                .request(
                    "initialize",
                    json!({"protocolVersion": revision.as_str(), "capabilities": {"elicitation": {}},
                           "clientInfo": {"name": "matrix", "version": "1"}}),
                )
                .await;
            assert_eq!(init["result"]["protocolVersion"], revision.as_str());
            client.capabilities = init["result"]["capabilities"].clone();
            client
                .notify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
            if let Wire::Http {
                addr,
                session: Some(id),
                stream,
                ..
            } = &mut client.wire
            {
                let opened = get(*addr, id, revision).await;
                assert_eq!(opened.status, 200);
                *stream = Some(opened.messages);
            }
        } else {
            let discover = client.request("server/discover", json!({})).await;
            client.capabilities = discover["result"]["capabilities"].clone();
        }
        client
    }

    /// The request's `_meta` for a modern client (with `extra` keys), or `extra` alone.
    fn meta(&self, extra: Value) -> Option<Value> {
        let mut meta = if self.revision.is_modern() {
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "matrix", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            })
        } else {
            json!({})
        };
        for (key, value) in extra.as_object().unwrap() {
            meta[key] = value.clone();
        }
        (!meta.as_object().unwrap().is_empty()).then_some(meta)
    }

    /// Sends a request and gives its answer; what came before it (notifications, the
    /// server's questions, answered `accept`) is kept in `received`.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_meta(method, params, json!({})).await
    }

    async fn request_meta(&mut self, method: &str, mut params: Value, extra: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        if let Some(meta) = self.meta(extra) {
            params["_meta"] = meta;
        }
        let tasked = params.get("task").is_some();
        self.methods.insert(id, (method.to_owned(), tasked));
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let revision = self.revision;
        let answer = match &mut self.wire {
            Wire::Stdio { write, lines, .. } => {
                write
                    .write_all(format!("{message}\n").as_bytes())
                    .await
                    .unwrap();
                loop {
                    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                        .await
                        .expect("an answer in time")
                        .unwrap()
                        .expect("a line");
                    let value: Value = serde_json::from_str(&line).unwrap();
                    self.received.push(value.clone());
                    if value["method"] == "elicitation/create" && self.answers {
                        let reply = json!({"jsonrpc": "2.0", "id": value["id"], "result": accept(&value["params"])});
                        write
                            .write_all(format!("{reply}\n").as_bytes())
                            .await
                            .unwrap();
                    } else if value["id"] == id {
                        break value;
                    }
                }
            }
            Wire::Http { addr, session, .. } => {
                let version = revision.as_str().to_owned();
                let name = match method {
                    "tools/call" => params["name"].as_str().unwrap_or_default().to_owned(),
                    "resources/read" => params["uri"].as_str().unwrap_or_default().to_owned(),
                    _ => String::new(),
                };
                let session_id = session.clone();
                let mut headers: Vec<(&str, &str)> = Vec::new();
                if let Some(id) = session_id.as_deref() {
                    headers.push(("mcp-session-id", id));
                }
                if revision >= Revision::V2025_06_18 && (session.is_some() || revision.is_modern())
                {
                    headers.push(("mcp-protocol-version", &version));
                }
                if revision.is_modern() {
                    headers.push(("mcp-method", method));
                    if !name.is_empty() {
                        headers.push(("mcp-name", &name));
                    }
                }
                let mut exchange = post(*addr, &headers, &message.to_string()).await;
                if method == "initialize" {
                    *session = exchange.headers.get("mcp-session-id").cloned();
                }
                let mut answer = None;
                while let Some(value) =
                    tokio::time::timeout(Duration::from_secs(20), exchange.messages.recv())
                        .await
                        .expect("the answer in time")
                {
                    self.received.push(value.clone());
                    if value["method"] == "elicitation/create" && self.answers {
                        let reply = json!({"jsonrpc": "2.0", "id": value["id"], "result": accept(&value["params"])});
                        let answered = post(*addr, &headers, &reply.to_string()).await;
                        assert_eq!(answered.status, 202);
                    } else if value["id"] == id {
                        answer = Some(value);
                    }
                }
                answer.expect("an answer")
            }
        };
        answer
    }

    async fn notify(&mut self, message: Value) {
        match &mut self.wire {
            Wire::Stdio { write, .. } => write
                .write_all(format!("{message}\n").as_bytes())
                .await
                .unwrap(),
            Wire::Http { addr, session, .. } => {
                let version = self.revision.as_str();
                let mut headers = vec![("mcp-session-id", session.as_deref().unwrap())];
                if self.revision >= Revision::V2025_06_18 {
                    headers.push(("mcp-protocol-version", version));
                }
                assert_eq!(
                    post(*addr, &headers, &message.to_string()).await.status,
                    202
                );
            }
        }
    }

    /// The next message the server sends on its own (stdio: stdout; HTTP: the session's
    /// GET stream), within 5 s.
    async fn next_unasked(&mut self) -> Option<Value> {
        let wait = Duration::from_secs(5);
        let value = match &mut self.wire {
            Wire::Stdio { lines, .. } => tokio::time::timeout(wait, lines.next_line())
                .await
                .ok()?
                .unwrap()
                .map(|line| serde_json::from_str(&line).unwrap()),
            Wire::Http { stream, .. } => tokio::time::timeout(wait, stream.as_mut()?.recv())
                .await
                .ok()?,
        }?;
        self.received.push(value.clone());
        Some(value)
    }

    /// Stops the server, then checks every message it sent against the revision's
    /// schema: gives what did not fit.
    async fn finish(mut self) -> Vec<String> {
        match self.wire {
            Wire::Stdio {
                mut write,
                serving,
                mut lines,
            } => {
                write.shutdown().await.unwrap();
                drop(write);
                while let Some(line) = lines.next_line().await.unwrap() {
                    self.received.push(serde_json::from_str(&line).unwrap());
                }
                serving.await.unwrap();
            }
            Wire::Http {
                stop,
                serving,
                stream,
                ..
            } => {
                drop(stream);
                let _ = stop.send(());
                serving.await.unwrap();
            }
        }
        let schema = Schema::load(&schema_dir(), self.revision);
        let (result_message, error_message) = if schema.has("JSONRPCResultResponse") {
            ("JSONRPCResultResponse", "JSONRPCErrorResponse")
        } else {
            ("JSONRPCResponse", "JSONRPCError")
        };
        let mut wrong = Vec::new();
        for message in &self.received {
            let mut defs = Vec::new();
            if let Some(result) = message.get("result") {
                let id = message["id"].as_u64().unwrap();
                let (method, tasked) = &self.methods[&id];
                defs.push(result_message);
                if schema.has(result_def(method, *tasked, result)) {
                    defs.push(result_def(method, *tasked, result));
                } else {
                    // 2026-07-28 moved tasks to an extension: its schema has no task types.
                    defs.push("Result");
                }
            } else if message.get("error").is_some() {
                defs.push(error_message);
            } else if message.get("id").is_some() {
                defs.extend(["JSONRPCRequest", "ElicitRequest"]);
            } else {
                let method = message["method"].as_str().unwrap();
                defs.extend(["JSONRPCNotification", notification_def(method)]);
            }
            for def in defs {
                let errors = if def == "Result" || schema.has(def) {
                    schema.errors(
                        def,
                        if def == "Result" {
                            &message["result"]
                        } else if defs_whole(def) {
                            message
                        } else {
                            &message["result"]
                        },
                    )
                } else {
                    vec![format!("the schema has no {def}")]
                };
                if !errors.is_empty() {
                    wrong.push(format!("not a valid {def}: {errors:?} in {message}"));
                }
            }
        }
        wrong
    }
}

/// Whether `def` describes the whole message (else its `result`).
fn defs_whole(def: &str) -> bool {
    def.starts_with("JSONRPC") || def.ends_with("Request") || def.ends_with("Notification")
}

fn result_def(method: &str, tasked: bool, result: &Value) -> &'static str {
    if result["resultType"] == "input_required" {
        return "InputRequiredResult";
    }
    match method {
        "initialize" => "InitializeResult",
        "server/discover" => "DiscoverResult",
        "logging/setLevel" | "resources/subscribe" => "EmptyResult",
        "tools/list" => "ListToolsResult",
        "tools/call" if tasked && result.get("task").is_some() => "CreateTaskResult",
        "tools/call" | "tasks/result" => "CallToolResult",
        "tasks/get" => "GetTaskResult",
        "prompts/list" => "ListPromptsResult",
        "prompts/get" => "GetPromptResult",
        "completion/complete" => "CompleteResult",
        "resources/list" => "ListResourcesResult",
        "resources/read" => "ReadResourceResult",
        "resources/templates/list" => "ListResourceTemplatesResult",
        "subscriptions/listen" => "SubscriptionsListenResult",
        other => panic!("no result type for {other}"),
    }
}

fn notification_def(method: &str) -> &'static str {
    match method {
        "notifications/progress" => "ProgressNotification",
        "notifications/message" => "LoggingMessageNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/subscriptions/acknowledged" => "SubscriptionsAcknowledgedNotification",
        "notifications/resources/updated" => "ResourceUpdatedNotification",
        "notifications/cancelled" => "CancelledNotification",
        "notifications/prompts/list_changed" => "PromptListChangedNotification",
        "notifications/resources/list_changed" => "ResourceListChangedNotification",
        other => panic!("unexpected notification {other}"),
    }
}

/// The text of a call's first content block, or the error code.
fn text(answer: &Value) -> String {
    match answer.get("error") {
        Some(error) => format!("error {}", error["code"]),
        None => answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

fn code(answer: &Value) -> String {
    format!("error {}", answer["error"]["code"])
}

/// Whether the server declared the capability at `path` (a JSON pointer): asserted
/// equal to whether the feature was served, so nothing is advertised and not served or
/// the reverse.
fn declared(c: &Client, path: &str) -> bool {
    c.capabilities
        .pointer(path)
        .is_some_and(|value| value != &Value::Bool(false) && !value.is_null())
}

// One function per feature: what happened in that cell, in the words of the table.

async fn tools(c: &mut Client) -> String {
    let list = c.request("tools/list", json!({})).await;
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "echo"),
        "{list}"
    );
    assert!(declared(c, "/tools"), "{}", c.capabilities);
    let call = c
        .request("tools/call", json!({"name": "echo", "arguments": {}}))
        .await;
    format!("served: {}", text(&call))
}

async fn rich(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "rich", "arguments": {}}))
        .await;
    let kinds: Vec<&str> = call["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["type"].as_str().unwrap())
        .collect();
    kinds.join(",")
}

async fn structured(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "stats", "arguments": {}}))
        .await;
    assert_eq!(text(&call), r#"{"n":1}"#, "{call}");
    match call["result"].get("structuredContent") {
        Some(content) => format!("structuredContent {content}"),
        None => "text only".into(),
    }
}

async fn prompts(c: &mut Client) -> String {
    let list = c.request("prompts/list", json!({})).await;
    assert_eq!(list["result"]["prompts"][0]["name"], "greet", "{list}");
    assert!(declared(c, "/prompts"), "{}", c.capabilities);
    let prompt = c
        .request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "Ada"}}),
        )
        .await;
    let kinds: Vec<&str> = prompt["result"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"]["type"].as_str().unwrap())
        .collect();
    format!(
        "served: {}, {}",
        prompt["result"]["messages"][0]["content"]["text"],
        kinds.join(",")
    )
}

async fn resources(c: &mut Client) -> String {
    let list = c.request("resources/list", json!({})).await;
    assert_eq!(
        list["result"]["resources"][0]["uri"], "file:///a.md",
        "{list}"
    );
    assert!(declared(c, "/resources"), "{}", c.capabilities);
    let cursor = list["result"]["nextCursor"].clone();
    let next = c.request("resources/list", json!({"cursor": cursor})).await;
    assert_eq!(
        next["result"]["resources"][0]["uri"], "plugin://docs/a",
        "{next}"
    );
    let file = c
        .request("resources/read", json!({"uri": "file:///a.md"}))
        .await;
    let doc = c
        .request("resources/read", json!({"uri": "plugin://docs/a"}))
        .await;
    format!(
        "served: {} {}",
        file["result"]["contents"][0]["text"], doc["result"]["contents"][0]["text"]
    )
}

async fn templates(c: &mut Client) -> String {
    let list = c.request("resources/templates/list", json!({})).await;
    assert!(declared(c, "/resources"), "{}", c.capabilities);
    let uris: Vec<&str> = list["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    format!("served: {}", uris.join(" "))
}

async fn completion(c: &mut Client) -> String {
    let prompt = c
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}}),
        )
        .await;
    let path = c
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": "a"}}),
        )
        .await;
    assert!(declared(c, "/completions"), "{}", c.capabilities);
    format!(
        "served: {} {}",
        prompt["result"]["completion"]["values"], path["result"]["completion"]["values"]
    )
}

async fn subscribe(c: &mut Client) -> String {
    let answer = c
        .request("resources/subscribe", json!({"uri": "file:///a.md"}))
        .await;
    assert_eq!(
        declared(c, "/resources/subscribe"),
        answer.get("result").is_some(),
        "{}",
        c.capabilities
    );
    let Some(result) = answer.get("result") else {
        return code(&answer);
    };
    // The first poll (each second) sets what later ones compare with; a change after
    // it is told once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.storage
        .write("a.md", b"# changed\n", "text/markdown")
        .unwrap();
    let note = c.next_unasked().await.expect("an update");
    assert_eq!(note["params"]["uri"], "file:///a.md", "{note}");
    // A source's resource: told of when the catalog changes (here: the source given
    // again), among the list changes that brings.
    let plugin = c
        .request("resources/subscribe", json!({"uri": "plugin://docs/a"}))
        .await;
    assert_eq!(plugin["result"], json!({}), "{plugin}");
    c.registry
        .catalog()
        .replace("docs", Some(Arc::new(Prompts)), Some(Arc::new(Docs)), None)
        .unwrap();
    let mut updated = None;
    for _ in 0..4 {
        let next = c.next_unasked().await.expect("the catalog's news");
        if next["method"] == "notifications/resources/updated" {
            updated = Some(next);
            break;
        }
    }
    let updated = updated.expect("an update of the source's resource");
    assert_eq!(updated["params"]["uri"], "plugin://docs/a", "{updated}");
    format!(
        "served: {result}, then {} (file and source's resource)",
        note["method"].as_str().unwrap()
    )
}

async fn elicitation(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "ask", "arguments": {}}))
        .await;
    answered_rounds(c, call, "ask").await
}

async fn form(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "choose", "arguments": {}}))
        .await;
    let full = text(&call);
    if let Some(why) = full.strip_prefix("refused: ") {
        // Nothing was sent, and the tool was told why.
        assert!(
            !c.received
                .iter()
                .any(|m| m["method"] == "elicitation/create"),
            "{:?}",
            c.received
        );
        assert!(
            why.contains("2025-06-18") && why.contains("multiple choice"),
            "{why}"
        );
        return "refused".into();
    }
    answered_rounds(c, call, "choose").await
}

/// A question left unanswered: the server gives up after its confirm timeout, tells the
/// client it cancelled its question, and the tool hears `TimedOut`.
async fn unanswered(c: &mut Client) -> String {
    c.answers = false;
    let call = c
        .request("tools/call", json!({"name": "ask", "arguments": {}}))
        .await;
    if call["result"]["resultType"] == "input_required" {
        // Nothing waits on the server: the round is the whole answer.
        return "round left unanswered, nothing waits".into();
    }
    let Some(question) = c
        .received
        .iter()
        .find(|m| m["method"] == "elicitation/create")
        .map(|m| m["id"].clone())
    else {
        return text(&call);
    };
    let cancelled = |m: &Value| {
        m["method"] == "notifications/cancelled" && m["params"]["requestId"] == question
    };
    if !c.received.iter().any(cancelled) {
        let note = c.next_unasked().await.expect("the question cancelled");
        assert!(cancelled(&note), "{note}");
    }
    format!("asked, {}, question cancelled", text(&call))
}

async fn approval_cell(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "guarded", "arguments": {}}))
        .await;
    answered_rounds(c, call, "guarded").await
}

/// What a call that may ask gave: its text, after answering a modern `input_required`
/// round with `accept` (then "round, TEXT"), or after a legacy `elicitation/create`
/// (then "asked, TEXT").
async fn answered_rounds(c: &mut Client, call: Value, tool: &str) -> String {
    if call["result"]["resultType"] == "input_required" {
        let requests = &call["result"]["inputRequests"];
        assert_eq!(requests["q0"]["method"], "elicitation/create", "{call}");
        let again = c
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {},
                       "inputResponses": {"q0": accept(&requests["q0"]["params"])},
                       "requestState": call["result"]["requestState"]}),
            )
            .await;
        return format!("round, {}", text(&again));
    }
    let asked = c
        .received
        .iter()
        .any(|m| m["method"] == "elicitation/create");
    let error = if call["result"]["isError"] == true {
        " (isError)"
    } else {
        ""
    };
    let text = text(&call);
    let text = text.split(':').take(2).collect::<Vec<_>>().join(":");
    if asked {
        format!("asked, {text}{error}")
    } else {
        format!("{text}{error}")
    }
}

async fn tasks(c: &mut Client) -> String {
    let start = c.received.len();
    let created = c
        .request_meta(
            "tools/call",
            json!({"name": "count", "arguments": {}, "task": {"ttl": 60000}}),
            json!({"progressToken": "t1"}),
        )
        .await;
    let offered =
        declared(c, "/tasks") || declared(c, "/extensions/io.modelcontextprotocol~1tasks");
    assert_eq!(
        offered,
        created["result"].get("task").is_some(),
        "{}",
        c.capabilities
    );
    let Some(task) = created["result"]["task"]["taskId"]
        .as_str()
        .map(str::to_owned)
    else {
        let got = c.request("tasks/get", json!({"taskId": "x"})).await;
        return format!(
            "call ran plainly ({}, {}), tasks/get {}",
            text(&created),
            progress_since(c, start),
            code(&got)
        );
    };
    let got = c.request("tasks/get", json!({"taskId": task})).await;
    assert!(got["result"]["status"].is_string(), "{got}");
    let result = c.request("tasks/result", json!({"taskId": task})).await;
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str(),
        "{result}"
    );
    format!("served: {}, {}", text(&result), progress_since(c, start))
}

/// Whether progress came since the `start`th message.
fn progress_since(c: &Client, start: usize) -> &'static str {
    if c.received[start..]
        .iter()
        .any(|m| m["method"] == "notifications/progress")
    {
        "with progress"
    } else {
        "no progress"
    }
}

async fn progress(c: &mut Client) -> String {
    let start = c.received.len();
    let call = c
        .request_meta(
            "tools/call",
            json!({"name": "count", "arguments": {}}),
            json!({"progressToken": "p1"}),
        )
        .await;
    assert_eq!(text(&call), "counted");
    let notes: Vec<&Value> = c.received[start..]
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        notes.iter().all(|m| m["params"]["progressToken"] == "p1"),
        "{notes:?}"
    );
    if notes.is_empty() {
        "no progress".into()
    } else {
        "progress before the answer".into()
    }
}

async fn logging(c: &mut Client) -> String {
    let (set, extra) = if c.revision.is_modern() {
        let set = c
            .request("logging/setLevel", json!({"level": "info"}))
            .await;
        (
            code(&set),
            json!({"io.modelcontextprotocol/logLevel": "info"}),
        )
    } else {
        let set = c
            .request("logging/setLevel", json!({"level": "info"}))
            .await;
        assert_eq!(set["result"], json!({}), "{set}");
        ("{}".to_owned(), json!({}))
    };
    assert!(declared(c, "/logging"), "{}", c.capabilities);
    let start = c.received.len();
    let call = c
        .request_meta(
            "tools/call",
            json!({"name": "chatty", "arguments": {}}),
            extra,
        )
        .await;
    assert_eq!(text(&call), "said");
    let lines: Vec<&Value> = c.received[start..]
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert!(
        lines.iter().any(|m| m["params"]["level"] == "warning"),
        "{lines:?}"
    );
    format!("setLevel {set}, log lines before the answer")
}

async fn list_changed(c: &mut Client) -> String {
    assert_eq!(
        c.capabilities["tools"]["listChanged"], true,
        "{}",
        c.capabilities
    );
    if c.revision.is_modern() {
        let notifications = json!({"toolsListChanged": true});
        let heard = listen(c, notifications, |registry| {
            registry.register_all(vec![extra_tool()]).unwrap();
        })
        .await;
        return format!("listen: {heard}");
    }
    c.registry.register_all(vec![extra_tool()]).unwrap();
    let note = c.next_unasked().await.expect("a list change");
    note["method"].as_str().unwrap().to_owned()
}

/// The catalog's source removed: what the client hears (legacy: on its own; modern:
/// through `subscriptions/listen`), in order.
async fn catalog_changed(c: &mut Client) -> String {
    assert_eq!(
        (
            &c.capabilities["prompts"]["listChanged"],
            &c.capabilities["resources"]["listChanged"]
        ),
        (&json!(true), &json!(true)),
        "{}",
        c.capabilities
    );
    let mut heard = Vec::new();
    let change = |registry: &Registry| {
        registry
            .catalog()
            .replace("docs", None, None, None)
            .unwrap();
    };
    if c.revision.is_modern() {
        let notifications = json!({"promptsListChanged": true, "resourcesListChanged": true});
        heard.push(listen(c, notifications, change).await);
    } else {
        change(&c.registry);
    }
    while heard.len() < 2 {
        let note = c.next_unasked().await.expect("a list change");
        heard.push(note["method"].as_str().unwrap().to_owned());
    }
    heard.sort();
    heard.join(", ")
}

/// A modern client's `subscriptions/listen` for `notifications`: the acknowledgement,
/// `change`, then the first notification it brings.
async fn listen(c: &mut Client, notifications: Value, change: impl FnOnce(&Registry)) -> String {
    let meta = c.meta(json!({})).unwrap();
    let message = json!({"jsonrpc": "2.0", "id": 99, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": notifications}});
    c.methods.insert(99, ("subscriptions/listen".into(), false));
    let registry = Arc::clone(&c.registry);
    match &mut c.wire {
        Wire::Stdio { write, .. } => write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap(),
        Wire::Http { addr, stream, .. } => {
            let headers = [
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "subscriptions/listen"),
            ];
            *stream = Some(post(*addr, &headers, &message.to_string()).await.messages);
        }
    }
    let ack = c.next_unasked().await.expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    change(&registry);
    let note = c.next_unasked().await.expect("a list change");
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 99,
        "{note}"
    );
    note["method"].as_str().unwrap().to_owned()
}

#[derive(Debug, Clone, Copy)]
enum Feature {
    Tools,
    Rich,
    Structured,
    Prompts,
    Resources,
    Templates,
    Completion,
    Subscribe,
    Elicitation,
    Form,
    Unanswered,
    Approval,
    Tasks,
    Progress,
    Logging,
    ListChanged,
    CatalogChanged,
}

async fn run(feature: Feature, c: &mut Client) -> String {
    match feature {
        Feature::Tools => tools(c).await,
        Feature::Rich => rich(c).await,
        Feature::Structured => structured(c).await,
        Feature::Prompts => prompts(c).await,
        Feature::Resources => resources(c).await,
        Feature::Templates => templates(c).await,
        Feature::Completion => completion(c).await,
        Feature::Subscribe => subscribe(c).await,
        Feature::Elicitation => elicitation(c).await,
        Feature::Form => form(c).await,
        Feature::Unanswered => unanswered(c).await,
        Feature::Approval => approval_cell(c).await,
        Feature::Tasks => tasks(c).await,
        Feature::Progress => progress(c).await,
        Feature::Logging => logging(c).await,
        Feature::ListChanged => list_changed(c).await,
        Feature::CatalogChanged => catalog_changed(c).await,
    }
}

/// What each cell must give: the table of docs/protocol.md.
fn expected(feature: Feature, revision: Revision, transport: Transport) -> String {
    use Revision::*;
    let modern = revision.is_modern();
    let asks = revision >= V2025_06_18;
    match feature {
        Feature::Tools => "served: hi".into(),
        Feature::Rich => match revision {
            V2024_11_05 => "image,text,text,resource",
            V2025_03_26 => "image,audio,text,resource",
            _ => "image,audio,resource_link,resource",
        }
        .into(),
        Feature::Structured => r#"structuredContent {"n":1}"#.into(),
        // The source's blocks: text, image, audio, link, text resource, blob resource.
        Feature::Prompts => match revision {
            V2024_11_05 => r#"served: "Hello, Ada!", text,image,text,text,resource,resource"#,
            V2025_03_26 => r#"served: "Hello, Ada!", text,image,audio,text,resource,resource"#,
            _ => r#"served: "Hello, Ada!", text,image,audio,resource_link,resource,resource"#,
        }
        .into(),
        Feature::Resources => r##"served: "# a\n" "doc a""##.into(),
        Feature::Templates => "served: file:///{path} plugin://docs/{id}".into(),
        Feature::Completion => r#"served: ["Ada","Alan"] ["a.md"]"#.into(),
        Feature::Subscribe if modern => "error -32601".into(),
        Feature::Subscribe => {
            "served: {}, then notifications/resources/updated (file and source's resource)".into()
        }
        Feature::Elicitation if modern => "round, confirmed".into(),
        Feature::Elicitation if asks => "asked, confirmed".into(),
        Feature::Form if modern => r#"round, ["red"]"#.into(),
        Feature::Form if revision == V2025_11_25 => r#"asked, ["red"]"#.into(),
        // 2025-06-18's schema has no multiple choice: refused before anything is sent.
        Feature::Form if asks => "refused".into(),
        Feature::Unanswered if modern => "round left unanswered, nothing waits".into(),
        Feature::Unanswered if asks => "asked, failed, question cancelled".into(),
        Feature::Elicitation | Feature::Form | Feature::Unanswered => "no interaction".into(),
        Feature::Approval if modern => "round, ran".into(),
        Feature::Approval if asks => "asked, ran".into(),
        Feature::Approval => "guarded: not run (isError)".into(),
        // A task's call sends no progress; a plain call does.
        Feature::Tasks if revision == V2025_11_25 => "served: counted, no progress".into(),
        Feature::Tasks if modern && transport == Transport::Stdio => {
            "served: counted, no progress".into()
        }
        Feature::Tasks => {
            "call ran plainly (counted, with progress), tasks/get error -32601".into()
        }
        Feature::Progress => "progress before the answer".into(),
        Feature::Logging if modern => "setLevel error -32601, log lines before the answer".into(),
        Feature::Logging => "setLevel {}, log lines before the answer".into(),
        Feature::ListChanged if modern => "listen: notifications/tools/list_changed".into(),
        Feature::ListChanged => "notifications/tools/list_changed".into(),
        Feature::CatalogChanged => {
            "notifications/prompts/list_changed, notifications/resources/list_changed".into()
        }
    }
}

const FEATURES: [Feature; 17] = [
    Feature::Tools,
    Feature::Rich,
    Feature::Structured,
    Feature::Prompts,
    Feature::Resources,
    Feature::Templates,
    Feature::Completion,
    Feature::Subscribe,
    Feature::Elicitation,
    Feature::Form,
    Feature::Unanswered,
    Feature::Approval,
    Feature::Tasks,
    Feature::Progress,
    Feature::Logging,
    Feature::ListChanged,
    Feature::CatalogChanged,
];

#[tokio::test(flavor = "current_thread")]
async fn every_feature_on_every_revision_and_transport() {
    use tracing_subscriber::layer::SubscriberExt;
    // The log layer, so notifications/message reach clients. A current thread runtime:
    // every call runs on this thread, under this subscriber.
    let _default = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(toolhost_mcp::log_layer()),
    );
    let mut wrong = Vec::new();
    for feature in FEATURES {
        for revision in Revision::ALL {
            for transport in [Transport::Stdio, Transport::Http] {
                // Each cell on its own task (on this thread, under this subscriber): a
                // panic is that cell's failure, the others still run.
                let cell = tokio::spawn(async move {
                    let mut client = Client::start(revision, transport).await;
                    let got = run(feature, &mut client).await;
                    (got, client.finish().await)
                })
                .await;
                let want = expected(feature, revision, transport);
                let at = format!("{feature:?} {revision} {transport:?}");
                match cell {
                    Err(panicked) => wrong.push(format!("{at}: {panicked}")),
                    Ok((got, invalid)) => {
                        // The cell as the docs table has it (`--nocapture` shows them).
                        println!("{at}: {got}");
                        if got != want {
                            wrong.push(format!("{at}: got {got:?}, want {want:?}"));
                        }
                        for message in invalid {
                            wrong.push(format!("{at}: {message}"));
                        }
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "cells that differ:\n{}", wrong.join("\n"));
}
