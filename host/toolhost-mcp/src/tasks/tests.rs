//! Tasks through the session core: created, fetched, cancelled, bounded.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use toolhost::registry::{
    Arguments, CallContext, Environment, Registry, TaskSupport, ToolDefinition, ToolError,
    ToolResult,
};

use super::TaskStore;
use crate::jsonrpc::parse_line;
use crate::limits::McpLimits;
use crate::session::{CallLimiter, Notifier, Session, Step, TaskOwner};

/// Calls of `spin` that are running now.
#[derive(Default)]
pub(crate) struct Spinning(pub(crate) AtomicUsize);

/// Counts a `spin` call out when it ends, however it ends.
struct Done(Arc<Spinning>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `echo` (optional: its arguments back), `nap` (optional: 300 ms, then "rested"),
/// `spin` (optional: runs until stopped),
/// `big` (optional: a result of `size` bytes), `plain` (forbidden), `only_task`
/// (required), `fails` (optional: a tool error).
pub(crate) fn task_registry(spinning: &Arc<Spinning>) -> Arc<Registry> {
    let registry = Registry::new().with_call_timeout(Duration::from_secs(60));
    let object = || json!({"type": "object"});
    registry
        .register(
            ToolDefinition::new("echo", "Echo.", object()).with_task_support(TaskSupport::Optional),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(args.raw().to_owned()))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("nap", "Nap.", object()).with_task_support(TaskSupport::Optional),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(ToolResult::new("rested"))
            },
        )
        .unwrap();
    let counter = Arc::clone(spinning);
    registry
        .register(
            ToolDefinition::new("spin", "Spin until stopped.", object())
                .with_task_support(TaskSupport::Optional),
            move |ctx: CallContext, _args: Arguments, _env: Environment| {
                let counter = Arc::clone(&counter);
                async move {
                    counter.0.fetch_add(1, Ordering::SeqCst);
                    let _done = Done(counter);
                    ctx.cancellation().cancelled().await;
                    Ok(ToolResult::new("stopped"))
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("big", "A big result.", object())
                .with_task_support(TaskSupport::Optional),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                let size = args.raw().len() * 1000;
                Ok(ToolResult::new("x".repeat(size)))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("plain", "Plain.", object()),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("plain"))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("only_task", "Task only.", object())
                .with_task_support(TaskSupport::Required),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("done"))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("fails", "Fails.", object())
                .with_task_support(TaskSupport::Optional),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Err::<ToolResult, _>(ToolError::Failed {
                    tool: "fails".into(),
                    message: "disk on fire".into(),
                })
            },
        )
        .unwrap();
    Arc::new(registry)
}

fn session_with(registry: &Arc<Registry>, store: &Arc<TaskStore>, id: &str) -> Session {
    let session = Session::new(
        Arc::clone(registry),
        Environment {
            session_id: id.into(),
            turn_id: String::new(),
        },
    );
    session.set_tasks(Arc::clone(store), TaskOwner::Session(id.to_owned()));
    let reply = reply(
        &session,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    );
    assert_eq!(
        reply["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    session
}

fn reply(session: &Session, line: &str) -> Value {
    match session.receive(parse_line(line.as_bytes())) {
        Step::Reply(reply) => serde_json::from_slice(&reply.to_bytes()).unwrap(),
        other => panic!("{line}: {other:?}"),
    }
}

/// Answers `line`, running it when it is a call (a waiting `tasks/result`).
async fn answer(session: &Session, line: &str) -> Value {
    match session.receive(parse_line(line.as_bytes())) {
        Step::Reply(reply) => serde_json::from_slice(&reply.to_bytes()).unwrap(),
        Step::Call(call) => {
            let limiter = CallLimiter::new(&McpLimits::default());
            let slot = limiter.try_acquire(call.held_bytes()).unwrap();
            let reply = call.run(&slot, Notifier::none()).await.unwrap();
            serde_json::from_slice(&reply.to_bytes()).unwrap()
        }
        other => panic!("{line}: {other:?}"),
    }
}

fn start(session: &Session, id: u64, tool: &str) -> Value {
    reply(
        session,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"n":{id}}},"task":{{}}}}}}"#
        ),
    )
}

