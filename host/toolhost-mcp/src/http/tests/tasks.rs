//! Tasks over HTTP: each session sees only its own, and a task outlives the requests
//! of its client.

use super::*;
use crate::tasks::tests::{task_registry, Spinning};
use crate::tasks::{NO_SUCH_TASK, NO_SUCH_TASK_PUBLISHED};

const INIT_TASKS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

struct TaskServer {
    addr: SocketAddr,
    app: Arc<App>,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<Result<(), HttpError>>,
}

async fn start_tasks(spinning: &Arc<Spinning>) -> TaskServer {
    start_tasks_with(stateful(), spinning).await
}

async fn start_tasks_with(config: HttpConfig, spinning: &Arc<Spinning>) -> TaskServer {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config,
        Registries::shared(task_registry(spinning)),
    )
    .await
    .unwrap();
    let (addr, app) = (server.local_addr(), Arc::clone(&server.service.app));
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    TaskServer {
        addr,
        app,
        stop,
        done,
    }
}

impl TaskServer {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(20), self.done)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    /// A new session (2025-11-25): its id.
    async fn session(&self) -> String {
        let reply = post(self.addr, &[], INIT_TASKS).await;
        assert_eq!(
            reply.json()["result"]["capabilities"]["tasks"]["requests"],
            json!({"tools": {"call": {}}})
        );
        reply.session()
    }

    async fn request(&self, session: &str, body: &str) -> Value {
        let headers = [(SESSION_HEADER, session), (PROTOCOL_HEADER, "2025-11-25")];
        let reply = post(self.addr, &headers, body).await;
        let body = reply.body.trim();
        // An event stream's one event, or plain JSON.
        let json = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or(body);
        serde_json::from_str(json).unwrap_or_else(|_| panic!("not JSON: {body}"))
    }
}

fn task_call(id: u64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{},"task":{}}}).to_string()
}

fn on_task(method: &str, id: u64, task: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"taskId":task}}).to_string()
}

#[tokio::test]
async fn another_sessions_task_is_no_such_task() {
    let spinning = Arc::default();
    let server = start_tasks(&spinning).await;
    let (alice, mallory) = (server.session().await, server.session().await);
    let created = server.request(&alice, &task_call(2, "echo")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = server
        .request(&alice, &on_task("tasks/result", 3, &task))
        .await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    // Mallory knows the id (it leaked): it is an unknown task to her, word for word as
    // a random id, for every method; and her list is empty.
    for method in ["tasks/result", "tasks/get", "tasks/cancel"] {
        for id in [task.as_str(), "00000000-0000-4000-8000-000000000000"] {
            let answer = server.request(&mallory, &on_task(method, 4, id)).await;
            assert_eq!(
                answer,
                json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": NO_SUCH_TASK}}),
                "{method} {id}"
            );
        }
    }
    let listed = server
        .request(
            &mallory,
            r#"{"jsonrpc":"2.0","id":5,"method":"tasks/list"}"#,
        )
        .await;
    assert_eq!(listed["result"], json!({"tasks": []}));
    // Alice's task is untouched.
    let got = server
        .request(&alice, &on_task("tasks/get", 6, &task))
        .await;
    assert_eq!(got["result"]["status"], "completed");
    // A deleted session's tasks are forgotten with it.
    let headers = [(SESSION_HEADER, alice.as_str())];
    send(server.addr, Method::DELETE, &headers, "").await;
    assert_eq!(server.app.sessions.tasks().counts().tasks, 0);
    server.stop().await;
}

#[tokio::test]
async fn a_task_outlives_its_clients_disconnect() {
    let spinning = Arc::default();
    let server = start_tasks(&spinning).await;
    let session = server.session().await;
    let created = server.request(&session, &task_call(2, "nap")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The client waits for the result, and goes away while it waits.
    let waiting = {
        let (addr, session, body) = (
            server.addr,
            session.clone(),
            on_task("tasks/result", 3, &task),
        );
        tokio::spawn(async move {
            let headers = [
                (SESSION_HEADER, session.as_str()),
                (PROTOCOL_HEADER, "2025-11-25"),
            ];
            post(addr, &headers, &body).await
        })
    };
    until("the wait holds a call place", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 1
    })
    .await;
    waiting.abort();
    until("the wait is gone", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    let got = server
        .request(&session, &on_task("tasks/get", 4, &task))
        .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    // It completes all the same, and the session fetches its result.
    let done = server
        .request(&session, &on_task("tasks/result", 5, &task))
        .await;
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "rested"}]),
        "{done}"
    );
    let got = server
        .request(&session, &on_task("tasks/get", 6, &task))
        .await;
    assert_eq!(got["result"]["status"], "completed");
    server.stop().await;
}

