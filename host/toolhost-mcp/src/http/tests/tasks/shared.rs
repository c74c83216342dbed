//! Tasks of callers without a session shared by two servers through one backend, as
//! two `host serve` processes through Redis (`--state`): created through one, got and
//! cancelled through the other; a backend that fails refuses task creation (fail
//! closed) while plain calls go on.

use super::*;
use crate::state::{
    BoxFuture, CancelRefusal, Heartbeat, MemoryBackend, SharedTasks, StateError, TaskBackend,
    TaskRecord, TaskStatus,
};

fn shared_config(backend: &Arc<dyn TaskBackend>) -> HttpConfig {
    stateful()
        .with_tokens(Some(tokens()))
        .with_shared_tasks(SharedTasks::new(
            Arc::clone(backend),
            Duration::from_secs(30),
        ))
}

#[tokio::test]
async fn a_task_created_through_one_server_is_got_and_cancelled_through_another() {
    let backend: Arc<dyn TaskBackend> = Arc::new(MemoryBackend::new(1 << 20));
    let (spinning_a, spinning_b) = (Arc::default(), Arc::default());
    let a = start_tasks_with(shared_config(&backend), &spinning_a).await;
    let b = start_tasks_with(shared_config(&backend), &spinning_b).await;
    let task = start_task(a.addr, TOKEN_A, "spin").await;
    until("spinning on A", || spinning_a.0.load(Ordering::SeqCst) == 1).await;
    // B, which never saw it, finds it for its owner only.
    let got = get(b.addr, TOKEN_A, &task).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    assert_eq!(got["result"]["taskId"], task.as_str(), "{got}");
    assert_eq!(got["result"]["ttlMs"], 3_600_000, "{got}");
    assert_eq!(
        get(b.addr, TOKEN_B, &task).await,
        no_such_published_task_for(7)
    );
    let unknown = get(b.addr, TOKEN_A, "00000000-0000-4000-8000-000000000000").await;
    assert_eq!(unknown, no_such_published_task_for(7));
    // Cancelled through B: A's call stops within a second (its next heartbeat).
    let cancelled = modern_request(
        b.addr,
        Some(TOKEN_A),
        "tasks/cancel",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    let asked = Instant::now();
    until("A's call stopped", || {
        spinning_a.0.load(Ordering::SeqCst) == 0
    })
    .await;
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    let on_a = get(a.addr, TOKEN_A, &task).await;
    assert_eq!(on_a["result"]["status"], "cancelled", "{on_a}");
    let on_b = get(b.addr, TOKEN_A, &task).await;
    assert_eq!(on_b["result"]["status"], "cancelled", "{on_b}");
    assert_eq!(
        on_b["result"]["statusMessage"], "cancelled by the client",
        "{on_b}"
    );
    // A task that completes on A: its result comes inline through B, as through A.
    let task = start_task(a.addr, TOKEN_A, "nap").await;
    let mut done = Value::Null;
    for _ in 0..500 {
        done = get(b.addr, TOKEN_A, &task).await;
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
    let on_a = get(a.addr, TOKEN_A, &task).await;
    assert_eq!(on_a["result"]["result"], done["result"]["result"]);
    a.stop().await;
    b.stop().await;
}

/// A backend that is never there, as Redis when it went away.
#[derive(Debug)]
struct Gone;

fn gone() -> StateError {
    StateError::Unreachable("connection refused".into())
}

impl TaskBackend for Gone {
    fn create<'a>(
        &'a self,
        _: &'a TaskRecord,
        _: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async { Err(gone()) })
    }
    fn get<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StateError>> {
        Box::pin(async { Err(gone()) })
    }
    fn list<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Vec<TaskRecord>, StateError>> {
        Box::pin(async { Err(gone()) })
    }
    fn cancel<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<TaskRecord, CancelRefusal>> {
        Box::pin(async { Err(gone().into()) })
    }
    fn heartbeat<'a>(
        &'a self,
        _: &'a str,
        _: Duration,
    ) -> BoxFuture<'a, Result<Heartbeat, StateError>> {
        Box::pin(async { Err(gone()) })
    }
    fn finish<'a>(
        &'a self,
        _: &'a str,
        _: TaskStatus,
        _: Option<&'a str>,
        _: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async { Err(gone()) })
    }
}

