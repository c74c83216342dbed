//! 2025-11-25's tasks: created, fetched, cancelled, bounded, expired.

use super::*;

#[tokio::test]
async fn a_task_runs_and_its_result_is_fetched() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = session_with(&registry, &store, "s");
    let created = start(&session, 1, "echo");
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 3_600_000);
    assert_eq!(task["pollInterval"], 1000);
    let id = task_id(&created);
    assert_eq!(id.len(), 36, "{id}");
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    // tasks/result waits for the end, and answers the call's own result.
    let result = answer(&session, &on_task("tasks/result", 2, &id)).await;
    assert_eq!(
        result["result"],
        json!({
            "content": [{"type": "text", "text": "{\"n\":1}"}],
            "isError": false,
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}},
        })
    );
    let got = reply(&session, &on_task("tasks/get", 3, &id));
    assert_eq!(got["result"]["status"], "completed");
    let listed = reply(
        &session,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/list"}"#,
    );
    assert_eq!(listed["result"]["tasks"][0]["taskId"], json!(id));
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 1);
    // A tool error: failed, and the result a plain call gives.
    let failed = task_id(&start(&session, 5, "fails"));
    let result = answer(&session, &on_task("tasks/result", 6, &failed)).await;
    assert_eq!(result["result"]["isError"], true);
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("disk on fire"),
        "{result}"
    );
    let got = reply(&session, &on_task("tasks/get", 7, &failed));
    assert_eq!(got["result"]["status"], "failed");
    assert!(got["result"]["statusMessage"]
        .as_str()
        .unwrap()
        .contains("disk on fire"));
}

#[tokio::test]
async fn task_support_is_enforced_as_mcp_prescribes() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = session_with(&registry, &store, "s");
    let refused = start(&session, 1, "plain");
    assert_eq!(refused["error"]["code"], -32601);
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("tool plain does not run as a task"));
    let plain_call = reply(
        &session,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"only_task"}}"#,
    );
    assert_eq!(plain_call["error"]["code"], -32601);
    assert!(plain_call["error"]["message"]
        .as_str()
        .unwrap()
        .contains("tool only_task runs only as a task"));
    assert_eq!(store.counts().tasks, 0);
    // tools/list gives taskSupport in 2025-11-25, and only for tools that allow tasks.
    let list = reply(
        &session,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    );
    let support: Vec<Value> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["execution"]["taskSupport"].clone())
        .collect();
    assert_eq!(
        support,
        [
            json!("optional"),
            json!("optional"),
            json!("optional"),
            json!("optional"),
            Value::Null,
            json!("required"),
            json!("optional")
        ]
    );
}

#[tokio::test]
async fn ten_thousand_task_creations_are_bounded() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&limits(64, 100)));
    let a = session_with(&registry, &store, "a");
    let b = session_with(&registry, &store, "b");
    let mut created = 0;
    for n in 0..10_000u64 {
        let session = if n < 5000 { &a } else { &b };
        let answer = start(session, n + 1, "spin");
        if answer["result"]["task"].is_object() {
            created += 1;
        } else {
            assert_eq!(answer["error"]["code"], -32000, "{answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with(
                    "Task refused: this session already holds 64 tasks, the most allowed"
                ) || message.starts_with(
                    "Task refused: the server already holds 100 tasks, the most allowed"
                ),
                "{message}"
            );
        }
    }
    // 64 for one session, the 36 left of the server's 100 for the other.
    assert_eq!(created, 100);
    assert_eq!(store.counts().places, 100);
    assert_eq!(store.counts().tasks, 100);
    until("100 calls spinning", || {
        spinning.0.load(Ordering::SeqCst) == 100
    })
    .await;
    // Still serving: a session's own list, and the end of a session stops its tasks.
    let listed = reply(&a, r#"{"jsonrpc":"2.0","id":1,"method":"tasks/list"}"#);
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 64);
    a.close();
    b.close();
    until("every call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    assert_eq!(store.counts().places, 0);
}

#[tokio::test]
async fn a_task_spinning_past_its_time_limit_fails_and_frees_its_place() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(
        &limits(1, 1).with_task_timeout(Duration::from_millis(200)),
    ));
    let session = session_with(&registry, &store, "s");
    let id = task_id(&start(&session, 1, "spin"));
    let full = start(&session, 2, "spin");
    assert_eq!(full["error"]["code"], -32000, "{full}");
    let result = answer(&session, &on_task("tasks/result", 3, &id)).await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "spin: the task ran past its time limit of 200ms and was stopped; ask for less work per task, or have the operator raise --task-timeout"
    );
    let got = reply(&session, &on_task("tasks/get", 4, &id));
    assert_eq!(got["result"]["status"], "failed");
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    assert_eq!(store.counts().places, 0);
    // Its place is free: another task starts.
    let again = start(&session, 5, "echo");
    assert!(again["result"]["task"].is_object(), "{again}");
}

