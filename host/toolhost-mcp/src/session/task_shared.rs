//! Tasks of callers without a session shared with the other processes serving them
//! (`--state`, [`crate::state`]): a task is created in the shared backend before it is
//! answered (fail closed: no task when the backend is unreachable; a plain call never
//! touches it), its process renews its lease and learns of a cancellation made
//! elsewhere by a heartbeat every 200 ms, and its end is stored there; a `tasks/get`,
//! `tasks/cancel` or (2025-11-25) `tasks/result` for a task this process does not hold
//! asks the backend, and a 2025-11-25 `tasks/list` is answered from it.
//! Tasks of a session stay in the process holding the session (as the session does).

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::task_home::{TaskHome, TaskOwner};
use super::{Message, Registration, LOG_TARGET};
use crate::convert::CallParams;
use crate::jsonrpc::{RequestId, RpcError, INVALID_PARAMS};
use crate::limits::TASK_POLL_INTERVAL_MS;
use crate::protocol::{self, RequestMeta};
use crate::state::{
    CancelRefusal, Heartbeat, SharedTasks, StateError, TaskRecord, TaskStatus, HEARTBEAT_INTERVAL,
};
use crate::tasks::{
    published, Finished, Status, TaskStore, NO_SUCH_TASK, NO_SUCH_TASK_PUBLISHED, TASK_PAGE_SIZE,
};

/// JSON-RPC's implementation-defined server error, as for a task refused by its cap.
const TASK_REFUSED: i64 = -32000;

/// JSON-RPC's internal error: the task state server failed.
const INTERNAL_ERROR: i64 = -32603;

/// A task request that goes to the shared backend.
#[derive(Debug)]
pub(crate) enum SharedWork {
    /// Create a task for this call (in the backend, then here) and run it.
    Start {
        call: CallParams,
        tool_limit: Option<Duration>,
        /// The time to live the client asked for (2025-11-25's `task.ttl`), in ms.
        ttl: Option<u64>,
    },
    /// `tasks/get` of a task another process holds.
    Get(String),
    /// `tasks/cancel` of a task another process holds.
    Cancel(String),
    /// 2025-11-25's `tasks/result` of a task another process holds: waits for its end.
    Result(String),
    /// 2025-11-25's `tasks/list` (from this cursor): the caller's tasks in the backend.
    List(Option<String>),
}

impl SharedWork {
    /// What it holds while it waits.
    pub(super) fn held_bytes(&self) -> usize {
        match self {
            SharedWork::Start { call, .. } => call.arguments.len() + call.name.len(),
            SharedWork::Get(id) | SharedWork::Cancel(id) | SharedWork::Result(id) => id.len(),
            SharedWork::List(cursor) => cursor.as_ref().map_or(0, String::len),
        }
    }

    /// Its method.
    #[cfg(test)]
    pub(super) fn method(&self) -> &str {
        match self {
            SharedWork::Start { call, .. } => &call.name,
            SharedWork::Get(_) => "tasks/get",
            SharedWork::Cancel(_) => "tasks/cancel",
            SharedWork::Result(_) => "tasks/result",
            SharedWork::List(_) => "tasks/list",
        }
    }