/// The `_meta` of a 2026-07-28 request from a client declaring the tasks extension.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    })
}

/// A 2026-07-28 request without a session, with `token` (none: no Authorization), its
/// mirrored headers set: the JSON answer.
async fn modern_request(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    modern_request_with(addr, token, method, params, modern_meta()).await
}

/// [`modern_request`] with `meta` as the request's `_meta`.
async fn modern_request_with(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    mut params: Value,
    meta: Value,
) -> Value {
    params["_meta"] = meta;
    // Mcp-Name mirrors the tool's name, or (the tasks extension) the task's id.
    let name = match method {
        "tools/call" => params["name"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => params["taskId"].as_str(),
        _ => None,
    }
    .map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![(PROTOCOL_HEADER, "2026-07-28"), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    let reply = post(addr, &headers, &body).await;
    let body = reply.body.trim();
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|_| panic!("not JSON ({}): {body}", reply.status))
}

/// A legacy (2025-11-25) request to a stateless server, with `token`.
async fn stateless_request(addr: SocketAddr, token: &str, body: &str) -> Value {
    let bearer = format!("Bearer {token}");
    let headers = [
        (PROTOCOL_HEADER, "2025-11-25"),
        ("authorization", bearer.as_str()),
    ];
    let reply = post(addr, &headers, body).await;
    let body = reply.body.trim();
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|_| panic!("not JSON ({}): {body}", reply.status))
}

fn no_such_task_for(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": NO_SUCH_TASK}})
}

/// The published extension's answer to a task id that is not the caller's.
fn no_such_published_task_for(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": NO_SUCH_TASK_PUBLISHED}})
}

/// The task id of a published extension's `CreateTaskResult` (`resultType: "task"`).
fn created_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

/// 2026-07-28 over HTTP has no session: a task belongs to the token that started it.
/// Its later requests (each alone, on a new connection) find it; another token's
/// requests get exactly the answer to an unknown id (the published extension has no
/// tasks/list to leak it).
#[tokio::test]
async fn modern_http_tasks_belong_to_their_token() {
    let spinning = Arc::default();
    let mut all = tokens();
    all.add("token-cccccccccccccccc", None).unwrap();
    all.add("token-dddddddddddddddd", None).unwrap();
    let server = start_tasks_with(stateful().with_tokens(Some(all)), &spinning).await;
    let discover = modern_request(server.addr, Some(TOKEN_A), "server/discover", json!({})).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{discover}"
    );
    let created = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "nap", "arguments": {}}),
    )
    .await;
    let task = created_id(&created);
    // The request that created it is over: a later one from the same token finds it.
    let got = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tasks/get",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(got["result"]["taskId"], task.as_str(), "{got}");
    // Bob (another named token) and the two unnamed tokens: as an id never given.
    for token in [TOKEN_B, "token-cccccccccccccccc", "token-dddddddddddddddd"] {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let answer = modern_request(
                server.addr,
                Some(token),
                method,
                json!({"taskId": task, "inputResponses": {}}),
            )
            .await;
            assert_eq!(
                answer,
                no_such_published_task_for(7),
                "{method} with another token"
            );
            let unknown = modern_request(
                server.addr,
                Some(token),
                method,
                json!({"taskId": "00000000-0000-4000-8000-000000000000", "inputResponses": {}}),
            )
            .await;
            assert_eq!(
                unknown, answer,
                "{method}: a foreign id reads as an unknown one"
            );
        }
        let listed = modern_request(server.addr, Some(token), "tasks/list", json!({})).await;
        assert_eq!(listed["error"]["code"], -32601, "{listed}");
    }
    // An unnamed token's task is its own, not the other unnamed token's.
    let unnamed = modern_request(
        server.addr,
        Some("token-cccccccccccccccc"),
        "tools/call",
        json!({"name": "echo", "arguments": {}}),
    )
    .await;
    let unnamed = created_id(&unnamed);
    let foreign = modern_request(
        server.addr,
        Some("token-dddddddddddddddd"),
        "tasks/get",
        json!({"taskId": unnamed}),
    )
    .await;
    assert_eq!(foreign, no_such_published_task_for(7));
    // Alice's result comes inline, the task untouched by the others.
    let mut done = Value::Null;
    for _ in 0..500 {
        done = modern_request(
            server.addr,
            Some(TOKEN_A),
            "tasks/get",
            json!({"taskId": task}),
        )
        .await;
        if done["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["result"]["content"],
        json!([{"type": "text", "text": "rested"}]),
        "{done}"
    );
    server.stop().await;
}