#[tokio::test]
async fn cancel_stops_the_call_and_frees_the_place_at_once() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&limits(1, 1)));
    let session = session_with(&registry, &store, "s");
    let id = task_id(&start(&session, 1, "spin"));
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 1).await;
    // A waiting tasks/result learns of the cancellation.
    let waiting = {
        let session = session.clone();
        let line = on_task("tasks/result", 2, &id);
        tokio::spawn(async move { answer(&session, &line).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cancelled = reply(&session, &on_task("tasks/cancel", 3, &id));
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    // The place is free before the call has even wound down.
    let next = start(&session, 4, "echo");
    assert!(next["result"]["task"].is_object(), "{next}");
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    let waited = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(waited["error"]["code"], -32602, "{waited}");
    assert!(waited["error"]["message"]
        .as_str()
        .unwrap()
        .contains("the task was cancelled"));
    let again = reply(&session, &on_task("tasks/cancel", 5, &id));
    assert_eq!(
        again["error"]["message"],
        "Invalid params: the task has already ended (cancelled); only a working task can be cancelled"
    );
    assert_eq!(
        reply(&session, &on_task("tasks/get", 6, &id))["result"]["status"],
        "cancelled"
    );
}

#[tokio::test]
async fn forged_huge_and_foreign_task_ids_are_one_answer() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let mine = session_with(&registry, &store, "mine");
    let other = session_with(&registry, &store, "other");
    let theirs = task_id(&start(&other, 1, "spin"));
    let huge = "f".repeat(1 << 20);
    for forged in [
        theirs.as_str(),
        "00000000-0000-4000-8000-000000000000",
        "",
        "../../etc",
        huge.as_str(),
    ] {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let answer = reply(&mine, &on_task(method, 9, forged));
            assert_eq!(
                answer,
                json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32602, "message": crate::tasks::NO_SUCH_TASK}}),
                "{method}"
            );
        }
    }
    let bad = reply(
        &mine,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":7}}"#,
    );
    assert_eq!(
        bad["error"]["message"],
        "Invalid params: tasks/get needs \"taskId\", a task's id as a string; got number"
    );
    let listed = reply(&mine, r#"{"jsonrpc":"2.0","id":2,"method":"tasks/list"}"#);
    assert_eq!(listed["result"], json!({"tasks": []}));
    // The other session's task was neither cancelled nor answered.
    let got = reply(&other, &on_task("tasks/get", 3, &theirs));
    assert_eq!(got["result"]["status"], "working");
}

#[tokio::test]
async fn a_result_past_the_memory_budget_fails_and_is_not_kept() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(
        &McpLimits::new().with_max_task_result_bytes(NonZeroUsize::new(20_000).unwrap()),
    ));
    let session = session_with(&registry, &store, "s");
    // `{"n":1}` is 7 bytes: a result of 7000; the second does not fit beside it.
    let first = task_id(&start(&session, 1, "big"));
    let first_result = answer(&session, &on_task("tasks/result", 2, &first)).await;
    assert_eq!(first_result["result"]["isError"], false);
    let kept = store.counts().bytes;
    assert!(kept > 7000 && kept < 8000, "{kept}");
    let line = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"big","arguments":{"n":1000000},"task":{}}}"#;
    let second = task_id(&reply(&session, line));
    let result = answer(&session, &on_task("tasks/result", 4, &second)).await;
    assert_eq!(result["result"]["isError"], true);
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("the task's result (") && text.contains("was not kept"),
        "{text}"
    );
    assert_eq!(store.counts().bytes, kept);
    assert_eq!(
        reply(&session, &on_task("tasks/get", 5, &second))["result"]["status"],
        "failed"
    );
}

#[tokio::test]
async fn tasks_expire_after_their_ttl() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(
        &McpLimits::new().with_task_ttl(Duration::from_millis(300)),
    ));
    let session = session_with(&registry, &store, "s");
    // A client asking for more gets the server's TTL; for less, its own.
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","task":{"ttl":999999}}}"#;
    let created = reply(&session, line);
    assert_eq!(created["result"]["task"]["ttl"], 300);
    let id = task_id(&created);
    let line = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","task":{"ttl":100}}}"#;
    assert_eq!(reply(&session, line)["result"]["task"]["ttl"], 100);
    let bad = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","task":{"ttl":-1}}}"#;
    assert_eq!(
        reply(&session, bad)["error"]["message"],
        "Invalid params: \"task.ttl\" must be a whole number of milliseconds, got integer"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let gone = reply(&session, &on_task("tasks/get", 4, &id));
    assert_eq!(gone["error"]["message"], crate::tasks::NO_SUCH_TASK);
    assert_eq!(store.counts(), crate::tasks::TaskCounts::default());
}