    /// Runs it: the answer to the request.
    pub(super) async fn run(
        self,
        registration: Registration,
        id: &RequestId,
        meta: &RequestMeta,
    ) -> Option<Message> {
        let session = registration.session.clone();
        let token = registration.token.clone();
        drop(registration);
        let home = session.0.tasks.get()?;
        let no_such_task = if meta.modern {
            NO_SUCH_TASK_PUBLISHED
        } else {
            NO_SUCH_TASK
        };
        let Some(shared) = shared_for(home) else {
            return Some(session.error(&RpcError::new(id.clone(), INVALID_PARAMS, no_such_task)));
        };
        let owner = home.owner.key().into_owned();
        let reply = |result: Value| {
            Message::response(
                id,
                Bytes::from(protocol::complete(meta, result).to_string()),
            )
        };
        let unavailable = |err: &StateError| {
            session.error(&RpcError::new(
                id.clone(),
                INTERNAL_ERROR,
                format!("Internal error: {err}"),
            ))
        };
        let unknown = || session.error(&RpcError::new(id.clone(), INVALID_PARAMS, no_such_task));
        Some(match self {
            SharedWork::Start {
                call,
                tool_limit,
                ttl,
            } => {
                let created = match session.create_task(home, id, ttl, meta) {
                    Ok(created) => created,
                    Err(refused) => return Some(refused),
                };
                let record = record_of(&created.task, &created.id, &owner);
                if let Err(err) = shared.backend.create(&record, shared.lease).await {
                    warn!(target: LOG_TARGET, request = %id, "task refused: {err}");
                    home.store
                        .stopped(created, "not started: the task state server failed");
                    return Some(session.error(&RpcError::new(
                        id.clone(),
                        TASK_REFUSED,
                        format!("Task refused: {err}"),
                    )));
                }
                let task = created.task.clone();
                let limit = home.store.time_limit(tool_limit);
                session.spawn_task(Arc::clone(&home.store), created, call, limit, meta, true);
                if !meta.modern {
                    return Some(reply(json!({ "task": task })));
                }
                let mut result = protocol::complete(meta, published(task, None, None));
                result["resultType"] = json!("task");
                Message::response(id, Bytes::from(result.to_string()))
            }
            SharedWork::Get(task_id) => match shared.backend.get(&owner, &task_id).await {
                Ok(Some(record)) if meta.modern => reply(detailed(&record)),
                Ok(Some(record)) => reply(task_json(&record)),
                Ok(None) => unknown(),
                Err(err) => unavailable(&err),
            },
            SharedWork::Cancel(task_id) => {
                match shared
                    .backend
                    .cancel(&owner, &task_id, "cancelled by the client")
                    .await
                {
                    Ok(record) => {
                        info!(target: LOG_TARGET, task = %task_id, "client cancelled a task held by another process");
                        reply(if meta.modern {
                            json!({})
                        } else {
                            task_json(&record)
                        })
                    }
                    // As for a task held here: a request, acknowledged all the same.
                    Err(CancelRefusal::Ended(_)) if meta.modern => reply(json!({})),
                    Err(CancelRefusal::Ended(status)) => session.error(&RpcError::new(
                        id.clone(),
                        INVALID_PARAMS,
                        format!(
                            "Invalid params: the task has already ended ({}); only a working task can be cancelled",
                            status.as_str()
                        ),
                    )),
                    Err(CancelRefusal::NotFound) => unknown(),
                    Err(CancelRefusal::State(err)) => unavailable(&err),
                }
            }
            SharedWork::Result(task_id) => loop {
                // Polled at the heartbeat's pace until it ends (its record is forgotten
                // with its time to live at the latest), or the client gives up.
                match shared.backend.get(&owner, &task_id).await {
                    Ok(Some(record)) if !record.status.running() => {
                        let finished = finished(&record);
                        break session.task_result(id, meta, &task_id, &finished);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break unknown(),
                    Err(err) => break unavailable(&err),
                }
                tokio::select! {
                    () = token.cancelled() => return None,
                    () = tokio::time::sleep(HEARTBEAT_INTERVAL) => {}
                }
            },
            SharedWork::List(cursor) => match shared.backend.list(&owner).await {
                Ok(records) => match page(&records, cursor.as_deref()) {
                    Ok(result) => reply(result),
                    Err(message) => {
                        session.error(&RpcError::new(id.clone(), INVALID_PARAMS, message))
                    }
                },
                Err(err) => unavailable(&err),
            },
        })
    }
}

/// The shared backend, when `home`'s tasks go there (a caller without a session, on a
/// server given one).
pub(super) fn shared_for(home: &TaskHome) -> Option<&SharedTasks> {
    home.store
        .shared()
        .filter(|_| !matches!(home.owner, TaskOwner::Session(_)))
}

/// The stored record of a task just created (`task`: its `Task`).
fn record_of(task: &Value, id: &str, owner: &str) -> TaskRecord {
    let now = crate::state::now_ms();
    TaskRecord {
        id: id.to_owned(),
        owner: owner.to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_ms: now,
        updated_ms: now,
        ttl_ms: task["ttl"].as_u64().unwrap_or(0),
        result: None,
    }
}

/// A page of `records` (oldest first) as 2025-11-25's `tasks/list` gives it, from
/// `cursor` (the number of tasks on the pages before, as this gave it).
fn page(records: &[TaskRecord], cursor: Option<&str>) -> Result<Value, String> {
    let from = match cursor {
        None => 0,
        Some(text) => text.parse::<usize>().map_err(|_| {
            "Invalid params: \"cursor\" is not one this server gave; send the nextCursor of the last tasks/list page, or none for the first".to_owned()
        })?,
    };
    let tasks: Vec<Value> = records
        .iter()
        .skip(from)
        .take(TASK_PAGE_SIZE)
        .map(task_json)
        .collect();
    let next = from.saturating_add(tasks.len());
    let mut result = json!({ "tasks": tasks });
    if next < records.len() {
        result["nextCursor"] = json!(next.to_string());
    }
    Ok(result)
}

/// How a stored record ended, as `tasks/result` answers it.
fn finished(record: &TaskRecord) -> Finished {
    let status = match record.status {
        TaskStatus::Working => Status::Working,
        TaskStatus::InputRequired => Status::InputRequired,
        TaskStatus::Completed => Status::Completed,
        TaskStatus::Failed => Status::Failed,
        TaskStatus::Cancelled => Status::Cancelled,
    };
    Finished {
        status,
        result: record.result.clone().map(Bytes::from),
    }
}

/// A stored record as MCP's `Task` (2025-11-25's `tasks/get`).
fn task_json(record: &TaskRecord) -> Value {
    let time =
        |ms: u64| toolhost::registry::format_utc_time(UNIX_EPOCH + Duration::from_millis(ms));
    let mut task = json!({
        "taskId": record.id,
        "status": record.status.as_str(),
        "createdAt": time(record.created_ms),
        "lastUpdatedAt": time(record.updated_ms),
        "ttl": record.ttl_ms,
        "pollInterval": TASK_POLL_INTERVAL_MS,
    });
    if let Some(message) = &record.status_message {
        task["statusMessage"] = json!(message);
    }
    task
}

/// A stored record as the published extension's `DetailedTask`.
fn detailed(record: &TaskRecord) -> Value {
    published(task_json(record), Some(&finished(record)), None)
}

/// Renews task `id`'s lease every [`HEARTBEAT_INTERVAL`] until `stop`; a heartbeat
/// finding it ended elsewhere (cancelled through another process) cancels it here.
/// A backend that fails is tried again at the next beat (the task goes on; its lease
/// runs out if the backend stays away longer than it).
pub(super) async fn keep_lease(
    shared: SharedTasks,
    store: Arc<TaskStore>,
    owner: String,
    id: String,
    stop: CancellationToken,
) {
    let mut beat = tokio::time::interval(HEARTBEAT_INTERVAL);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = beat.tick() => {}
        }
        match shared.backend.heartbeat(&id, shared.lease).await {
            Ok(Heartbeat::Running) => {}
            Ok(Heartbeat::Ended(status)) => {
                info!(target: LOG_TARGET, task = %id, status = status.as_str(), "task ended through another process: stopping its call");
                let reason = if status == TaskStatus::Cancelled {
                    "cancelled by the client"
                } else {
                    // Its lease ran out while the backend was away: the others already
                    // report it failed, so it stops here too.
                    "stopped: its lease ran out while the task state server was away"
                };
                let _ = store.cancel(&owner, &id, reason);
                return;
            }
            Ok(Heartbeat::Gone) => {
                let _ = store.cancel(&owner, &id, "cancelled: its record expired");
                return;
            }
            Err(err) => debug!(target: LOG_TARGET, task = %id, "lease not renewed: {err}"),
        }
    }
}

