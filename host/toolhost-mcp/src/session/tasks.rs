//! Tasks in a session ([`crate::tasks`]): a `tools/call` asking for a task starts it and
//! is answered at once; `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`
//! reach the session's own tasks only. A 2026-07-28 request follows the published
//! extension instead ([`super::task_published`]).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{format_duration, CallContext, TaskSupport, ToolCall, ToolError};

use super::interaction::SessionInteraction;
use super::task_asking::{TaskAsker, TaskOutlet};
pub(crate) use super::task_home::{TaskHome, TaskOwner};
use super::task_inputs::TaskInputs;
use super::{Notifier, Registration, Session, Step, Work, LOG_TARGET};
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
pub(super) const MAX_TASK_ID_CHARS: usize = 64;

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
    ///
    /// While it waits, a question of the task's call goes to the client on `channel`
    /// (its HTTP event stream), the one open now included if no channel took it.
    pub(super) async fn run(
        mut self,
        registration: Registration,
        id: &RequestId,
        meta: &RequestMeta,
        channel: Notifier,
    ) -> Option<Message> {
        let token = registration.token.clone();
        let outlet = registration
            .session
            .0
            .tasks
            .get()
            .and_then(|home| home.askers().get(&self.task_id).cloned());
        let _attached = outlet
            .filter(|_| channel.is_connected())
            .map(|outlet| outlet.attach(channel));
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
    /// sessions) under `owner`; only requests of the same owner reach them. A session
    /// without one offers none.
    pub(crate) fn set_tasks(&self, store: Arc<TaskStore>, owner: TaskOwner) {
        // Set once, by the transport, before the first message.
        let _ = self.0.tasks.set(TaskHome::new(store, owner));
    }

    /// Tells the client that a task's status changed (`notifications/tasks/status`,
    /// 2025-11-25), with `task` as `tasks/get` gives it now, through the session's own
    /// notifications (stdio: the output; HTTP: the session's GET stream, if open). Never
    /// waits: past the session's rate ([`STATUS_PER_SECOND`](super::task_home::STATUS_PER_SECOND)), or when the client's queue
    /// is full, it is dropped.
    pub(super) fn tell_status(&self, task: &Value) {
        let Some(home) = self.0.tasks.get() else {
            return;
        };
        if !home.admit() {
            debug!(target: LOG_TARGET, task = %task["taskId"], "task status notification dropped: over the session's rate");
            return;
        }
        let line = json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks/status",
            "params": task,
        });
        if !self.notifier().try_send(Message::text(line.to_string())) {
            debug!(target: LOG_TARGET, task = %task["taskId"], "task status notification dropped: the client is not reading (or cannot take it)");
        }
    }

    /// Whether tasks are declared: the session keeps tasks, and a tool may run as one
    /// (a server whose tools all forbid tasks declares none).
    fn offers_tasks(&self) -> bool {
        self.0.tasks.get().is_some() && self.0.catalog.offers_tasks()
    }

    /// The task store, when tasks are offered in the request's revision.
    pub(super) fn tasks_for(&self, meta: &RequestMeta) -> Option<&TaskHome> {
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
        let Some(home) = self.tasks_for(&meta) else {
            return Step::Call(self.pending(id, Work::Tool(call), meta));
        };
        if meta.modern {
            return self.published_call_step(home, id, call, meta);
        }
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
        if super::task_shared::shared_for(home).is_some() {
            // Stored in the shared backend before it is answered: an await.
            let work = super::task_shared::SharedWork::Start {
                call,
                tool_limit,
                ttl,
            };
            return Step::Call(self.pending(id, Work::SharedTask(work), meta));
        }
        match self.start_task(home, &id, call, ttl, tool_limit, &meta) {
            Ok(task) => {
                let result = protocol::complete(&meta, json!({ "task": task }));
                Step::Reply(Message::response(&id, Bytes::from(result.to_string())))
            }
            Err(refused) => Step::Reply(refused),
        }
    }

    /// Creates a task for `call` (kept `ttl` ms at most) and runs it in the background:
    /// the new task (2025-11-25's `Task`), or the error answering a task refused (the
    /// caller's or the server's task cap).
    pub(super) fn start_task(
        &self,
        home: &TaskHome,
        id: &RequestId,
        call: CallParams,
        ttl: Option<u64>,
        tool_limit: Option<std::time::Duration>,
        meta: &RequestMeta,
    ) -> Result<Value, Message> {
        let created = self.create_task(home, id, ttl, meta)?;
        let store = &home.store;
        let task = created.task.clone();
        let limit = store.time_limit(tool_limit);
        self.spawn_task(Arc::clone(store), created, call, limit, meta, false);
        Ok(task)
    }

    /// Creates a task in this process's store (kept `ttl` ms at most), or the error
    /// answering a task refused (the caller's or the server's task cap).
    pub(super) fn create_task(
        &self,
        home: &TaskHome,
        id: &RequestId,
        ttl: Option<u64>,
        meta: &RequestMeta,
    ) -> Result<Created, Message> {
        let store = &home.store;
        let created = match store.create(&home.owner.key(), ttl, &self.0.closed) {
            Ok(created) => created,
            Err(err) => {
                debug!(target: LOG_TARGET, request = %id, "task refused: {err}");
                let message = match err {
                    // The published extension has no tasks/result to name.
                    crate::tasks::CreateError::SessionFull(most) if meta.modern => format!(
                        "this caller already holds {most} tasks, the most allowed; cancel one (tasks/cancel) or wait until one expires"
                    ),
                    err => err.to_string(),
                };
                return Err(self.error(&RpcError::new(
                    id.clone(),
                    TASK_LIMIT,
                    format!("Task refused: {message}"),
                )));
            }
        };
        Ok(created)
    }

    /// Runs task `created` in the background, within `limit`: it goes on whatever
    /// becomes of the request that started it, and ends with its result recorded (in
    /// the shared backend too, when the caller's tasks are shared, which also has its
    /// lease renewed while it runs).
    pub(super) fn spawn_task(
        &self,
        store: Arc<TaskStore>,
        created: Created,
        call: CallParams,
        limit: std::time::Duration,
        meta: &RequestMeta,
        in_backend: bool,
    ) {
        let session = self.clone();
        let sink = if meta.modern {
            0
        } else {
            self.0.state.sink_id()
        };
        let revision = meta.revision;
        let trace_parent = meta.trace_parent;
        // 2026-07-28's extension tells of status changes its own way (see docs/protocol.md).
        let tells = !meta.modern;
        // A 2025-11-25 client that declared elicitation can be asked (`input_required`,
        // `elicitation/create`); a 2026-07-28 request that declares it, through the
        // task's `inputRequests` and `tasks/update`.
        let asks = !meta.modern && self.0.questions.client_asks();
        let inputs = meta.modern && meta.client_asks;
        // Registered before the task is answered, so a tasks/result that comes at once
        // finds where its questions go.
        let outlet = self.0.tasks.get().filter(|_| asks).map(|home| {
            let outlet = Arc::new(TaskOutlet::new(Arc::clone(&self.0.notifier)));
            home.askers()
                .insert(created.id.clone(), Arc::clone(&outlet));
            outlet
        });
        // The caller's tasks shared with other processes: the lease, and where it ends
        // (`in_backend`: a task of a caller without a session, created there first).
        let shared = self.0.tasks.get().filter(|_| in_backend).and_then(|home| {
            super::task_shared::shared_for(home).map(|shared| {
                // Stops its heartbeat when the task ends (or its run is dropped).
                let beating = CancellationToken::new();
                (shared.clone(), home.owner.key().into_owned(), beating)
            })
        });
        tokio::spawn(async move {
            let token = created.token.clone();
            let _beating = shared
                .as_ref()
                .map(|(_, _, beating)| beating.clone().drop_guard());
            if let Some((shared, owner, beating)) = &shared {
                tokio::spawn(super::task_shared::keep_lease(
                    shared.clone(),
                    Arc::clone(&store),
                    owner.clone(),
                    created.id.clone(),
                    beating.clone(),
                ));
            }
            let env = session.0.env.next_turn();
            let deadline = Instant::now() + limit;
            // The task's limit replaces --timeout and the plugin's per-call limit.
            let mut ctx = CallContext::new()
                .with_cancellation(token.clone())
                .with_time_limit(limit)
                .deadline_at(deadline)
                .with_gate(session.0.catalog.asking.approval.gate());
            if let Some(parent) = trace_parent {
                ctx = ctx.with_trace_parent(parent);
            }
            let home = session.0.tasks.get();
            if inputs {
                ctx = ctx.with_interaction(Arc::new(TaskInputs::new(
                    Arc::clone(&store),
                    created.id.clone(),
                    revision,
                    session.0.catalog.asking.timeout,
                    token.clone(),
                )));
            }
            if let Some(outlet) = outlet {
                let inner = SessionInteraction::for_task(
                    Arc::clone(&session.0.questions),
                    Notifier::new(Arc::clone(&outlet) as Arc<dyn super::Outlet>),
                    token.clone(),
                    session.0.catalog.asking.timeout,
                    revision,
                    created.id.clone(),
                );
                ctx = ctx.with_interaction(Arc::new(TaskAsker::new(
                    inner,
                    outlet,
                    Arc::clone(&store),
                    created.id.clone(),
                    session.clone(),
                )));
            }
            let call = ToolCall {
                id: created.id.clone(),
                name: call.name,
                arguments: call.arguments,
            };
            info!(target: LOG_TARGET, session_id = %env.session_id, turn_id = %env.turn_id, tool = %call.name, task = %created.id, "tools/call as a task");
            // Approval asks the user through the task (`input_required`); with nobody
            // to ask, a call that needs approval is refused, never run. The question
            // and the call together stay within the task's time limit.
            let run = async {
                let policy = &session.0.catalog.asking.approval;
                if policy.needs_approval(session.registry(), &call.name) {
                    if let Err(err) = policy
                        .approve(
                            session.registry(),
                            &call.name,
                            &call.arguments,
                            ctx.interaction(),
                        )
                        .await
                    {
                        session.registry().observe_refusal(&call, &env, &err);
                        return Err(err);
                    }
                }
                session.registry().dispatch(&ctx, &call, &env).await
            };
            let run = tracing::Instrument::instrument(run, logging::call_span(sink));
            let outcome = tokio::time::timeout_at(deadline.into(), run)
                .await
                .unwrap_or_else(|_| {
                    Err(ToolError::TimedOut {
                        tool: call.name.clone(),
                        limit,
                    })
                });
            if let Some(home) = home {
                home.askers().remove(&created.id);
            }
            if token.is_cancelled() {
                let id = created.id.clone();
                store.stopped(created, "cancelled: the session ended");
                if let Some((shared, owner, beating)) = &shared {
                    beating.cancel();
                    super::task_shared::store_end(shared, &store, owner, &id, None).await;
                }
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
            let id = created.id.clone();
            let changed = store.finish(created, Bytes::from(result.to_string()), error);
            if let Some((shared, owner, beating)) = &shared {
                beating.cancel();
                super::task_shared::store_end(shared, &store, owner, &id, changed.as_ref()).await;
            }
            if let Some(task) = changed.filter(|_| tells) {
                session.tell_status(&task);
            }
        });
    }

    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, on this session's tasks.
    pub(super) fn task_request(
        &self,
        home: &TaskHome,
        id: RequestId,
        method: &str,
        params: &Params,
        meta: RequestMeta,
    ) -> Step {
        if meta.modern {
            return self.published_task_request(home, id, method, params, &meta);
        }
        let key = home.owner.key();
        let (store, owner) = (&home.store, &*key);
        let reply = |result: Value| {
            Step::Reply(Message::response(
                &id,
                Bytes::from(protocol::complete(&meta, result).to_string()),
            ))
        };
        let shared = super::task_shared::shared_for(home).is_some();
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
            if shared {
                // Every task of the caller is in the backend, wherever it runs.
                let work = super::task_shared::SharedWork::List(cursor);
                return Step::Call(self.pending(id, Work::SharedTask(work), meta));
            }
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
        if shared && super::task_shared::shared_elsewhere(home, &task_id) {
            use super::task_shared::SharedWork;
            let work = match method {
                "tasks/get" => SharedWork::Get(task_id),
                "tasks/cancel" => SharedWork::Cancel(task_id),
                _ => SharedWork::Result(task_id),
            };
            return Step::Call(self.pending(id, Work::SharedTask(work), meta));
        }
        match method {
            "tasks/get" => match store.get(owner, &task_id) {
                Some(task) => reply(task),
                None => Step::Reply(self.error(&no_such_task(&id))),
            },
            "tasks/cancel" => match store.cancel(owner, &task_id, "cancelled by the client") {
                Ok(task) => {
                    info!(target: LOG_TARGET, task = %task_id, "client cancelled a task");
                    if !meta.modern {
                        self.tell_status(&task);
                    }
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
    pub(super) fn task_result(
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
