//! A task's status changes and questions over HTTP: on the session's GET stream, a
//! `tasks/result` stream, or the published extension's `inputRequests`.

use super::*;

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
    let held = server
        .app
        .sessions
        .find(&session, &crate::http::caller::Caller::default(), None)
        .await
        .unwrap();
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
