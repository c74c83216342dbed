//! 2026-07-28's tasks as the published extension has them (ext-tasks commit e434597): a
//! `tools/call` the server decides to run as a task (`resultType: "task"`), `tasks/get`
//! with the result inline, `tasks/update` and `tasks/cancel` acknowledged empty, no
//! `tasks/result` or `tasks/list`, and `notifications/tasks` through
//! `subscriptions/listen` `taskIds`. The task store and 2025-11-25's tasks are in
//! [`super::tasks`].

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;
use tracing::{debug, info};

use toolhost::registry::TaskSupport;

use super::task_home::TaskHome;
use super::task_shared::SharedWork;
use super::tasks::MAX_TASK_ID_CHARS;
use super::{Session, Step, Work, LOG_TARGET};
use crate::convert::CallParams;
use crate::jsonrpc::{
    raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS, METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use crate::limits::MAX_LISTEN_TASKS;
use crate::protocol::{self, RequestMeta};
use crate::session::Message;
use crate::tasks::{
    published, CancelError, TaskStore, NO_SUCH_TASK_PUBLISHED, TASKS_EXTENSION, UPDATE_METHOD,
};

/// The `-32021` answer to a 2026-07-28 request that needs the tasks extension but does
/// not declare it in its client capabilities (`why`: what needed it).
fn tasks_not_declared(id: &RequestId, why: &str) -> RpcError {
    RpcError::new(
        id.clone(),
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("Missing required client capability: {why}; declare the extension in \"_meta\" (\"io.modelcontextprotocol/clientCapabilities\": {{\"extensions\": {{\"{TASKS_EXTENSION}\": {{}}}}}})"),
    )
    .with_data(json!({
        "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } }
    }))
}

/// The tasks a 2026-07-28 `subscriptions/listen` asked to hear of (`taskIds`): those
/// that are the caller's, each with what tells when it changes.
pub(crate) struct ListenTasks {
    store: Option<Arc<TaskStore>>,
    owner: String,
    /// The task ids acknowledged, each with what tells of its changes.
    pub(super) ids: Vec<(String, watch::Receiver<u64>)>,
}

impl std::fmt::Debug for ListenTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenTasks")
            .field("ids", &self.ids.len())
            .finish_non_exhaustive()
    }
}

impl ListenTasks {
    /// The `notifications/tasks` for task `id` now (its `DetailedTask`, as `tasks/get`
    /// gives it, tagged with `tag`), unless it was forgotten meanwhile. Changes that
    /// come faster than they are sent are told once, as the task is then.
    pub(super) fn notification(&self, id: &str, tag: &Value) -> Option<Message> {
        let mut task = self.store.as_ref()?.detailed(&self.owner, id)?;
        task["_meta"] = tag.clone();
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks",
            "params": task,
        });
        Some(Message::text(note.to_string()))
    }
}