/// The published extension over Streamable HTTP: `tasks/get`, `tasks/update` and
/// `tasks/cancel` carry the task's id in `Mcp-Name` (intermediaries route on it), and a
/// request whose header is missing or names another task is refused (-32020) before
/// anything acts on it: the task is untouched.
#[tokio::test]
async fn modern_http_task_requests_mirror_the_task_id_in_mcp_name() {
    let spinning: Arc<Spinning> = Arc::default();
    let server = start_tasks_with(stateful().with_tokens(Some(tokens())), &spinning).await;
    let created = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "spin", "arguments": {}}),
    )
    .await;
    let task = created_id(&created);
    let bearer = format!("Bearer {TOKEN_A}");
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": {
            "taskId": task, "inputResponses": {}, "_meta": modern_meta()}})
        .to_string();
        for (name, why) in [
            (None, "Header mismatch: no Mcp-Name header; send the task's id in Mcp-Name"),
            (
                Some("00000000-0000-4000-8000-000000000000"),
                "Header mismatch: Mcp-Name header value \"00000000-0000-4000-8000-000000000000\" does not match body value",
            ),
        ] {
            let mut headers = vec![
                (PROTOCOL_HEADER, "2026-07-28"),
                ("mcp-method", method),
                ("authorization", bearer.as_str()),
            ];
            if let Some(name) = name {
                headers.push(("mcp-name", name));
            }
            let reply = post(server.addr, &headers, &body).await;
            let answer: Value = serde_json::from_str(reply.body.trim())
                .unwrap_or_else(|_| panic!("not JSON: {}", reply.body));
            assert_eq!(answer["error"]["code"], -32020, "{method}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.starts_with(why), "{method}: {message}");
        }
    }
    let got = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tasks/get",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    assert_eq!(spinning.0.load(Ordering::SeqCst), 1);
    modern_request(
        server.addr,
        Some(TOKEN_A),
        "tasks/cancel",
        json!({"taskId": task}),
    )
    .await;
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    server.stop().await;
}

/// A task started by a 2026-07-28 request goes on when that request's connection
/// closes: a later request cancels it, and the call stops.
#[tokio::test]
async fn a_modern_http_task_outlives_its_request_and_is_cancelled_later() {
    let spinning: Arc<Spinning> = Arc::default();
    let server = start_tasks_with(stateful().with_tokens(Some(tokens())), &spinning).await;
    let created = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "spin", "arguments": {}}),
    )
    .await;
    let task = created_id(&created);
    until("the task's call runs", || {
        spinning.0.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let got = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tasks/get",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    let cancelled = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tasks/cancel",
        json!({"taskId": task}),
    )
    .await;
    // Acknowledged empty, as the published extension has it.
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    assert_eq!(cancelled["result"].get("status"), None, "{cancelled}");
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    let got = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tasks/get",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    server.stop().await;
}