#[tokio::test]
async fn with_the_backend_gone_task_creation_fails_closed_and_plain_calls_go_on() {
    let backend: Arc<dyn TaskBackend> = Arc::new(Gone);
    let spinning = Arc::default();
    let server = start_tasks_with(shared_config(&backend), &spinning).await;
    let refused = modern_request(
        server.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "spin", "arguments": {}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("Task refused: the task state server is unreachable (connection refused)")
            && message.contains("plain tool calls still work"),
        "{message}"
    );
    // Nothing ran, nothing holds a place.
    assert_eq!(spinning.0.load(Ordering::SeqCst), 0);
    assert_eq!(server.app.sessions.tasks().counts().places, 0);
    // A task this process does not hold: the backend's failure, said as such.
    let got = get(server.addr, TOKEN_A, "00000000-0000-4000-8000-000000000000").await;
    assert_eq!(got["error"]["code"], -32603, "{got}");
    assert!(
        got["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the task state server is unreachable"),
        "{got}"
    );
    // A plain call (a client not declaring the tasks extension) is served.
    let plain = modern_request_with(
        server.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "echo", "arguments": {"said": "hi"}}),
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }),
    )
    .await;
    assert_eq!(plain["result"]["isError"], false, "{plain}");
    server.stop().await;
}

/// 2025-11-25 without a session (a stateless server): a task is its token's, shared
/// too; `tasks/result` through another process waits for its end there, `tasks/list`
/// lists it wherever it runs, `tasks/cancel` answers the task as it is now.
#[tokio::test]
async fn legacy_sessionless_tasks_are_shared_with_result_and_list() {
    let backend: Arc<dyn TaskBackend> = Arc::new(MemoryBackend::new(1 << 20));
    let config = || {
        HttpConfig::new(None)
            .with_tokens(Some(tokens()))
            .with_shared_tasks(SharedTasks::new(
                Arc::clone(&backend),
                Duration::from_secs(30),
            ))
    };
    let (spinning_a, spinning_b) = (Arc::default(), Arc::default());
    let a = start_tasks_with(config(), &spinning_a).await;
    let b = start_tasks_with(config(), &spinning_b).await;
    let created = stateless_request(a.addr, TOKEN_A, &task_call(2, "nap")).await;
    let napping = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    // Through B, which never saw it: the result once it ends on A, as A would give it.
    let done = stateless_request(b.addr, TOKEN_A, &on_task("tasks/result", 3, &napping)).await;
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "rested"}]),
        "{done}"
    );
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        napping.as_str()
    );
    let other = stateless_request(b.addr, TOKEN_B, &on_task("tasks/result", 4, &napping)).await;
    assert_eq!(other, no_such_task_for(4));
    // A spinning task on A, cancelled through B: the task as it is now, and A's call
    // stops within a second.
    let created = stateless_request(a.addr, TOKEN_A, &task_call(5, "spin")).await;
    let spinning = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    until("spinning on A", || spinning_a.0.load(Ordering::SeqCst) == 1).await;
    let cancelled =
        stateless_request(b.addr, TOKEN_A, &on_task("tasks/cancel", 6, &spinning)).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["result"]["taskId"],
        spinning.as_str(),
        "{cancelled}"
    );
    let asked = Instant::now();
    until("A's call stopped", || {
        spinning_a.0.load(Ordering::SeqCst) == 0
    })
    .await;
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    let again = stateless_request(b.addr, TOKEN_A, &on_task("tasks/cancel", 7, &spinning)).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert_eq!(
        again["error"]["message"],
        "Invalid params: the task has already ended (cancelled); only a working task can be cancelled"
    );
    // Both tasks listed through B, oldest first; none for bob.
    let list = r#"{"jsonrpc":"2.0","id":8,"method":"tasks/list"}"#;
    let listed = stateless_request(b.addr, TOKEN_A, list).await;
    let statuses: Vec<(Value, Value)> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|task| (task["taskId"].clone(), task["status"].clone()))
        .collect();
    assert_eq!(
        statuses,
        [
            (json!(napping), json!("completed")),
            (json!(spinning), json!("cancelled"))
        ]
    );
    let bobs = stateless_request(b.addr, TOKEN_B, list).await;
    assert_eq!(bobs["result"], json!({"tasks": []}));
    a.stop().await;
    b.stop().await;
}
