//! Tasks in a session ([`crate::tasks`]): a `tools/call` asking for a task starts it and
//! is answered at once; `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`
//! reach the session's own tasks only.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;
use tracing::{debug, info};

use toolhost::registry::{format_duration, CallContext, TaskSupport, ToolCall, ToolError};

use super::{Registration, Session, Step, Work, LOG_TARGET};
use crate::convert::{call_result_for, CallParams};
use crate::jsonrpc::{
    raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS, METHOD_NOT_FOUND,
};
use crate::logging;
use crate::protocol::{self, RequestMeta};
use crate::session::Message;
use crate::tasks::{
    CancelError, Created, Finished, Outcome, Status, TaskStore, NO_SUCH_TASK, RELATED_TASK,
    TASKS_EXTENSION,
};

/// JSON-RPC's implementation-defined server error: no room for one more task.
const TASK_LIMIT: i64 = -32000;

/// The longest task id read: the ids this server gives are 36 characters; anything
/// longer is not one of them and is not looked up (nor echoed).
const MAX_TASK_ID_CHARS: usize = 64;

/// A `tasks/result` waiting for its task to end.
#[derive(Debug)]
pub(crate) struct TaskWait {
    task_id: String,
    done: watch::Receiver<Option<Arc<Finished>>>,
}

impl TaskWait {
    /// What [`PendingCall::held_bytes`](super::PendingCall::held_bytes) counts for it.
    pub(super) fn held_bytes(&self) -> usize {
        self.task_id.len()
    }

    /// Waits until the task ends (or the client cancels the request: no answer), and
    /// answers as `tasks/result` does.
    pub(super) async fn run(
        mut self,
        registration: Registration,
        id: &RequestId,
        meta: &RequestMeta,
    ) -> Option<Message> {
        let token = registration.token.clone();
        let finished = tokio::select! {
            ended = self.done.wait_for(Option::is_some) => ended.ok().and_then(|ended| ended.clone()),
            () = token.cancelled() => {
                debug!(target: LOG_TARGET, request = %id, "not answering a cancelled tasks/result");
                return None;
            }
        };
        let session = registration.session.clone();
        drop(registration);
        Some(match finished {
            Some(finished) => session.task_result(id, meta, &self.task_id, &finished),
            // Forgotten before it ended (its time to live, its session terminated).
            None => session.error(&no_such_task(id)),
        })
    }
}

fn no_such_task(id: &RequestId) -> RpcError {
    RpcError::new(id.clone(), INVALID_PARAMS, NO_SUCH_TASK)
}

impl Session {
    /// Offers tasks to this session's clients, kept in `store` (shared by the server's
    /// sessions). A session without one (HTTP's stateless requests, which no later
    /// request can find again) offers none.
    pub(crate) fn set_tasks(&self, store: Arc<TaskStore>) {
        // Set once, by the transport, before the first message.
        let _ = self.0.tasks.set(store);
    }

    /// Whether tasks are declared: the session keeps tasks, and a tool may run as one
    /// (a server whose tools all forbid tasks declares none).
    fn offers_tasks(&self) -> bool {
        self.0.tasks.get().is_some() && self.0.catalog.offers_tasks()
    }

    /// The task store, when tasks are offered in the request's revision.
    pub(super) fn tasks_for(&self, meta: &RequestMeta) -> Option<&Arc<TaskStore>> {
        self.0.tasks.get().filter(|_| meta.revision.has_tasks())
    }

    /// `result` (`initialize`'s) with the `tasks` capability, when the revision it
    /// settled on has tasks and this session offers them (a tool may run as a task).
    pub(super) fn with_task_capability(&self, mut result: Value) -> Value {
        let has_tasks = result["protocolVersion"]
            .as_str()
            .and_then(crate::revision::Revision::parse)
            .is_some_and(|revision| revision.has_tasks());
        if has_tasks && self.offers_tasks() {
            result["capabilities"]["tasks"] = json!({
                "list": {},
                "cancel": {},
                "requests": { "tools": { "call": {} } },
            });
        }
        result
    }

    /// `result` (`server/discover`'s) with the tasks extension, when this session
    /// offers tasks (a tool may run as a task).
    pub(super) fn with_task_extension(&self, mut result: Value) -> Value {
        if self.offers_tasks() {
            result["capabilities"]["extensions"][TASKS_EXTENSION] = json!({});
        }
        result
    }