/// 10,000 task creations from one token without a session hold at most
/// `--max-tasks-per-session` places (per caller); another token still gets its own.
#[tokio::test]
async fn ten_thousand_modern_http_task_creations_are_bounded_per_caller() {
    let spinning: Arc<Spinning> = Arc::default();
    let limits = McpLimits::default()
        .with_max_tasks_per_session(NonZeroUsize::new(4).unwrap())
        .with_max_tasks(NonZeroUsize::new(6).unwrap());
    let server = start_tasks_with(
        stateful().with_tokens(Some(tokens())).with_limits(limits),
        &spinning,
    )
    .await;
    let mut refused = 0;
    // Over a few connections' worth of requests, each alone (as a client would send).
    for round in 0..10_000u64 {
        let body = json!({"jsonrpc": "2.0", "id": round, "method": "tools/call", "params": {
            "name": "spin", "arguments": {}, "_meta": modern_meta()}})
        .to_string();
        let bearer = format!("Bearer {TOKEN_A}");
        let headers = [
            (PROTOCOL_HEADER, "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "spin"),
            ("authorization", bearer.as_str()),
        ];
        let reply = post(server.addr, &headers, &body).await;
        let answer: Value = serde_json::from_str(reply.body.trim()).unwrap();
        if round < 4 {
            created_id(&answer);
        } else {
            assert_eq!(answer["error"]["code"], -32000, "{answer}");
            assert_eq!(
                answer["error"]["message"],
                "Task refused: this caller already holds 4 tasks, the most allowed; cancel one (tasks/cancel) or wait until one expires"
            );
            refused += 1;
        }
    }
    assert_eq!(refused, 9_996);
    assert_eq!(server.app.sessions.tasks().counts().places, 4);
    // Bob is not crowded out by Alice, up to the server's bound.
    for n in 0..3 {
        let answer = modern_request(
            server.addr,
            Some(TOKEN_B),
            "tools/call",
            json!({"name": "spin", "arguments": {}}),
        )
        .await;
        if n < 2 {
            created_id(&answer);
        } else {
            assert_eq!(
                answer["error"]["message"],
                "Task refused: the server already holds 6 tasks, the most allowed; try again later, or run the tool without a task"
            );
        }
    }
    assert_eq!(server.app.sessions.tasks().counts().places, 6);
    server.stop().await;
}

/// A stateless server serves 2025-11-25 tasks the same way: bound to the token.
#[tokio::test]
async fn stateless_legacy_tasks_belong_to_their_token() {
    let spinning = Arc::default();
    let server =
        start_tasks_with(HttpConfig::new(None).with_tokens(Some(tokens())), &spinning).await;
    let init = stateless_request(server.addr, TOKEN_A, INIT_TASKS).await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"],
        json!({"tools": {"call": {}}}),
        "{init}"
    );
    let created = stateless_request(server.addr, TOKEN_A, &task_call(2, "nap")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let answer = stateless_request(server.addr, TOKEN_B, &on_task(method, 3, &task)).await;
        assert_eq!(answer, no_such_task_for(3), "{method}");
    }
    let listed = stateless_request(
        server.addr,
        TOKEN_B,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/list"}"#,
    )
    .await;
    assert_eq!(listed["result"], json!({"tasks": []}));
    let done = stateless_request(server.addr, TOKEN_A, &on_task("tasks/result", 5, &task)).await;
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "rested"}]),
        "{done}"
    );
    server.stop().await;
}