/// Stores how task `id` ended here (`task`: its `Task` now; `None` when it was
/// cancelled), with its result as the store kept it.
pub(super) async fn store_end(
    shared: &SharedTasks,
    store: &TaskStore,
    owner: &str,
    id: &str,
    task: Option<&Value>,
) {
    let ended = match task {
        None => {
            shared
                .backend
                .finish(id, TaskStatus::Cancelled, Some("cancelled"), None)
                .await
        }
        Some(task) => {
            let status = task["status"]
                .as_str()
                .and_then(TaskStatus::parse)
                .unwrap_or(TaskStatus::Failed);
            let result = match store.outcome(owner, id) {
                Some(crate::tasks::Outcome::Ended(finished)) => finished
                    .result
                    .as_ref()
                    .and_then(|bytes| std::str::from_utf8(bytes).ok().map(str::to_owned)),
                _ => None,
            };
            let result = result.filter(|text| text.len() <= store.max_result_bytes());
            shared
                .backend
                .finish(
                    id,
                    status,
                    task["statusMessage"].as_str(),
                    result.as_deref(),
                )
                .await
        }
    };
    if let Err(err) = ended {
        warn!(target: LOG_TARGET, task = %id, "the task's end was not stored in the task state server: {err}; other processes will report it failed when its lease runs out");
    }
}

/// Whether a 2026-07-28 task request for `task_id` goes to the shared backend: the
/// caller's tasks are shared and this process does not hold it.
pub(super) fn shared_elsewhere(home: &TaskHome, task_id: &str) -> bool {
    shared_for(home).is_some() && home.store.get(&home.owner.key(), task_id).is_none()
}