#[tokio::test]
async fn older_revisions_have_no_tasks() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = Session::new(
        Arc::clone(&registry),
        Environment {
            session_id: "s".into(),
            turn_id: String::new(),
        },
    );
    session.set_tasks(Arc::clone(&store), TaskOwner::Session("s".to_owned()));
    let init = reply(
        &session,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
    );
    assert_eq!(init["result"]["capabilities"].get("tasks"), None);
    // `task` is not read there: a plain call, and a required tool runs plainly.
    let line =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"only_task","task":{}}}"#;
    assert!(matches!(
        session.receive(parse_line(line.as_bytes())),
        Step::Call(_)
    ));
    let get = reply(&session, &on_task("tasks/get", 2, "x"));
    assert_eq!(get["error"]["code"], -32601);
    let list = reply(
        &session,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    );
    assert_eq!(list["result"]["tools"][0].get("execution"), None);
    assert_eq!(store.counts().tasks, 0);
}

#[tokio::test]
async fn ended_tasks_of_many_sessions_are_bounded_in_all() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&limits(4, 8)));
    let mut ended = Vec::new();
    for n in 0..200u64 {
        // A new session each time (an HTTP client opening session after session).
        let session = session_with(&registry, &store, &format!("s{n}"));
        let id = task_id(&start(&session, 1, "spin"));
        let cancelled = reply(&session, &on_task("tasks/cancel", 2, &id));
        assert_eq!(cancelled["result"]["status"], "cancelled");
        ended.push((session, id));
        assert!(store.counts().tasks <= 8, "{n}: {:?}", store.counts());
    }
    assert_eq!(store.counts().places, 0);
    // The newest are still readable, the oldest forgotten.
    let (newest, id) = ended.last().unwrap();
    assert_eq!(
        reply(newest, &on_task("tasks/get", 3, id))["result"]["status"],
        "cancelled"
    );
    let (oldest, id) = &ended[0];
    assert_eq!(
        reply(oldest, &on_task("tasks/get", 4, id))["error"]["message"],
        crate::tasks::NO_SUCH_TASK
    );
    until("every call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
}

#[tokio::test]
async fn a_task_runs_past_the_call_timeout_up_to_its_own_limit() {
    // `nap` takes 300 ms; plain calls stop at 100 ms. As a task it runs under the task
    // limit instead, and its result is there.
    let registry = Registry::new().with_call_timeout(Duration::from_millis(100));
    registry
        .register(
            ToolDefinition::new("nap", "Nap.", json!({"type": "object"}))
                .with_task_support(TaskSupport::Optional),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(ToolResult::new("rested"))
            },
        )
        .unwrap();
    let registry = Arc::new(registry);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = session_with(&registry, &store, "s");
    let plain = answer(
        &session,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nap","arguments":{}}}"#,
    )
    .await;
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    assert!(
        plain["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("100ms"),
        "{plain}"
    );
    let id = task_id(&start(&session, 2, "nap"));
    let result = answer(&session, &on_task("tasks/result", 3, &id)).await;
    assert_eq!(result["result"]["content"][0]["text"], "rested", "{result}");
    assert_eq!(result["result"]["isError"], false);
}

#[tokio::test]
async fn tasks_created_and_ended_are_counted_by_status() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let counters: Arc<Counters> = Arc::default();
    let store = Arc::new(TaskStore::new(&McpLimits::default()).counting(Arc::clone(&counters)));
    let session = session_with(&registry, &store, "s");
    let ok = task_id(&start(&session, 1, "echo"));
    answer(&session, &on_task("tasks/result", 2, &ok)).await;
    let failed = task_id(&start(&session, 3, "fails"));
    answer(&session, &on_task("tasks/result", 4, &failed)).await;
    let cancelled = task_id(&start(&session, 5, "spin"));
    let reply = reply(&session, &on_task("tasks/cancel", 6, &cancelled));
    assert_eq!(reply["result"]["status"], "cancelled", "{reply}");
    // A task still working when its session's tasks are forgotten counts as cancelled.
    task_id(&start(&session, 7, "spin"));
    let stats = counters.stats();
    assert_eq!(
        (
            stats.tasks_created,
            stats.tasks_completed,
            stats.tasks_failed,
            stats.tasks_cancelled
        ),
        (4, 1, 1, 1)
    );
    store.forget_owner("s");
    let stats = counters.stats();
    assert_eq!((stats.tasks_created, stats.tasks_cancelled), (4, 2));
}
