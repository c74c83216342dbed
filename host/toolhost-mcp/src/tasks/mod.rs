//! MCP tasks: a `tools/call` the client asks to run as a task is answered at once with
//! a task id, runs in the background, and its result is fetched later (`tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel`). Revision 2025-11-25 defines them (the
//! `tasks` capability, `execution.taskSupport` on a tool); 2026-07-28 moved them to the
//! extension `io.modelcontextprotocol/tasks`, served as published (ext-tasks commit
//! e434597): a `tools/call` of a client declaring the extension may be answered with
//! `resultType: "task"`, `tasks/get` gives the result inline, `tasks/update` answers a
//! task's questions, and there is no `tasks/result` nor `tasks/list` ([`published`]).
//!
//! A [`TaskStore`] keeps the tasks of every session of one server, each owned by the
//! session that started it (over HTTP without a session: by the bearer token of the
//! request that started it): another owner's task id is answered exactly as an unknown
//! one. A task's status changes are told to its session (`notifications/tasks/status`),
//! and while its call waits for its user's answer it is `input_required`. What it keeps
//! is bounded ([`McpLimits`](crate::McpLimits)); "session" below is an owner:
//! - a task holds a place while it works and while it keeps a completed result; at most
//!   `max_tasks` places in all and `max_tasks_per_session` per session. A task that
//!   failed (its time limit, a tool error) or was cancelled gives its place back at
//!   once; its status and message stay readable, the oldest forgotten past
//!   `max_tasks_per_session` such tasks of one session, or `max_tasks` of all sessions
//!   (however many sessions came and went);
//! - results (and failure messages) kept count against `max_task_result_bytes`; one past
//!   it is not kept, and the task fails saying so;
//! - every task is forgotten `ttl` after its creation (`task_ttl`, or less when the
//!   client asks for less).
//!
//! Its parts: [`store`] (the [`TaskStore`]: its bounds, a task created, ended,
//! cancelled, forgotten), [`lookup`] (what `tasks/get`, `tasks/result`, `tasks/list`
//! and `subscriptions/listen` read), [`questions`] (a task waiting for its user's
//! answer), [`records`] (what is kept of each task and each session, and the
//! bookkeeping of places, bytes and expiry) and [`wire`] (a task's JSON forms).

#[cfg(test)]
pub(crate) mod tests;

mod lookup;
mod questions;
mod records;
mod store;
mod wire;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use self::store::TaskStore;
pub(crate) use self::wire::published;

/// The extension id under which a 2026-07-28 server offers tasks
/// (`capabilities.extensions`).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `_meta` key tying a message to its task.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The methods of tasks.
pub(crate) const TASK_METHODS: &[&str] =
    &["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"];

/// 2026-07-28's extension's method answering a task's questions (`inputResponses`);
/// unknown to 2025-11-25.
pub(crate) const UPDATE_METHOD: &str = "tasks/update";

/// Tasks per `tasks/list` page.
pub(crate) const TASK_PAGE_SIZE: usize = 100;

/// The one answer to a task id that is not one of the caller's tasks (unknown,
/// expired, another session's, malformed): the same whatever the reason, so it tells
/// nothing of other sessions' tasks.
pub(crate) const NO_SUCH_TASK: &str =
    "Invalid params: no such task (unknown, expired, or not started by this session); tasks/list gives this session's tasks";

/// The one answer to a task id that is not one of the caller's tasks, for 2026-07-28's
/// extension (which has no `tasks/list`): as [`NO_SUCH_TASK`], the same whatever the
/// reason.
pub(crate) const NO_SUCH_TASK_PUBLISHED: &str =
    "Invalid params: no such task (unknown, expired, or not started by this caller); use the taskId of a tools/call result whose resultType is \"task\"";

/// A task's state (MCP `TaskStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Running.
    Working,
    /// Running, and waiting for its user's answer to a question (2025-11-25: the
    /// question, an `elicitation/create`, is sent to the client).
    InputRequired,
    /// Done; its result is kept.
    Completed,
    /// Done with an error (the tool's, its time limit, the result budget).
    Failed,
    /// Cancelled by the client (or its session ended).
    Cancelled,
}

impl Status {
    /// Whether the task's call still runs (working, or waiting for its user).
    pub(crate) fn running(self) -> bool {
        matches!(self, Status::Working | Status::InputRequired)
    }

    /// Its name on the wire.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// How a task ended, as `tasks/result` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finished {
    /// Completed, failed or cancelled.
    pub(crate) status: Status,
    /// The `tools/call` result (its JSON text, as a plain call would have given it);
    /// `None` when cancelled.
    pub(crate) result: Option<Bytes>,
}

/// A task just created: its id, the token that stops its call, and where its end is
/// reported ([`TaskStore::finish`]).
#[derive(Debug)]
pub(crate) struct Created {
    /// The task's id.
    pub(crate) id: String,
    /// Cancelled when the task is cancelled (or its session ends).
    pub(crate) token: CancellationToken,
    /// The `CreateTaskResult`'s `task`.
    pub(crate) task: Value,
    sender: watch::Sender<Option<Arc<Finished>>>,
}

/// Why a task was not created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CreateError {
    /// The session holds its most tasks.
    #[error("this session already holds {0} tasks, the most allowed; fetch or cancel one (tasks/result, tasks/cancel) or wait until one expires")]
    SessionFull(usize),
    /// The server holds its most tasks.
    #[error("the server already holds {0} tasks, the most allowed; try again later, or run the tool without a task")]
    ServerFull(usize),
}

/// Why `tasks/cancel` did not cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CancelError {
    /// Not one of the caller's tasks ([`NO_SUCH_TASK`]).
    NotFound,
    /// It already ended, as this status.
    Ended(Status),
}

/// What `tasks/result` gets: the end, or a receiver that has it once the task ends.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The task has ended.
    Ended(Arc<Finished>),
    /// The task works: wait on this.
    Working(watch::Receiver<Option<Arc<Finished>>>),
}

/// What the store holds now, for tests and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TaskCounts {
    /// Tasks known (holding a place or not).
    pub(crate) tasks: usize,
    /// Places held.
    pub(crate) places: usize,
    /// Bytes of results kept.
    pub(crate) bytes: usize,
}
