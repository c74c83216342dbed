//! Whose a task is over HTTP (a session's, or a token's without one), and that it
//! outlives the requests and connections of its client.

use super::*;

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
    let task = start_task(server.addr, TOKEN_A, "nap").await;
    // The request that created it is over: a later one from the same token finds it.
    let got = get(server.addr, TOKEN_A, &task).await;
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
    let unnamed = start_task(server.addr, "token-cccccccccccccccc", "echo").await;
    let foreign = get(server.addr, "token-dddddddddddddddd", &unnamed).await;
    assert_eq!(foreign, no_such_published_task_for(7));
    // Alice's result comes inline, the task untouched by the others.
    let mut done = Value::Null;
    for _ in 0..500 {
        done = get(server.addr, TOKEN_A, &task).await;
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
    let task = start_task(server.addr, TOKEN_A, "spin").await;
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
    let got = get(server.addr, TOKEN_A, &task).await;
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
    let task = start_task(server.addr, TOKEN_A, "spin").await;
    until("the task's call runs", || {
        spinning.0.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let got = get(server.addr, TOKEN_A, &task).await;
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
    let got = get(server.addr, TOKEN_A, &task).await;
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