fn task_id(created: &Value) -> String {
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

fn on_task(method: &str, id: u64, task: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"taskId":{}}}}}"#,
        json!(task)
    )
}

fn limits(per_session: usize, total: usize) -> McpLimits {
    McpLimits::new()
        .with_max_tasks_per_session(NonZeroUsize::new(per_session).unwrap())
        .with_max_tasks(NonZeroUsize::new(total).unwrap())
}

async fn until(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not within 5 s");
}

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
                json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32602, "message": super::NO_SUCH_TASK}}),
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
    assert_eq!(gone["error"]["message"], super::NO_SUCH_TASK);
    assert_eq!(store.counts(), super::TaskCounts::default());
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

/// The `_meta` of a 2026-07-28 request from a client declaring the tasks extension.
const DECLARED: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// The `_meta` of a 2026-07-28 request from a client declaring nothing.
const UNDECLARED: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A 2026-07-28 request line: `params` with `meta` as its `_meta`.
fn modern(meta: &str, id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = serde_json::from_str(meta).unwrap();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A session serving 2026-07-28 requests (no `initialize`), its tasks filed under `id`.
fn modern_session(registry: &Arc<Registry>, store: &Arc<TaskStore>, id: &str) -> Session {
    let session = Session::new(
        Arc::clone(registry),
        Environment {
            session_id: id.into(),
            turn_id: String::new(),
        },
    );
    session.set_tasks(Arc::clone(store), TaskOwner::Session(id.to_owned()));
    session
}

/// The task id of a published extension's `CreateTaskResult`.
fn created_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

/// Polls `tasks/get` until the task's status is `status`; that answer.
async fn until_status(session: &Session, id: &str, status: &str) -> Value {
    for n in 0..500 {
        let got = reply(
            session,
            &modern(DECLARED, 1000 + n, "tasks/get", json!({"taskId": id})),
        );
        if got["result"]["status"] == status {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} not {status} within 5 s");
}

/// The published extension (ext-tasks e434597): a client declaring it in its request's
/// capabilities gets a task (`resultType: "task"`, the `Task` fields flat, `ttlMs`,
/// `pollIntervalMs`) without asking for one in the params; `tasks/get` gives the
/// result inline.
#[tokio::test]
async fn modern_requests_follow_the_published_tasks_extension() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
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

/// Answers `line` as [`answer`] does (a plain call runs).
async fn reply_or_run(session: &Session, line: &str) -> Value {
    answer(session, line).await
}

/// The extension keeps `failed` for JSON-RPC errors: a tool's error is a completed task
/// whose result says `isError: true`.
#[tokio::test]
async fn a_modern_tool_error_is_a_completed_task_with_its_error_result() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let id = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            1,
            "tools/call",
            json!({"name": "fails", "arguments": {}}),
        ),
    ));
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
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let id = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            1,
            "tools/call",
            json!({"name": "spin", "arguments": {}}),
        ),
    ));
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
    let echo = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            7,
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
        ),
    ));
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
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let id = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            1,
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
        ),
    ));
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
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let id = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            1,
            "tools/call",
            json!({"name": "only_task", "arguments": {}}),
        ),
    ));
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
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let owner = modern_session(&registry, &store, "a");
    let other = modern_session(&registry, &store, "b");
    let id = created_id(&reply(
        &owner,
        &modern(
            DECLARED,
            1,
            "tools/call",
            json!({"name": "spin", "arguments": {}}),
        ),
    ));
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
        assert_eq!(foreign["error"]["message"], super::NO_SUCH_TASK_PUBLISHED);
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
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let other = modern_session(&registry, &store, "t");
    let id = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            1,
            "tools/call",
            json!({"name": "echo", "arguments": {"k": 1}}),
        ),
    ));
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
    assert_eq!(forged["error"]["message"], super::NO_SUCH_TASK_PUBLISHED);
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
        super::NO_SUCH_TASK
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

