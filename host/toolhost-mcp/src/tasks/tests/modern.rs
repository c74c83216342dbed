//! 2026-07-28's tasks as the published extension has them (ext-tasks e434597).

use super::*;

/// The task registry (its spinning counter) and a store of default limits.
fn task_set_up() -> (Arc<Spinning>, Arc<Registry>, Arc<TaskStore>) {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    (spinning, registry, store)
}

/// Calls `tool` with `arguments` as a task (the client declares tasks), request `id`:
/// the task's id.
fn start_task(session: &Session, id: u64, tool: &str, arguments: Value) -> String {
    let params = json!({"name": tool, "arguments": arguments});
    created_id(&reply(session, &modern(DECLARED, id, "tools/call", params)))
}

/// The published extension (ext-tasks e434597): a client declaring it in its request's
/// capabilities gets a task (`resultType: "task"`, the `Task` fields flat, `ttlMs`,
/// `pollIntervalMs`) without asking for one in the params; `tasks/get` gives the
/// result inline.
#[tokio::test]
async fn modern_requests_follow_the_published_tasks_extension() {
    let (_, registry, store) = task_set_up();
    let session = modern_session(&registry, &store, "s");
    let discover = reply(&session, &modern(DECLARED, 1, "server/discover", json!({})));
    assert_eq!(
        discover["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}})
    );
    let created = reply(
        &session,
        &modern(
            DECLARED,
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"m": 1}}),
        ),
    );
    let id = created_id(&created);
    let result = &created["result"];
    let mut fields: Vec<&str> = result
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "_meta",
            "createdAt",
            "lastUpdatedAt",
            "pollIntervalMs",
            "resultType",
            "status",
            "taskId",
            "ttlMs"
        ],
        "{created}"
    );
    assert_eq!(result["status"], "working");
    assert_eq!(result["ttlMs"], 3_600_000);
    assert_eq!(
        result["pollIntervalMs"],
        crate::limits::TASK_POLL_INTERVAL_MS
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"],
        crate::protocol::server_info()
    );
    let got = until_status(&session, &id, "completed").await;
    assert_eq!(got["result"]["resultType"], "complete");
    assert_eq!(got["result"]["taskId"], id);
    assert_eq!(
        got["result"]["result"],
        json!({"content": [{"type": "text", "text": "{\"m\":1}"}], "isError": false})
    );
    assert_eq!(got["result"].get("ttl"), None);
    assert_eq!(got["result"].get("pollInterval"), None);
    assert_eq!(got["result"].get("error"), None);
    // A tool that does not run as a task runs plain, declared or not.
    let plain = reply_or_run(
        &session,
        &modern(
            DECLARED,
            3,
            "tools/call",
            json!({"name": "plain", "arguments": {}}),
        ),
    )
    .await;
    assert_eq!(plain["result"]["resultType"], "complete");
    assert_eq!(plain["result"]["content"][0]["text"], "plain");
    // 2026-07-28's Tool has no `execution`.
    let list = reply(&session, &modern(DECLARED, 4, "tools/list", json!({})));
    assert_eq!(list["result"]["tools"][0].get("execution"), None);
    // The 2025-11-25 `task` param asks nothing of 2026-07-28: no task without the
    // extension declared.
    let undeclared = reply_or_run(
        &session,
        &modern(
            UNDECLARED,
            5,
            "tools/call",
            json!({"name": "echo", "arguments": {"m": 2}, "task": {}}),
        ),
    )
    .await;
    assert_eq!(undeclared["result"]["resultType"], "complete");
    assert_eq!(undeclared["result"]["content"][0]["text"], "{\"m\":2}");
    assert_eq!(store.counts().tasks, 1);
}

