//! The matrix's client of one server (stdio or HTTP), keeping every message it gets,
//! and which schema definition each must fit.

use super::*;

pub(super) enum Wire {
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

/// A client of one server (one cell): legacy ones `initialize` declaring elicitation
/// (and sampling, in the sampling cells), modern ones put `_meta` on every request. Every message the server sends is kept, with
/// the method of the request it answers, and checked against the schema at the end.
pub(super) struct Client {
    pub(super) revision: Revision,
    pub(super) registry: Arc<Registry>,
    pub(super) storage: Arc<dyn Storage>,
    pub(super) wire: Wire,
    pub(super) next_id: u64,
    pub(super) methods: HashMap<u64, (String, bool)>,
    pub(super) received: Vec<Value>,
    /// What the server declared: `initialize`'s capabilities, or `server/discover`'s.
    pub(super) capabilities: Value,
    /// Whether the server's questions are answered (else left to time out).
    pub(super) answers: bool,
    /// Whether it declares sampling (only in the sampling cells: a client that declares
    /// it gets an interaction on every revision, which the other cells must not see).
    pub(super) samples: bool,
}

impl Client {
    /// A client that declares sampling too when `samples`.
    pub(super) async fn start(revision: Revision, transport: Transport, samples: bool) -> Self {
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
            samples,
        };
        if !revision.is_modern() {
            let capabilities = client.client_capabilities();
            let init = client
                .request(
                    "initialize",
                    json!({"protocolVersion": revision.as_str(), "capabilities": capabilities,
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

    /// The capabilities this client declares.
    pub(super) fn client_capabilities(&self) -> Value {
        if self.samples {
            json!({"elicitation": {}, "sampling": {}})
        } else {
            json!({"elicitation": {}})
        }
    }

    /// The request's `_meta` for a modern client (with `extra` keys), or `extra` alone.
    pub(super) fn meta(&self, extra: Value) -> Option<Value> {
        let mut meta = if self.revision.is_modern() {
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "matrix", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": self.client_capabilities(),
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
    pub(super) async fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_meta(method, params, json!({})).await
    }

    pub(super) async fn request_meta(
        &mut self,
        method: &str,
        mut params: Value,
        extra: Value,
    ) -> Value {
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
                    if let Some(result) = self.answers.then(|| reply_to(&value)).flatten() {
                        let reply = json!({"jsonrpc": "2.0", "id": value["id"], "result": result});
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
                    // The tasks extension routes a task's requests on its id.
                    "tasks/get" | "tasks/update" | "tasks/cancel" => {
                        params["taskId"].as_str().unwrap_or_default().to_owned()
                    }
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
                    if let Some(result) = self.answers.then(|| reply_to(&value)).flatten() {
                        let reply = json!({"jsonrpc": "2.0", "id": value["id"], "result": result});
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

    pub(super) async fn notify(&mut self, message: Value) {
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
    pub(super) async fn next_unasked(&mut self) -> Option<Value> {
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
    pub(super) async fn finish(mut self) -> Vec<String> {
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
                defs.push("JSONRPCRequest");
                defs.push(if message["method"] == "sampling/createMessage" {
                    "CreateMessageRequest"
                } else {
                    "ElicitRequest"
                });
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
pub(super) fn defs_whole(def: &str) -> bool {
    def.starts_with("JSONRPC") || def.ends_with("Request") || def.ends_with("Notification")
}

pub(super) fn result_def(method: &str, tasked: bool, result: &Value) -> &'static str {
    if result["resultType"] == "input_required" {
        return "InputRequiredResult";
    }
    match method {
        "initialize" => "InitializeResult",
        "server/discover" => "DiscoverResult",
        "logging/setLevel" | "resources/subscribe" => "EmptyResult",
        "tools/list" => "ListToolsResult",
        "tools/call" if tasked && result.get("task").is_some() => "CreateTaskResult",
        // The published tasks extension (2026-07-28): its types are not in the schema.
        "tools/call" if result["resultType"] == "task" => "CreateTaskResult",
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

pub(super) fn notification_def(method: &str) -> &'static str {
    match method {
        "notifications/progress" => "ProgressNotification",
        "notifications/message" => "LoggingMessageNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/subscriptions/acknowledged" => "SubscriptionsAcknowledgedNotification",
        "notifications/resources/updated" => "ResourceUpdatedNotification",
        "notifications/cancelled" => "CancelledNotification",
        "notifications/prompts/list_changed" => "PromptListChangedNotification",
        "notifications/resources/list_changed" => "ResourceListChangedNotification",
        "notifications/tasks/status" => "TaskStatusNotification",
        other => panic!("unexpected notification {other}"),
    }
}

/// The text of a call's first content block, or the error code.
pub(super) fn text(answer: &Value) -> String {
    match answer.get("error") {
        Some(error) => format!("error {}", error["code"]),
        None => answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

pub(super) fn code(answer: &Value) -> String {
    format!("error {}", answer["error"]["code"])
}

/// Whether the server declared the capability at `path` (a JSON pointer): asserted
/// equal to whether the feature was served, so nothing is advertised and not served or
/// the reverse.
pub(super) fn declared(c: &Client, path: &str) -> bool {
    c.capabilities
        .pointer(path)
        .is_some_and(|value| value != &Value::Bool(false) && !value.is_null())
}

// One function per feature: what happened in that cell, in the words of the table.