/// Takes what the session sends on its own; `full` makes it refuse (a client that does
/// not read).
#[derive(Default)]
struct Told {
    messages: std::sync::Mutex<Vec<Value>>,
    full: std::sync::atomic::AtomicBool,
}

impl crate::session::Outlet for Told {
    fn send(
        &self,
        message: crate::session::Message,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        self.try_send(message);
        Box::pin(async {})
    }

    fn try_send(&self, message: crate::session::Message) -> bool {
        if self.full.load(Ordering::SeqCst) {
            return false;
        }
        let value = serde_json::from_slice(&message.to_bytes()).unwrap();
        self.messages.lock().unwrap().push(value);
        true
    }
}

impl Told {
    fn on(session: &Session) -> Arc<Self> {
        let told = Arc::new(Self::default());
        session.set_notifier(Notifier::new(
            Arc::clone(&told) as Arc<dyn crate::session::Outlet>
        ));
        told
    }

    fn taken(&self) -> Vec<Value> {
        std::mem::take(&mut *self.messages.lock().unwrap())
    }
}

/// Each status change of a 2025-11-25 task is told to its session, as the task is then
/// (`tasks/get`'s answer, word for word); nothing is told of a modern request's task.
#[tokio::test]
async fn status_changes_are_told_to_the_session() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = session_with(&registry, &store, "s");
    let told = Told::on(&session);
    let id = task_id(&start(&session, 1, "nap"));
    assert_eq!(told.taken(), Vec::<Value>::new(), "created is not a change");
    let result = answer(&session, &on_task("tasks/result", 2, &id)).await;
    assert_eq!(result["result"]["content"][0]["text"], "rested");
    let got = reply(&session, &on_task("tasks/get", 3, &id));
    assert_eq!(
        told.taken(),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": got["result"]})
        ]
    );
    // Failed, with its message; cancelled by the client.
    let failed = task_id(&start(&session, 4, "fails"));
    answer(&session, &on_task("tasks/result", 5, &failed)).await;
    let got = reply(&session, &on_task("tasks/get", 6, &failed));
    assert_eq!(got["result"]["status"], "failed");
    assert_eq!(
        told.taken(),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": got["result"]})
        ]
    );
    let spun = task_id(&start(&session, 7, "spin"));
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 1).await;
    let cancelled = reply(&session, &on_task("tasks/cancel", 8, &spun));
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        told.taken(),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": cancelled["result"]})
        ],
        "told once, not again when the call winds down"
    );
    // A 2026-07-28 request's task: not told as 2025-11-25's (its extension has its
    // own way).
    let created = reply(
        &session,
        &modern(
            DECLARED,
            9,
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
        ),
    );
    let modern = created_id(&created);
    until_status(&session, &modern, "completed").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(told.taken(), Vec::<Value>::new());
}

/// A client that does not read loses the notifications, never holds up a task; and a
/// flood of status changes is cut to the session's rate.
#[tokio::test]
async fn status_notifications_are_dropped_not_waited_for_and_rate_bounded() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&limits(2000, 2000)));
    let session = session_with(&registry, &store, "s");
    let told = Told::on(&session);
    told.full.store(true, Ordering::SeqCst);
    let id = task_id(&start(&session, 1, "echo"));
    let done = tokio::time::timeout(
        Duration::from_secs(5),
        answer(&session, &on_task("tasks/result", 2, &id)),
    )
    .await
    .expect("the task ends though its client reads nothing");
    assert_eq!(done["result"]["isError"], false);
    assert_eq!(told.taken(), Vec::<Value>::new());
    told.full.store(false, Ordering::SeqCst);
    // 1,000 tasks ending at once: the burst (200, less the one the full client lost)
    // and what the rate (50/s) refilled.
    let started = std::time::Instant::now();
    let ids: Vec<String> = (0..1000)
        .map(|n| task_id(&start(&session, 10 + n, "echo")))
        .collect();
    for id in &ids {
        let done = answer(&session, &on_task("tasks/result", 2, id)).await;
        assert_eq!(done["result"]["isError"], false);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let count = told.taken().len();
    let most = 200 + (elapsed * 50.0).ceil() as usize;
    assert!(
        (199..=most).contains(&count),
        "{count} told in {elapsed} s (at most {most})"
    );
}