/// The extension keeps `failed` for JSON-RPC errors: a tool's error is a completed task
/// whose result says `isError: true`.
#[tokio::test]
async fn a_modern_tool_error_is_a_completed_task_with_its_error_result() {
    let (_, registry, store) = task_set_up();
    let session = modern_session(&registry, &store, "s");
    let id = start_task(&session, 1, "fails", json!({}));
    let got = until_status(&session, &id, "completed").await;
    assert_eq!(got["result"]["result"]["isError"], true, "{got}");
    assert!(
        got["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("disk on fire"),
        "{got}"
    );
    assert_eq!(got["result"].get("error"), None);
    // Its place is given back as a failed task's is (the store's bounds are unchanged).
    assert_eq!(store.counts().places, 0);
}

/// `tasks/cancel` and `tasks/update` are acknowledged with an empty result; a
/// cancelled task has no result; cancelling an ended task is acknowledged and changes
/// nothing.
#[tokio::test]
async fn modern_cancel_and_update_are_acknowledged_empty() {
    let (spinning, registry, store) = task_set_up();
    let session = modern_session(&registry, &store, "s");
    let id = start_task(&session, 1, "spin", json!({}));
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 1).await;
    let server_info = json!({"io.modelcontextprotocol/serverInfo": crate::protocol::server_info()});
    let updated = reply(
        &session,
        &modern(
            DECLARED,
            2,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"name": {"action": "accept", "content": {"name": "x"}}}}),
        ),
    );
    assert_eq!(
        updated["result"],
        json!({"resultType": "complete", "_meta": server_info})
    );
    assert_eq!(
        reply(
            &session,
            &modern(DECLARED, 3, "tasks/get", json!({"taskId": id}))
        )["result"]["status"],
        "working"
    );
    let cancelled = reply(
        &session,
        &modern(DECLARED, 4, "tasks/cancel", json!({"taskId": id})),
    );
    assert_eq!(
        cancelled["result"],
        json!({"resultType": "complete", "_meta": server_info})
    );
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    let got = reply(
        &session,
        &modern(DECLARED, 5, "tasks/get", json!({"taskId": id})),
    );
    assert_eq!(got["result"]["status"], "cancelled");
    assert_eq!(got["result"].get("result"), None);
    assert_eq!(store.counts().places, 0);
    let again = reply(
        &session,
        &modern(DECLARED, 6, "tasks/cancel", json!({"taskId": id})),
    );
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    let echo = start_task(&session, 7, "echo", json!({}));
    let done = until_status(&session, &echo, "completed").await;
    let late = reply(
        &session,
        &modern(DECLARED, 8, "tasks/cancel", json!({"taskId": echo})),
    );
    assert_eq!(late["result"]["resultType"], "complete", "{late}");
    let after = until_status(&session, &echo, "completed").await;
    assert_eq!(after["result"]["result"], done["result"]["result"]);
}

/// `tasks/result` and `tasks/list` are not part of the published extension: `-32601`
/// naming what to use instead. 2025-11-25 knows no `tasks/update`.
#[tokio::test]
async fn methods_the_extension_removed_are_not_found() {
    let (_, registry, store) = task_set_up();
    let session = modern_session(&registry, &store, "s");
    let id = start_task(&session, 1, "echo", json!({}));
    let result = reply(
        &session,
        &modern(DECLARED, 2, "tasks/result", json!({"taskId": id})),
    );
    assert_eq!(result["error"]["code"], -32601);
    assert_eq!(
        result["error"]["message"],
        "Method not found: tasks/result is not part of the tasks extension (io.modelcontextprotocol/tasks) of protocol version 2026-07-28; tasks/get gives a task's result inline (\"result\") once its status is completed"
    );
    let list = reply(&session, &modern(DECLARED, 3, "tasks/list", json!({})));
    assert_eq!(list["error"]["code"], -32601);
    assert_eq!(
        list["error"]["message"],
        "Method not found: tasks/list is not part of the tasks extension (io.modelcontextprotocol/tasks) of protocol version 2026-07-28; keep the taskId of the tools/call result whose resultType is \"task\" and ask tasks/get"
    );
    // Undeclared, they are just as absent.
    let undeclared = reply(&session, &modern(UNDECLARED, 4, "tasks/list", json!({})));
    assert_eq!(undeclared["error"]["code"], -32601);
    let legacy = session_with(&registry, &store, "old");
    let update = reply(&legacy, &on_task("tasks/update", 5, &id));
    assert_eq!(update["error"]["code"], -32601);
    assert!(
        update["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Method not found: tasks/update; this server answers"),
        "{update}"
    );
}

/// A 2026-07-28 request using tasks without declaring the extension is refused with
/// `-32021` naming it; a tool that runs only as a task is refused to such a client.
#[tokio::test]
async fn modern_task_requests_without_the_extension_are_refused() {
    let (_, registry, store) = task_set_up();
    let session = modern_session(&registry, &store, "s");
    let id = start_task(&session, 1, "only_task", json!({}));
    let required =
        json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    for (n, method) in ["tasks/get", "tasks/update", "tasks/cancel"]
        .iter()
        .enumerate()
    {
        let refused = reply(
            &session,
            &modern(
                UNDECLARED,
                2 + n as u64,
                method,
                json!({"taskId": id, "inputResponses": {}}),
            ),
        );
        assert_eq!(refused["error"]["code"], -32021, "{method}: {refused}");
        assert_eq!(refused["error"]["data"], required, "{method}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!(
                "Missing required client capability: {method} is a method of the tasks extension"
            )),
            "{refused}"
        );
    }
    let only = reply(
        &session,
        &modern(
            UNDECLARED,
            9,
            "tools/call",
            json!({"name": "only_task", "arguments": {}}),
        ),
    );
    assert_eq!(only["error"]["code"], -32021, "{only}");
    assert_eq!(only["error"]["data"], required);
    assert_eq!(store.counts().tasks, 1);
    // The task itself went on, untouched.
    let got = until_status(&session, &id, "completed").await;
    assert_eq!(got["result"]["result"]["content"][0]["text"], "done");
}