/// A 2025-11-25 session's task status changes come on its GET stream, as the task is
/// then (`tasks/get`'s answer).
#[tokio::test]
async fn task_status_comes_on_the_sessions_get_stream() {
    let spinning = Arc::default();
    let server = start_tasks(&spinning).await;
    let session = server.session().await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(MCP_PATH)
        .header("host", format!("127.0.0.1:{}", server.addr.port()))
        .header("accept", "text/event-stream")
        .header(SESSION_HEADER, &session)
        .header(PROTOCOL_HEADER, "2025-11-25")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let held = server.app.sessions.find(&session, None).await.unwrap();
    until("the stream is attached", || held.notifier().is_connected()).await;
    let created = server.request(&session, &task_call(2, "nap")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let frame = loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("a status in time")
            .unwrap()
            .unwrap();
        let data = frame.into_data().unwrap();
        let text = String::from_utf8(data.to_vec()).unwrap();
        if let Some(json) = text.lines().find_map(|line| line.strip_prefix("data: ")) {
            break serde_json::from_str::<Value>(json).unwrap();
        }
    };
    let got = server
        .request(&session, &on_task("tasks/get", 3, &task))
        .await;
    assert_eq!(got["result"]["status"], "completed");
    assert_eq!(
        frame,
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": got["result"]})
    );
    server.stop().await;
}

/// A 2025-11-25 task whose call asks its user, over HTTP without a GET stream: the task
/// is `input_required`, the question comes on the event stream of the client's
/// `tasks/result`, and the answer (POSTed as for any question) lets the call go on.
/// `confirm_me`: asks "Go on?" and answers how the user answered (optional as a task).
fn asking_registry() -> Arc<Registry> {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("confirm_me", "Asks first.", json!({"type": "object"}))
                .with_task_support(toolhost::registry::TaskSupport::Optional),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                let Some(asker) = ctx.interaction() else {
                    return Ok(ToolResult::new("nobody to ask"));
                };
                match asker.confirm("Go on?".to_owned()).await {
                    Ok(true) => Ok(ToolResult::new("confirmed")),
                    Ok(false) => Ok(ToolResult::new("declined")),
                    Err(err) => Ok(ToolResult::new(format!("not asked: {err}"))),
                }
            },
        )
        .unwrap();
    Arc::new(registry)
}

#[tokio::test]
async fn a_task_asks_its_user_on_the_tasks_result_stream() {
    let registry = asking_registry();
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        stateful(),
        Registries::shared(registry),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;
    let session = post(addr, &[], init).await.session();
    let headers = [
        (SESSION_HEADER, session.as_str()),
        (PROTOCOL_HEADER, "2025-11-25"),
    ];
    let data = |body: &str| -> Value {
        let body = body.trim();
        let json = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or(body);
        serde_json::from_str(json).unwrap()
    };
    let created = data(&post(addr, &headers, &task_call(2, "confirm_me")).await.body);
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = Instant::now();
    loop {
        let got = data(
            &post(addr, &headers, &on_task("tasks/get", 3, &task))
                .await
                .body,
        );
        if got["result"]["status"] == "input_required" {
            break;
        }
        assert_eq!(got["result"]["status"], "working", "{got}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never input_required"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // tasks/result, read as it streams.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post(MCP_PATH)
        .header("host", format!("127.0.0.1:{}", addr.port()))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(SESSION_HEADER, &session)
        .header(PROTOCOL_HEADER, "2025-11-25")
        .body(Full::new(Bytes::from(on_task("tasks/result", 4, &task))))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let mut events = Vec::<Value>::new();
    let mut next_event = async || -> Value {
        loop {
            if !events.is_empty() {
                return events.remove(0);
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                .await
                .expect("an event in time")
                .unwrap()
                .unwrap();
            let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
            events.extend(
                text.lines()
                    .filter_map(|line| line.strip_prefix("data: "))
                    .map(|json| serde_json::from_str::<Value>(json).unwrap()),
            );
        }
    };
    let question = next_event().await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Go on?");
    assert_eq!(
        question["params"]["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": task}})
    );
    let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {}}}).to_string();
    assert_eq!(
        post(addr, &headers, &answer).await.status,
        StatusCode::ACCEPTED
    );
    let result = next_event().await;
    assert_eq!(result["id"], 4, "{result}");
    assert_eq!(
        result["result"]["content"],
        json!([{"type": "text", "text": "confirmed"}])
    );
    let got = data(
        &post(addr, &headers, &on_task("tasks/get", 5, &task))
            .await
            .body,
    );
    assert_eq!(got["result"]["status"], "completed");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), done)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Another session cannot take a task's question: its tasks/result of the task is an