/// The `subscriptions/listen` of `line`, running, its messages taken by the returned
/// [`Told`].
fn listening(session: &Session, line: &str) -> (Arc<Told>, tokio::task::JoinHandle<()>) {
    let Step::Listen(listen) = session.receive(parse_line(line.as_bytes())) else {
        panic!("not a subscription: {line}");
    };
    let told = Arc::new(Told::default());
    let notifier = Notifier::new(Arc::clone(&told) as Arc<dyn crate::session::Outlet>);
    let running = tokio::spawn(async move {
        listen.run(notifier).await;
    });
    (told, running)
}

/// The published extension's status notifications: a 2026-07-28 `subscriptions/listen`
/// naming `taskIds` is acknowledged with the caller's own tasks only (another owner's
/// and unknown ids are left out alike); each one's state now comes first, then each
/// change, as `notifications/tasks` with the task as `tasks/get` gives it then.
/// Another owner's task changing tells this listener nothing.
#[tokio::test]
async fn a_modern_listen_hears_of_its_own_tasks() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let owner = modern_session(&registry, &store, "a");
    let other = modern_session(&registry, &store, "b");
    let call = |session: &Session, id: u64| {
        created_id(&reply(
            session,
            &modern(
                DECLARED,
                id,
                "tools/call",
                json!({"name": "spin", "arguments": {}}),
            ),
        ))
    };
    let first = call(&owner, 1);
    let second = call(&owner, 2);
    let foreign = call(&other, 3);
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 3).await;
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (told, running) = listening(
        &owner,
        &modern(
            DECLARED,
            5,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [first, second, foreign, unknown, first]}}),
        ),
    );
    until("acknowledged and told", || {
        told.messages.lock().unwrap().len() == 3
    })
    .await;
    let tag = json!({"io.modelcontextprotocol/subscriptionId": 5});
    let mut got = told.taken();
    assert_eq!(
        got.remove(0),
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": tag, "notifications": {"taskIds": [first, second]}}})
    );
    let as_noted = |got: &Value| {
        let mut task = got["result"].clone();
        task.as_object_mut().unwrap().remove("resultType");
        task["_meta"] = tag.clone();
        json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": task})
    };
    let now = |id: &str| {
        as_noted(&reply(
            &owner,
            &modern(DECLARED, 6, "tasks/get", json!({"taskId": id})),
        ))
    };
    got.sort_by_key(|note| note["params"]["taskId"] != json!(first));
    assert_eq!(got, [now(&first), now(&second)]);
    reply(
        &other,
        &modern(DECLARED, 7, "tasks/cancel", json!({"taskId": foreign})),
    );
    reply(
        &owner,
        &modern(DECLARED, 8, "tasks/cancel", json!({"taskId": second})),
    );
    until("the cancel noted", || {
        !told.messages.lock().unwrap().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled = now(&second);
    assert_eq!(cancelled["params"]["status"], "cancelled");
    assert_eq!(told.taken(), [cancelled], "nothing of the other's task");
    reply(
        &owner,
        &modern(DECLARED, 9, "tasks/cancel", json!({"taskId": first})),
    );
    until("every call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    running.abort();
}

/// A task that asks, listened to: its question comes as `notifications/tasks` with
/// `input_required` and `inputRequests`, and its end with the result inline.
#[tokio::test]
async fn a_modern_listen_hears_a_task_ask_and_end() {
    let registry = asking_registry();
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let id = created_id(&reply(
        &session,
        &modern(
            ASKS,
            1,
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
        ),
    ));
    let (told, running) = listening(
        &session,
        &modern(
            ASKS,
            2,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [id]}}),
        ),
    );
    let heard = |status: &'static str| {
        let told = Arc::clone(&told);
        move || {
            told.messages
                .lock()
                .unwrap()
                .iter()
                .any(|note| note["params"]["status"] == status)
        }
    };
    until("told it asks", heard("input_required")).await;
    let asking = told
        .taken()
        .into_iter()
        .find(|note| note["params"]["status"] == "input_required")
        .unwrap();
    assert_eq!(asking["method"], "notifications/tasks");
    assert_eq!(
        asking["params"]["inputRequests"]["q0"]["params"]["message"],
        "Your name?"
    );
    reply(
        &session,
        &modern(
            ASKS,
            3,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"q0": {"action": "accept", "content": {"name": "Ada"}}}}),
        ),
    );
    until("told it ended", heard("completed")).await;
    let ended = told
        .taken()
        .into_iter()
        .find(|note| note["params"]["status"] == "completed")
        .unwrap();
    assert_eq!(
        ended["params"]["result"]["content"][0]["text"],
        "Hello, Ada!"
    );
    running.abort();
}