/// Hostile: another owner's task is answered exactly as an unknown id, by every
/// method, and is left as it was.
#[tokio::test]
async fn another_owner_cannot_see_update_or_cancel_a_modern_task() {
    let (spinning, registry, store) = task_set_up();
    let owner = modern_session(&registry, &store, "a");
    let other = modern_session(&registry, &store, "b");
    let id = start_task(&owner, 1, "spin", json!({}));
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 1).await;
    let unknown = "00000000-0000-4000-8000-000000000000";
    for (n, method) in ["tasks/get", "tasks/update", "tasks/cancel"]
        .iter()
        .enumerate()
    {
        let params =
            |task: &str| json!({"taskId": task, "inputResponses": {"q": {"action": "accept"}}});
        let foreign = reply(
            &other,
            &modern(DECLARED, 10 + n as u64, method, params(&id)),
        );
        let none = reply(
            &other,
            &modern(DECLARED, 10 + n as u64, method, params(unknown)),
        );
        assert_eq!(foreign, none, "{method}");
        assert_eq!(foreign["error"]["code"], -32602);
        assert_eq!(
            foreign["error"]["message"],
            crate::tasks::NO_SUCH_TASK_PUBLISHED
        );
    }
    let got = reply(
        &owner,
        &modern(DECLARED, 20, "tasks/get", json!({"taskId": id})),
    );
    assert_eq!(got["result"]["status"], "working");
    assert_eq!(spinning.0.load(Ordering::SeqCst), 1);
    reply(
        &owner,
        &modern(DECLARED, 21, "tasks/cancel", json!({"taskId": id})),
    );
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
}

/// Hostile: a forged `tasks/update` (no answers object, a wrong type, an id too long to
/// be one of ours) is refused alike whoever's the task; a huge one for keys this task
/// never asked is acknowledged and keeps nothing; an update of a task that is not
/// waiting (working, completed) changes nothing.
#[tokio::test]
async fn forged_oversized_and_unasked_updates_change_nothing() {
    let (_, registry, store) = task_set_up();
    let session = modern_session(&registry, &store, "s");
    let other = modern_session(&registry, &store, "t");
    let id = start_task(&session, 1, "echo", json!({"k": 1}));
    let done = until_status(&session, &id, "completed").await;
    let counts = store.counts();
    for (responses, got) in [
        (None, "nothing"),
        (Some(json!("accept")), "string"),
        (Some(json!([{"action": "accept"}])), "array"),
        (Some(Value::Null), "null"),
    ] {
        let mut params = json!({"taskId": id});
        if let Some(responses) = responses {
            params["inputResponses"] = responses;
        }
        let mine = reply(
            &session,
            &modern(DECLARED, 2, "tasks/update", params.clone()),
        );
        let theirs = reply(&other, &modern(DECLARED, 2, "tasks/update", params));
        assert_eq!(mine, theirs, "{got}");
        assert_eq!(mine["error"]["code"], -32602);
        assert_eq!(
            mine["error"]["message"],
            format!("Invalid params: tasks/update needs \"inputResponses\", an object of answers keyed as the task's inputRequests; got {got}")
        );
    }
    let long = "a".repeat(1000);
    let forged = reply(
        &session,
        &modern(
            DECLARED,
            3,
            "tasks/update",
            json!({"taskId": long, "inputResponses": {}}),
        ),
    );
    assert_eq!(
        forged["error"]["message"],
        crate::tasks::NO_SUCH_TASK_PUBLISHED
    );
    // 10,000 answers of 1 KB to questions never asked.
    let huge: serde_json::Map<String, Value> = (0..10_000)
        .map(|n| {
            (
                format!("k{n}"),
                json!({"action": "accept", "content": {"v": "x".repeat(1000)}}),
            )
        })
        .collect();
    let acked = reply(
        &session,
        &modern(
            DECLARED,
            4,
            "tasks/update",
            json!({"taskId": id, "inputResponses": huge}),
        ),
    );
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    assert_eq!(store.counts(), counts);
    let after = reply(
        &session,
        &modern(DECLARED, 5, "tasks/get", json!({"taskId": id})),
    );
    assert_eq!(after["result"]["status"], "completed");
    assert_eq!(after["result"]["result"], done["result"]["result"]);
    assert_eq!(
        after["result"]["lastUpdatedAt"],
        done["result"]["lastUpdatedAt"]
    );
    assert_eq!(after["result"].get("inputRequests"), None);
}