    /// A `tools/call`: run as a task when the client asks for one and tasks are offered
    /// (then answered at once), else as a plain call. A task asked of a tool that
    /// forbids tasks, and a plain call of a tool that requires one, are refused with
    /// `-32601`, as MCP prescribes.
    pub(super) fn call_step(
        &self,
        id: RequestId,
        call: CallParams,
        params: &Params,
        meta: RequestMeta,
    ) -> Step {
        let Some(store) = self.tasks_for(&meta) else {
            return Step::Call(self.pending(id, Work::Tool(call), meta));
        };
        let asked = params
            .raw("task")
            .filter(|raw| raw_type_name(raw) != "null");
        let (support, tool_limit) = self.0.catalog.task_settings(&call.name);
        let Some(task) = asked else {
            if support == TaskSupport::Required {
                return Step::Reply(self.error(&RpcError::new(
                    id,
                    METHOD_NOT_FOUND,
                    format!(
                        "Method not found: tool {} runs only as a task (its execution.taskSupport is \"required\"); call it again with \"task\": {{}} in the params",
                        call.name
                    ),
                )));
            }
            return Step::Call(self.pending(id, Work::Tool(call), meta));
        };
        if support == TaskSupport::Forbidden {
            return Step::Reply(self.error(&RpcError::new(
                id,
                METHOD_NOT_FOUND,
                format!(
                    "Method not found: tool {} does not run as a task (its execution.taskSupport is \"forbidden\"); call it without \"task\"",
                    call.name
                ),
            )));
        }
        let ttl = match serde_json::from_str::<Value>(task.get()) {
            Ok(Value::Object(fields)) => match fields.get("ttl") {
                None | Some(Value::Null) => None,
                Some(Value::Number(ms)) if ms.as_u64().is_some() => ms.as_u64(),
                Some(other) => {
                    return Step::Reply(self.error(&RpcError::new(
                        id,
                        INVALID_PARAMS,
                        format!(
                            "Invalid params: \"task.ttl\" must be a whole number of milliseconds, got {}",
                            toolhost::registry::json_type(other)
                        ),
                    )))
                }
            },
            _ => {
                return Step::Reply(self.error(&RpcError::new(
                    id,
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: \"task\" must be an object (e.g. {{\"ttl\": 60000}}), got {}",
                        raw_type_name(task)
                    ),
                )))
            }
        };
        let created = match store.create(&self.0.env.session_id, ttl, &self.0.closed) {
            Ok(created) => created,
            Err(err) => {
                debug!(target: LOG_TARGET, request = %id, "task refused: {err}");
                return Step::Reply(self.error(&RpcError::new(
                    id,
                    TASK_LIMIT,
                    format!("Task refused: {err}"),
                )));
            }
        };
        let result = protocol::complete(&meta, json!({ "task": created.task }));
        let limit = store.time_limit(tool_limit);
        self.spawn_task(Arc::clone(store), created, call, limit, &meta);
        Step::Reply(Message::response(&id, Bytes::from(result.to_string())))
    }

    /// Runs task `created` in the background, within `limit`: it goes on whatever
    /// becomes of the request that started it, and ends with its result recorded.
    fn spawn_task(
        &self,
        store: Arc<TaskStore>,
        created: Created,
        call: CallParams,
        limit: std::time::Duration,
        meta: &RequestMeta,
    ) {
        let session = self.clone();
        let sink = if meta.modern {
            0
        } else {
            self.0.state.sink_id()
        };
        let revision = meta.revision;
        tokio::spawn(async move {
            let token = created.token.clone();
            let env = session.0.env.next_turn();
            let deadline = Instant::now() + limit;
            // The task's limit replaces --timeout and the plugin's per-call limit.
            let ctx = CallContext::new()
                .with_cancellation(token.clone())
                .with_time_limit(limit)
                .deadline_at(deadline);
            let call = ToolCall {
                id: created.id.clone(),
                name: call.name,
                arguments: call.arguments,
            };
            info!(target: LOG_TARGET, session_id = %env.session_id, turn_id = %env.turn_id, tool = %call.name, task = %created.id, "tools/call as a task");
            // A task has nobody to ask: a call that needs approval is refused, never run.
            let run = async {
                let policy = &session.0.catalog.asking.approval;
                if policy.needs_approval(session.registry(), &call.name) {
                    if let Err(err) = policy
                        .approve(session.registry(), &call.name, &call.arguments, None)
                        .await
                    {
                        session.registry().observe_refusal(&call, &env, &err);
                        return Err(err);
                    }
                }
                session.registry().dispatch(&ctx, &call, &env).await
            };
            let outcome = tracing::Instrument::instrument(run, logging::call_span(sink)).await;
            if token.is_cancelled() {
                store.stopped(created, "cancelled: the session ended");
                return;
            }
            let (result, error) = match outcome {
                // Stopped at the task's own limit, not the registry's per-call one: say so.
                Err(ToolError::TimedOut { tool, limit: ran })
                    if Instant::now() >= deadline && ran <= limit =>
                {
                    let message = format!(
                        "{tool}: the task ran past its time limit of {} and was stopped; ask for less work per task, or have the operator raise --task-timeout",
                        format_duration(limit)
                    );
                    let result = json!({
                        "content": [{ "type": "text", "text": message }],
                        "isError": true,
                    });
                    (result, Some(message))
                }
                outcome => (
                    call_result_for(&outcome, revision),
                    outcome.err().map(|err| err.to_string()),
                ),
            };
            store.finish(created, Bytes::from(result.to_string()), error);
        });
    }

    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, on this session's tasks.
    pub(super) fn task_request(
        &self,
        store: &Arc<TaskStore>,
        id: RequestId,
        method: &str,
        params: &Params,
        meta: RequestMeta,
    ) -> Step {
        let owner = self.0.env.session_id.as_str();
        let reply = |result: Value| {
            Step::Reply(Message::response(
                &id,
                Bytes::from(protocol::complete(&meta, result).to_string()),
            ))
        };
        if method == "tasks/list" {
            let cursor = match params.raw("cursor") {
                None => None,
                Some(raw) if raw_type_name(raw) == "null" => None,
                Some(raw) => match params.str("cursor") {
                    Some(cursor) => Some(cursor),
                    None => {
                        return Step::Reply(self.error(&RpcError::new(
                            id.clone(),
                            INVALID_PARAMS,
                            format!("Invalid params: \"cursor\" must be a string (the nextCursor of the last page), got {}", raw_type_name(raw)),
                        )))
                    }
                },
            };
            return match store.list(owner, cursor.as_deref()) {
                Ok(result) => reply(result),
                Err(message) => {
                    Step::Reply(self.error(&RpcError::new(id.clone(), INVALID_PARAMS, message)))
                }
            };
        }
        let task_id = match params.str("taskId") {
            Some(task_id) if task_id.len() <= MAX_TASK_ID_CHARS => task_id,
            // Too long to be one of ours: not one of the caller's tasks.
            Some(_) => return Step::Reply(self.error(&no_such_task(&id))),
            None => {
                let got = params.raw("taskId").map_or("nothing", raw_type_name);
                return Step::Reply(self.error(&RpcError::new(
                    id.clone(),
                    INVALID_PARAMS,
                    format!("Invalid params: {method} needs \"taskId\", a task's id as a string; got {got}"),
                )));
            }
        };
        match method {
            "tasks/get" => match store.get(owner, &task_id) {
                Some(task) => reply(task),
                None => Step::Reply(self.error(&no_such_task(&id))),
            },
            "tasks/cancel" => match store.cancel(owner, &task_id, "cancelled by the client") {
                Ok(task) => {
                    info!(target: LOG_TARGET, task = %task_id, "client cancelled a task");
                    reply(task)
                }
                Err(CancelError::NotFound) => Step::Reply(self.error(&no_such_task(&id))),
                Err(CancelError::Ended(status)) => Step::Reply(self.error(&RpcError::new(
                    id.clone(),
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: the task has already ended ({}); only a working task can be cancelled",
                        status.as_str()
                    ),
                ))),
            },
            _ => match store.outcome(owner, &task_id) {
                None => Step::Reply(self.error(&no_such_task(&id))),
                Some(Outcome::Ended(finished)) => {
                    Step::Reply(self.task_result(&id, &meta, &task_id, &finished))
                }
                Some(Outcome::Working(done)) => Step::Call(self.pending(
                    id,
                    Work::TaskResult(TaskWait { task_id, done }),
                    meta,
                )),
            },
        }
    }

    /// The `tasks/result` answer for a task that ended: its `tools/call` result, tied to
    /// the task in `_meta`; an error for a cancelled one, which has none.
    fn task_result(
        &self,
        id: &RequestId,
        meta: &RequestMeta,
        task_id: &str,
        finished: &Finished,
    ) -> Message {
        let result = match (&finished.result, finished.status) {
            (Some(result), Status::Completed | Status::Failed) => {
                serde_json::from_slice::<Value>(result).ok()
            }
            _ => None,
        };
        let Some(mut result) = result else {
            return self.error(&RpcError::new(
                id.clone(),
                INVALID_PARAMS,
                "Invalid params: the task was cancelled, so it has no result; tasks/get gives its status",
            ));
        };
        result["_meta"][RELATED_TASK] = json!({ "taskId": task_id });
        Message::response(
            id,
            Bytes::from(protocol::complete(meta, result).to_string()),
        )
    }
}