impl Session {
    /// The tasks a 2026-07-28 `subscriptions/listen` names (`notifications.taskIds`):
    /// those that are the caller's (any other id, another owner's included, is left out
    /// of the acknowledgement alike); `None` when it names none.
    ///
    /// # Errors
    /// `-32602` for `taskIds` that is not an array of strings or names more than
    /// [`MAX_LISTEN_TASKS`]; `-32021` when the request does not declare the tasks
    /// extension, as the extension prescribes.
    pub(super) fn listen_tasks(
        &self,
        id: &RequestId,
        params: &Params,
        meta: &RequestMeta,
    ) -> Result<Option<ListenTasks>, RpcError> {
        let Some(Value::Object(filter)) = params.value("notifications") else {
            return Ok(None);
        };
        let invalid = |message: String| RpcError::new(id.clone(), INVALID_PARAMS, message);
        let ids = match filter.get("taskIds") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => ids,
            Some(_) => return Err(invalid(
                "Invalid params: \"notifications.taskIds\" must be an array of task ids (strings)"
                    .to_owned(),
            )),
        };
        if ids.len() > MAX_LISTEN_TASKS {
            return Err(invalid(format!(
                "Invalid params: \"notifications.taskIds\" names {} tasks; one subscription may listen to at most {MAX_LISTEN_TASKS}",
                ids.len()
            )));
        }
        if !meta.client_tasks {
            return Err(tasks_not_declared(
                id,
                "\"notifications.taskIds\" asks for task status notifications",
            ));
        }
        let Some(home) = self.tasks_for(meta) else {
            return Ok(Some(ListenTasks {
                store: None,
                owner: String::new(),
                ids: Vec::new(),
            }));
        };
        let owner = home.owner.key().into_owned();
        let mut listened: Vec<(String, watch::Receiver<u64>)> = Vec::new();
        for task_id in ids.iter().filter_map(Value::as_str) {
            if task_id.len() > MAX_TASK_ID_CHARS
                || listened.iter().any(|(known, _)| known == task_id)
            {
                continue;
            }
            if let Some(done) = home.store.watch(&owner, task_id) {
                listened.push((task_id.to_owned(), done));
            }
        }
        Ok(Some(ListenTasks {
            store: Some(Arc::clone(&home.store)),
            owner,
            ids: listened,
        }))
    }

    /// A 2026-07-28 `tools/call`, as the published extension has it: the server decides.
    /// A client declaring the extension gets a task for a tool that may run as one
    /// (`execution.taskSupport` optional or required), answered at once with
    /// `resultType: "task"`; any other call runs plain, but a tool that runs only as a
    /// task, called by a client not declaring the extension, is refused with `-32021`.
    pub(super) fn published_call_step(
        &self,
        home: &TaskHome,
        id: RequestId,
        call: CallParams,
        meta: RequestMeta,
    ) -> Step {
        let (support, tool_limit) = self.0.catalog.task_settings(&call.name);
        match (support, meta.client_tasks) {
            (TaskSupport::Forbidden, _) | (TaskSupport::Optional, false) => {
                Step::Call(self.pending(id, Work::Tool(call), meta))
            }
            (TaskSupport::Required, false) => Step::Reply(self.error(&tasks_not_declared(
                &id,
                &format!("tool {} runs only as a task", call.name),
            ))),
            (TaskSupport::Optional | TaskSupport::Required, true)
                if super::task_shared::shared_for(home).is_some() =>
            {
                // Stored in the shared backend before it is answered: an await.
                Step::Call(self.pending(
                    id,
                    Work::SharedTask(SharedWork::Start {
                        call,
                        tool_limit,
                        ttl: None,
                    }),
                    meta,
                ))
            }
            (TaskSupport::Optional | TaskSupport::Required, true) => {
                match self.start_task(home, &id, call, None, tool_limit, &meta) {
                    Ok(task) => {
                        let mut result = protocol::complete(&meta, published(task, None, None));
                        result["resultType"] = json!("task");
                        Step::Reply(Message::response(&id, Bytes::from(result.to_string())))
                    }
                    Err(refused) => Step::Reply(refused),
                }
            }
        }
    }

    /// A 2026-07-28 task request, as the published extension has it: `tasks/get` (the
    /// task with its result inline), `tasks/update` and `tasks/cancel` (acknowledged
    /// empty); `tasks/result` and `tasks/list` are not part of it. Every one needs the
    /// extension declared in the request's client capabilities (`-32021`).
    pub(super) fn published_task_request(
        &self,
        home: &TaskHome,
        id: RequestId,
        method: &str,
        params: &Params,
        meta: &RequestMeta,
    ) -> Step {
        let instead = match method {
            "tasks/result" => Some("tasks/get gives a task's result inline (\"result\") once its status is completed"),
            "tasks/list" => Some("keep the taskId of the tools/call result whose resultType is \"task\" and ask tasks/get"),
            _ => None,
        };
        if let Some(instead) = instead {
            return Step::Reply(self.error(&RpcError::new(
                id,
                METHOD_NOT_FOUND,
                format!("Method not found: {method} is not part of the tasks extension ({TASKS_EXTENSION}) of protocol version {}; {instead}", meta.revision),
            )));
        }
        if !meta.client_tasks {
            return Step::Reply(self.error(&tasks_not_declared(
                &id,
                &format!("{method} is a method of the tasks extension"),
            )));
        }
        let unknown = |id: &RequestId| {
            Step::Reply(self.error(&RpcError::new(
                id.clone(),
                INVALID_PARAMS,
                NO_SUCH_TASK_PUBLISHED,
            )))
        };
        let task_id = match params.str("taskId") {
            Some(task_id) if task_id.len() <= MAX_TASK_ID_CHARS => task_id,
            // Too long to be one of ours: not one of the caller's tasks.
            Some(_) => return unknown(&id),
            None => {
                let got = params.raw("taskId").map_or("nothing", raw_type_name);
                return Step::Reply(self.error(&RpcError::new(
                    id,
                    INVALID_PARAMS,
                    format!("Invalid params: {method} needs \"taskId\", a task's id as a string; got {got}"),
                )));
            }
        };
        if method != UPDATE_METHOD && super::task_shared::shared_elsewhere(home, &task_id) {
            let work = if method == "tasks/get" {
                SharedWork::Get(task_id)
            } else {
                SharedWork::Cancel(task_id)
            };
            return Step::Call(self.pending(id, Work::SharedTask(work), meta.clone()));
        }
        let key = home.owner.key();
        let (store, owner) = (&home.store, &*key);
        let reply = |result: Value| {
            Step::Reply(Message::response(
                &id,
                Bytes::from(protocol::complete(meta, result).to_string()),
            ))
        };
        match method {
            "tasks/get" => match store.detailed(owner, &task_id) {
                Some(task) => reply(task),
                None => unknown(&id),
            },
            UPDATE_METHOD => {
                // Checked before the task is looked up, so that a malformed update is
                // answered alike whoever's the task.
                let Some(Value::Object(responses)) = params.value("inputResponses") else {
                    let got = params
                        .raw("inputResponses")
                        .map_or("nothing", raw_type_name);
                    return Step::Reply(self.error(&RpcError::new(
                        id,
                        INVALID_PARAMS,
                        format!("Invalid params: tasks/update needs \"inputResponses\", an object of answers keyed as the task's inputRequests; got {got}"),
                    )));
                };
                // A response to the open question's key goes to the call; every other
                // one is ignored, as the extension says of keys not outstanding, and
                // none is kept.
                match store.respond(owner, &task_id, &responses) {
                    None => unknown(&id),
                    Some(taken) => {
                        debug!(target: LOG_TARGET, task = %task_id, taken, "tasks/update");
                        reply(json!({}))
                    }
                }
            }
            _ => match store.cancel(owner, &task_id, "cancelled by the client") {
                Ok(_) => {
                    info!(target: LOG_TARGET, task = %task_id, "client cancelled a task");
                    reply(json!({}))
                }
                // Cancellation is only a request: a task that already ended stays as it
                // ended, and the request is acknowledged all the same.
                Err(CancelError::Ended(_)) => reply(json!({})),
                Err(CancelError::NotFound) => unknown(&id),
            },
        }
    }
}