/// A 2026-07-28 task's question, as the published extension has it: `input_required`
/// with `inputRequests` (`q0`: the `elicitation/create`) in `tasks/get`, answered by
/// `tasks/update`; the call goes on with the answer. Responses to other keys, and a
/// second response to an answered key, are ignored. Hostile: another owner's update is
/// answered as an unknown id and answers nothing.
#[tokio::test]
async fn a_modern_task_asks_through_input_requests_and_tasks_update() {
    let registry = asking_registry();
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let other = modern_session(&registry, &store, "mallory");
    let id = created_id(&reply(
        &session,
        &modern(
            ASKS,
            1,
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
        ),
    ));
    let waiting = until_status(&session, &id, "input_required").await;
    let question = json!({"q0": {"method": "elicitation/create", "params": {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    }}});
    assert_eq!(waiting["result"]["inputRequests"], question, "{waiting}");
    let update = |session: &Session, n: u64, responses: Value| {
        reply(
            session,
            &modern(
                ASKS,
                n,
                "tasks/update",
                json!({"taskId": id, "inputResponses": responses}),
            ),
        )
    };
    let forged = update(
        &other,
        2,
        json!({"q0": {"action": "accept", "content": {"name": "Mallory"}}}),
    );
    assert_eq!(
        forged["error"]["message"],
        crate::tasks::NO_SUCH_TASK_PUBLISHED
    );
    let elsewhere = update(
        &session,
        3,
        json!({"q1": {"action": "accept", "content": {"name": "Nobody"}}}),
    );
    assert_eq!(elsewhere["result"]["resultType"], "complete");
    let still = reply(
        &session,
        &modern(ASKS, 4, "tasks/get", json!({"taskId": id})),
    );
    assert_eq!(still["result"]["status"], "input_required");
    assert_eq!(still["result"]["inputRequests"], question);
    let answered = update(
        &session,
        5,
        json!({"q0": {"action": "accept", "content": {"name": "Luca"}}}),
    );
    assert_eq!(answered["result"]["resultType"], "complete");
    let done = until_status(&session, &id, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "Hello, Luca!"
    );
    assert_eq!(done["result"].get("inputRequests"), None);
    let again = update(
        &session,
        6,
        json!({"q0": {"action": "accept", "content": {"name": "Again"}}}),
    );
    assert_eq!(again["result"]["resultType"], "complete");
    let after = reply(
        &session,
        &modern(ASKS, 7, "tasks/get", json!({"taskId": id})),
    );
    assert_eq!(after["result"]["result"], done["result"]["result"]);
}

/// Hostile: an answer that does not match the question's schema, or one over the answer
/// limit, is refused to the call (its task completes with the error result), never
/// handed to the tool; a client that did not declare elicitation is not asked.
#[tokio::test]
async fn a_modern_task_refuses_forged_answers_and_asks_only_declaring_clients() {
    let registry = asking_registry();
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    for (n, answer, why) in [
        (
            1,
            json!({"action": "accept", "content": {"name": 5}}),
            "does not match the question's schema",
        ),
        (
            2,
            json!({"action": "accept", "content": {"name": "x".repeat(70_000)}}),
            "over the 65536-byte limit for one answer",
        ),
        (
            3,
            json!({"action": "maybe"}),
            "no \"action\" of accept, decline or cancel",
        ),
    ] {
        let id = created_id(&reply(
            &session,
            &modern(
                ASKS,
                n,
                "tools/call",
                json!({"name": "greet", "arguments": {}}),
            ),
        ));
        until_status(&session, &id, "input_required").await;
        let acked = reply(
            &session,
            &modern(
                ASKS,
                10 + n,
                "tasks/update",
                json!({"taskId": id, "inputResponses": {"q0": answer}}),
            ),
        );
        assert_eq!(acked["result"]["resultType"], "complete");
        let done = until_status(&session, &id, "completed").await;
        assert_eq!(done["result"]["result"]["isError"], true, "{done}");
        let text = done["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap();
        assert!(text.contains(why), "{text}");
    }
    let id = start_task(&session, 20, "greet", json!({}));
    let done = until_status(&session, &id, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "nobody to ask"
    );
    assert_eq!(
        store.counts().places,
        1,
        "the one completed task keeps its result"
    );
}
