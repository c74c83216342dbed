//! Tasks through the session core: created, fetched, cancelled, bounded. The shared
//! tools and helpers are here; `legacy` has 2025-11-25's tasks, `modern` the published
//! 2026-07-28 extension, `status` how a task's changes are told.

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
use crate::session::{CallLimiter, Counters, Notifier, Session, Step, TaskOwner};

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

/// Answers `line` as [`answer`] does (a plain call runs).
async fn reply_or_run(session: &Session, line: &str) -> Value {
    answer(session, line).await
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

mod legacy;
mod modern;
mod status;