/// Hostile: a listen asking for task notifications without declaring the extension is
/// refused (-32021); one naming too many ids, or ids that are not strings, is refused
/// (-32602) before any is looked up.
#[tokio::test]
async fn modern_listens_for_tasks_are_bounded_and_need_the_extension() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let listen = |meta: &str, ids: Value| {
        reply(
            &session,
            &modern(
                meta,
                1,
                "subscriptions/listen",
                json!({"notifications": {"taskIds": ids}}),
            ),
        )
    };
    let undeclared = listen(UNDECLARED, json!(["x"]));
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    assert_eq!(
        undeclared["error"]["data"],
        json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
    );
    let many: Vec<String> = (0..=crate::limits::MAX_LISTEN_TASKS)
        .map(|n| format!("t{n}"))
        .collect();
    let too_many = listen(DECLARED, json!(many));
    assert_eq!(too_many["error"]["code"], -32602);
    assert_eq!(
        too_many["error"]["message"],
        "Invalid params: \"notifications.taskIds\" names 257 tasks; one subscription may listen to at most 256"
    );
    for wrong in [json!("x"), json!([1]), json!({"a": "b"})] {
        let refused = listen(DECLARED, wrong.clone());
        assert_eq!(
            refused["error"]["message"],
            "Invalid params: \"notifications.taskIds\" must be an array of task ids (strings)",
            "{wrong}"
        );
    }
}

/// The `_meta` of a 2026-07-28 request from a client declaring the tasks extension and
/// form elicitation.
const ASKS: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// `greet` (optional): asks its user's name and greets them.
fn asking_registry() -> Arc<Registry> {
    let registry = Registry::new().with_call_timeout(Duration::from_secs(60));
    registry
        .register(
            ToolDefinition::new("greet", "Greet.", json!({"type": "object"}))
                .with_task_support(TaskSupport::Optional),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Ok(ToolResult::new("nobody to ask"));
                };
                let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
                match interaction.ask("Your name?".into(), schema).await {
                    Ok(Some(answer)) => Ok(ToolResult::new(format!(
                        "Hello, {}!",
                        answer["name"].as_str().unwrap_or_default()
                    ))),
                    Ok(None) => Ok(ToolResult::new("declined")),
                    Err(err) => Err(ToolError::Failed {
                        tool: "greet".into(),
                        message: err.to_string(),
                    }),
                }
            },
        )
        .unwrap();
    Arc::new(registry)
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
    assert_eq!(forged["error"]["message"], super::NO_SUCH_TASK_PUBLISHED);
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
    let id = created_id(&reply(
        &session,
        &modern(
            DECLARED,
            20,
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
        ),
    ));
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