/// unknown id (no question on its stream), and its answer to the question's id is
/// ignored; the task still waits for its own user.
#[tokio::test]
async fn another_session_neither_sees_nor_answers_a_tasks_question() {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        stateful(),
        Registries::shared(asking_registry()),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (alice, mallory) = (
        post(addr, &[], init).await.session(),
        post(addr, &[], init).await.session(),
    );
    let on = |session: &str| {
        [
            (SESSION_HEADER, session.to_owned()),
            (PROTOCOL_HEADER, "2025-11-25".to_owned()),
        ]
    };
    let ask = async |session: &str, body: &str| -> (StatusCode, String) {
        let headers = on(session);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let reply = post(addr, &headers, body).await;
        (reply.status, reply.body)
    };
    let data = |body: &str| -> Value {
        let body = body.trim();
        let json = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or(body);
        serde_json::from_str(json).unwrap()
    };
    let created = data(&ask(&alice, &task_call(2, "confirm_me")).await.1);
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = Instant::now();
    while data(&ask(&alice, &on_task("tasks/get", 3, &task)).await.1)["result"]["status"]
        != "input_required"
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never input_required"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Mallory's tasks/result: the unknown-id answer, as plain JSON (no stream, no question).
    let (status, body) = ask(&mallory, &on_task("tasks/result", 4, &task)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(data(&body), no_such_task_for(4), "{body}");
    assert!(!body.contains("elicitation/create"), "{body}");
    // Her answer to the id the question would have (the session's first): ignored.
    for id in ["toolhost-ask-0", "1", "0"] {
        let forged =
            json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {}}})
                .to_string();
        assert_eq!(ask(&mallory, &forged).await.0, StatusCode::ACCEPTED);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let got = data(&ask(&alice, &on_task("tasks/get", 5, &task)).await.1);
    assert_eq!(got["result"]["status"], "input_required", "{got}");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), done)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A 2026-07-28 task asking its user over HTTP without a session, as the published
/// extension has it: `tasks/get` shows the question (`inputRequests`), the token that
/// started the task answers it with `tasks/update` and the call goes on. Hostile:
/// another token's update is answered as an unknown id and answers nothing.
#[tokio::test]
async fn a_modern_http_task_asks_through_input_requests() {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        stateful().with_tokens(Some(tokens())),
        Registries::shared(asking_registry()),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({});
    let request = |token: &'static str, method: &'static str, params: Value| {
        modern_request_with(addr, Some(token), method, params, meta.clone())
    };
    let created = request(
        TOKEN_A,
        "tools/call",
        json!({"name": "confirm_me", "arguments": {}}),
    )
    .await;
    let task = created_id(&created);
    let mut waiting = Value::Null;
    for _ in 0..500 {
        waiting = request(TOKEN_A, "tasks/get", json!({"taskId": task})).await;
        if waiting["result"]["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting["result"]["status"], "input_required", "{waiting}");
    let asked = &waiting["result"]["inputRequests"]["q0"];
    assert_eq!(asked["method"], "elicitation/create", "{waiting}");
    assert_eq!(asked["params"]["message"], "Go on?");
    let accept = json!({"taskId": task, "inputResponses": {"q0": {"action": "accept"}}});
    let foreign = request(TOKEN_B, "tasks/update", accept.clone()).await;
    assert_eq!(foreign, no_such_published_task_for(7));
    let still = request(TOKEN_A, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(
        still["result"]["inputRequests"],
        waiting["result"]["inputRequests"]
    );
    let acked = request(TOKEN_A, "tasks/update", accept).await;
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let mut ended = Value::Null;
    for _ in 0..500 {
        ended = request(TOKEN_A, "tasks/get", json!({"taskId": task})).await;
        if ended["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        ended["result"]["result"]["content"][0]["text"], "confirmed",
        "{ended}"
    );
    let _ = stop.send(());
    done.await.unwrap().unwrap();
}
