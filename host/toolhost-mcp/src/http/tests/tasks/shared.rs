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

async fn get(addr: SocketAddr, token: &str, task: &str) -> Value {
    modern_request(addr, Some(token), "tasks/get", json!({"taskId": task})).await
}

#[tokio::test]
async fn a_task_created_through_one_server_is_got_and_cancelled_through_another() {
    let backend: Arc<dyn TaskBackend> = Arc::new(MemoryBackend::new(1 << 20));
    let (spinning_a, spinning_b) = (Arc::default(), Arc::default());
    let a = start_tasks_with(shared_config(&backend), &spinning_a).await;
    let b = start_tasks_with(shared_config(&backend), &spinning_b).await;
    let created = modern_request(
        a.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "spin", "arguments": {}}),
    )
    .await;
    let task = created_id(&created);
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
    let created = modern_request(
        a.addr,
        Some(TOKEN_A),
        "tools/call",
        json!({"name": "nap", "arguments": {}}),
    )
    .await;
    let task = created_id(&created);
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

/// A 2025-11-25 task of a caller without a session is this process's alone (that
/// revision's tasks/result and tasks/list stay local): it is not put in the backend, and
/// a heartbeat that would not find it there must not cancel it.
#[tokio::test]
async fn a_legacy_sessionless_task_stays_local_and_completes() {
    let backend: Arc<dyn TaskBackend> = Arc::new(MemoryBackend::new(1 << 20));
    let spinning = Arc::default();
    let config = HttpConfig::new(None)
        .with_tokens(Some(tokens()))
        .with_shared_tasks(SharedTasks::new(
            Arc::clone(&backend),
            Duration::from_secs(30),
        ));
    let server = start_tasks_with(config, &spinning).await;
    let created = stateless_request(server.addr, TOKEN_A, &task_call(2, "nap")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let done = stateless_request(server.addr, TOKEN_A, &on_task("tasks/result", 3, &task)).await;
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "rested"}]),
        "{done}"
    );
    // Never put in the backend.
    assert_eq!(
        backend
            .heartbeat(&task, Duration::from_secs(1))
            .await
            .unwrap(),
        Heartbeat::Gone
    );
    server.stop().await;
}
