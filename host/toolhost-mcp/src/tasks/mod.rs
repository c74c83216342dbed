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

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use toolhost::registry::{format_bytes, Environment};

use crate::counters::Counters;
use crate::limits::{McpLimits, TASK_POLL_INTERVAL_MS};

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

/// `task` (2025-11-25's `Task`, as [`TaskStore::get`] gives it) in the shape of the
/// published tasks extension (`DetailedTask`): `ttlMs` and `pollIntervalMs`, and for an
/// ended task (`finished`) its `tools/call` result inline as `result`, for one waiting
/// for its user its open question (`input_requests`) as `inputRequests`. The extension
/// keeps `failed` for JSON-RPC errors, so a task whose tool failed (a result with
/// `isError: true`: the tool's error, its time limit, the result budget) is
/// `completed` with that result there.
pub(crate) fn published(
    mut task: Value,
    finished: Option<&Finished>,
    input_requests: Option<Value>,
) -> Value {
    let Value::Object(fields) = &mut task else {
        return task;
    };
    if let Some(ttl) = fields.remove("ttl") {
        fields.insert("ttlMs".into(), ttl);
    }
    if let Some(poll) = fields.remove("pollInterval") {
        fields.insert("pollIntervalMs".into(), poll);
    }
    let ended = matches!(
        fields.get("status").and_then(Value::as_str),
        Some("completed" | "failed")
    );
    let result = finished
        .filter(|_| ended)
        .and_then(|finished| finished.result.as_ref())
        .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok());
    if let Some(result) = result {
        fields.insert("status".into(), json!("completed"));
        fields.insert("result".into(), result);
    } else if fields.get("status").and_then(Value::as_str) == Some("failed") {
        // Never so (a failed task keeps its result), but a failed task must say why.
        let message = fields
            .get("statusMessage")
            .cloned()
            .unwrap_or_else(|| json!("the task failed"));
        fields.insert(
            "error".into(),
            json!({ "code": -32603, "message": message }),
        );
    } else if fields.get("status").and_then(Value::as_str) == Some("input_required") {
        fields.insert(
            "inputRequests".into(),
            input_requests.unwrap_or_else(|| json!({})),
        );
    }
    task
}

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

/// What one task is.
struct Entry {
    owner: String,
    /// Creation order, for `tasks/list`.
    seq: u64,
    created_at: SystemTime,
    updated_at: SystemTime,
    /// Forgotten at this instant.
    expires: Instant,
    ttl: Duration,
    status: Status,
    message: Option<String>,
    /// Whether it holds a place (working, or completed with its result).
    holds_place: bool,
    /// Bytes of its result, counted against the budget.
    bytes: usize,
    cancel: CancellationToken,
    done: watch::Receiver<Option<Arc<Finished>>>,
    /// Questions its call asked through `inputRequests` (2026-07-28): each one's key is
    /// `q<n>`, never used twice in one task.
    asked: usize,
    /// The question open now (2026-07-28), until answered or withdrawn.
    question: Option<OpenQuestion>,
    /// Counts its changes (2026-07-28's `subscriptions/listen` with `taskIds` waits on
    /// it); dropped with the entry, which ends the waits.
    changes: watch::Sender<u64>,
}

/// A question of a 2026-07-28 task's call, surfaced as `inputRequests` in `tasks/get`
/// and answered by `tasks/update`.
struct OpenQuestion {
    key: String,
    /// `{method, params}`, as `inputRequests` carries it.
    request: Value,
    answer: tokio::sync::oneshot::Sender<Value>,
}

impl Entry {
    /// Its status (or open question) changed now.
    fn touch(&mut self) {
        self.updated_at = SystemTime::now();
        self.changes
            .send_modify(|count| *count = count.wrapping_add(1));
    }

    fn json(&self, id: &str) -> Value {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let mut task = json!({
            "taskId": id,
            "status": self.status.as_str(),
            "createdAt": toolhost::registry::format_utc_time(self.created_at),
            "lastUpdatedAt": toolhost::registry::format_utc_time(self.updated_at),
            "ttl": ttl,
            "pollInterval": TASK_POLL_INTERVAL_MS,
        });
        if let Some(message) = &self.message {
            task["statusMessage"] = json!(message);
        }
        task
    }
}

/// One session's share.
#[derive(Default)]
struct Owner {
    /// Places held.
    places: usize,
    /// Its tasks that ended without a place (failed, cancelled), oldest first.
    ended: VecDeque<String>,
}

#[derive(Default)]
struct Store {
    tasks: HashMap<String, Entry>,
    owners: HashMap<String, Owner>,
    places: usize,
    bytes: usize,
    /// Every session's ended tasks (failed, cancelled), oldest first: at most
    /// `max_tasks` are kept in all, however many sessions came and went.
    ended: VecDeque<String>,
    next_seq: u64,
    /// The earliest expiry among the tasks, when there are any.
    next_expiry: Option<Instant>,
    /// Where tasks created and ended are counted ([`TaskStore::counting`]).
    counters: Arc<Counters>,
}

/// Adds one to `counter`.
fn count(counter: &std::sync::atomic::AtomicUsize) {
    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

impl Store {
    /// Forgets the tasks whose time is up.
    fn sweep(&mut self, now: Instant) {
        if self.next_expiry.is_none_or(|at| at > now) {
            return;
        }
        let expired: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, entry)| entry.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
        self.next_expiry = self.tasks.values().map(|entry| entry.expires).min();
    }

    /// Forgets task `id`: its place and bytes are free, a working call is stopped.
    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.tasks.remove(id)?;
        if entry.status.running() {
            // Forgotten while working (its session ended, its time to live passed).
            count(&self.counters.tasks_cancelled);
        }
        entry.cancel.cancel();
        self.bytes -= entry.bytes;
        let owner = self.owners.get_mut(&entry.owner);
        if let Some(owner) = owner {
            if entry.holds_place {
                owner.places -= 1;
            } else {
                owner.ended.retain(|ended| ended != id);
            }
            if owner.places == 0 && owner.ended.is_empty() {
                self.owners.remove(&entry.owner);
            }
        }
        if entry.holds_place {
            self.places -= 1;
        }
        Some(entry)
    }

    /// Task `id` gives its place back (it failed or was cancelled); past
    /// `keep` such tasks of its session, or `keep_all` of all sessions, the oldest is
    /// forgotten.
    fn release(&mut self, id: &str, keep: usize, keep_all: usize) {
        let Some(entry) = self.tasks.get_mut(id) else {
            return;
        };
        if !entry.holds_place {
            return;
        }
        entry.holds_place = false;
        self.places -= 1;
        let owner_id = entry.owner.clone();
        let mut forget = None;
        if let Some(owner) = self.owners.get_mut(&owner_id) {
            owner.places -= 1;
            owner.ended.push_back(id.to_owned());
            if owner.ended.len() > keep {
                forget = owner.ended.pop_front();
            }
        }
        if let Some(oldest) = forget {
            self.remove(&oldest);
        }
        // Ids of tasks forgotten since may be among them: those go without effect.
        self.ended.push_back(id.to_owned());
        while self.ended.len() > keep_all {
            if let Some(oldest) = self.ended.pop_front() {
                if self
                    .tasks
                    .get(&oldest)
                    .is_some_and(|entry| !entry.holds_place)
                {
                    self.remove(&oldest);
                }
            }
        }
    }

    /// The caller's task `id`, if there is one.
    fn owned(&self, owner: &str, id: &str) -> Option<&Entry> {
        self.tasks.get(id).filter(|entry| entry.owner == owner)
    }
}

fn widen(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX)
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

/// The tasks of every session of one server (see the [module docs](self)).
pub(crate) struct TaskStore {
    timeout: Duration,
    ttl: Duration,
    max_tasks: usize,
    per_session: usize,
    max_bytes: usize,
    inner: Mutex<Store>,
    /// Where the tasks of callers without a session are also kept, for the other
    /// processes serving them (`--state`); `None`: this process alone.
    shared: Option<crate::state::SharedTasks>,
}

impl std::fmt::Debug for TaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStore")
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl TaskStore {
    /// A store keeping `limits`' task bounds.
    pub(crate) fn new(limits: &McpLimits) -> Self {
        Self {
            timeout: limits.task_timeout(),
            ttl: limits.task_ttl(),
            max_tasks: limits.max_tasks().get(),
            per_session: limits
                .max_tasks_per_session()
                .get()
                .min(limits.max_tasks().get()),
            max_bytes: limits.max_task_result_bytes().get(),
            inner: Mutex::default(),
            shared: None,
        }
    }

    /// This store counting the tasks it creates and ends in `counters` (the server's,
    /// read by [`McpStats`](crate::McpStats)).
    pub(crate) fn counting(mut self, counters: Arc<Counters>) -> Self {
        self.inner
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .counters = counters;
        self
    }

    /// This store, its sessionless callers' tasks also kept in `shared`.
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "set by the HTTP transport")
    )]
    pub(crate) fn with_shared(mut self, shared: Option<crate::state::SharedTasks>) -> Self {
        self.shared = shared;
        self
    }

    /// Where tasks are shared with other processes, if they are.
    pub(crate) fn shared(&self) -> Option<&crate::state::SharedTasks> {
        self.shared.as_ref()
    }

    /// The most bytes one task's result may hold.
    pub(crate) fn max_result_bytes(&self) -> usize {
        self.max_bytes
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // Every change leaves the maps consistent before it can panic; a poisoned lock
        // leaves them usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The longest a task runs: the server's limit, or `tool_limit` when it is shorter.
    pub(crate) fn time_limit(&self, tool_limit: Option<Duration>) -> Duration {
        tool_limit.map_or(self.timeout, |limit| limit.min(self.timeout))
    }

    /// Starts a task for session `owner`, kept `requested_ttl` (milliseconds; the
    /// server's TTL when none or longer); its call stops when `parent` is cancelled.
    ///
    /// # Errors
    /// [`CreateError`] when the session or the server holds its most tasks.
    pub(crate) fn create(
        &self,
        owner: &str,
        requested_ttl: Option<u64>,
        parent: &CancellationToken,
    ) -> Result<Created, CreateError> {
        let now = Instant::now();
        let mut store = self.lock();
        store.sweep(now);
        let places = store.owners.get(owner).map_or(0, |owner| owner.places);
        if places >= self.per_session {
            return Err(CreateError::SessionFull(self.per_session));
        }
        if store.places >= self.max_tasks {
            return Err(CreateError::ServerFull(self.max_tasks));
        }
        let ttl = requested_ttl
            .map_or(self.ttl, Duration::from_millis)
            .min(self.ttl);
        // A v4 UUID: 122 bits from the OS's random source, not to be guessed.
        let id = Environment::generate().turn_id;
        let token = parent.child_token();
        let (sender, done) = watch::channel(None);
        let created_at = SystemTime::now();
        let entry = Entry {
            owner: owner.to_owned(),
            seq: store.next_seq,
            created_at,
            updated_at: created_at,
            expires: now + ttl,
            ttl,
            status: Status::Working,
            message: None,
            holds_place: true,
            bytes: 0,
            cancel: token.clone(),
            done,
            asked: 0,
            question: None,
            changes: watch::Sender::new(0),
        };
        let task = entry.json(&id);
        store.next_seq += 1;
        store.places += 1;
        store.owners.entry(owner.to_owned()).or_default().places += 1;
        store.next_expiry = Some(
            store
                .next_expiry
                .map_or(entry.expires, |at| at.min(entry.expires)),
        );
        store.tasks.insert(id.clone(), entry);
        count(&store.counters.tasks_created);
        Ok(Created {
            id,
            token,
            task,
            sender,
        })
    }

    /// Records how task `created` ended: `result` (a `tools/call` result's JSON text) and
    /// whether it is an error (`message`: its text). A completed result is kept while it
    /// fits [`McpLimits::max_task_result_bytes`](crate::McpLimits::max_task_result_bytes);
    /// one that does not fit is not kept and the task fails saying so. A task cancelled
    /// or forgotten meanwhile stays as it is.
    ///
    /// Gives the task as it is now (MCP's `Task`) when this changed its status, for
    /// `notifications/tasks/status`; `None` when it was cancelled or forgotten before.
    pub(crate) fn finish(
        &self,
        created: Created,
        result: Bytes,
        error: Option<String>,
    ) -> Option<Value> {
        let mut store = self.lock();
        let taken = store.bytes;
        let fits = taken + result.len() <= self.max_bytes;
        let entry = store.tasks.get_mut(&created.id)?;
        if !entry.status.running() {
            // Cancelled meanwhile: its waiters learn it.
            drop(store);
            created.sender.send_replace(Some(Arc::new(Finished {
                status: Status::Cancelled,
                result: None,
            })));
            return None;
        }
        let (status, message, result) = match (fits, error) {
            (true, None) => (Status::Completed, None, result),
            (true, Some(message)) => (Status::Failed, Some(message), result),
            (false, _) => {
                let message = format!(
                    "the task's result ({}) was not kept: results kept by this server's tasks may take {} in all, and {} are taken; fetch or cancel other tasks first, or ask for a smaller result",
                    format_bytes(widen(result.len())),
                    format_bytes(widen(self.max_bytes)),
                    format_bytes(widen(taken)),
                );
                // As a failed call's result: the message as its one text block.
                let text = json!({
                    "content": [{ "type": "text", "text": message }],
                    "isError": true,
                });
                (Status::Failed, Some(message), Bytes::from(text.to_string()))
            }
        };
        let bytes = if fits { result.len() } else { 0 };
        count(if status == Status::Completed {
            &store.counters.tasks_completed
        } else {
            &store.counters.tasks_failed
        });
        let entry = store.tasks.get_mut(&created.id)?;
        entry.status = status;
        entry.message = message;
        entry.touch();
        entry.bytes = bytes;
        let task = entry.json(&created.id);
        store.bytes += bytes;
        let finished = Arc::new(Finished {
            status,
            result: Some(result),
        });
        created.sender.send_replace(Some(finished));
        if status != Status::Completed {
            store.release(&created.id, self.per_session, self.max_tasks);
        }
        Some(task)
    }

    /// Task `id` waits for its user's answer (`asking`: `input_required`) or goes on
    /// (`working`): the task as it is now when that changed its status, for
    /// `notifications/tasks/status`; `None` when it did not (an ended task stays ended).
    pub(crate) fn set_asking(&self, id: &str, asking: bool) -> Option<Value> {
        let mut store = self.lock();
        let entry = store.tasks.get_mut(id)?;
        let status = match (entry.status, asking) {
            (Status::Working, true) => Status::InputRequired,
            (Status::InputRequired, false) => Status::Working,
            _ => return None,
        };
        entry.status = status;
        entry.touch();
        Some(entry.json(id))
    }

    /// `tasks/get`: the caller's task `id` as MCP's `Task`.
    pub(crate) fn get(&self, owner: &str, id: &str) -> Option<Value> {
        let mut store = self.lock();
        store.sweep(Instant::now());
        store.owned(owner, id).map(|entry| entry.json(id))
    }

    /// 2026-07-28's `tasks/get`: the caller's task `id` in the published extension's
    /// shape ([`published`]), its result inline once it ended.
    pub(crate) fn detailed(&self, owner: &str, id: &str) -> Option<Value> {
        let mut store = self.lock();
        store.sweep(Instant::now());
        let entry = store.owned(owner, id)?;
        let finished = entry.done.borrow().clone();
        let input_requests = entry.question.as_ref().map(|question| {
            let mut requests = serde_json::Map::new();
            requests.insert(question.key.clone(), question.request.clone());
            Value::Object(requests)
        });
        Some(published(
            entry.json(id),
            finished.as_deref(),
            input_requests,
        ))
    }

    /// 2026-07-28: task `id`'s call asks `request` (`{method, params}`, as
    /// `inputRequests` carries it): the task is `input_required` with it, under a key
    /// not used before in this task, until [`respond`](Self::respond) hands it its
    /// answer (the receiver) or [`settle`](Self::settle) withdraws it. `None` when the
    /// task is not working (ended, cancelled, forgotten) or already has a question open.
    pub(crate) fn ask(
        &self,
        id: &str,
        request: Value,
    ) -> Option<tokio::sync::oneshot::Receiver<Value>> {
        let mut store = self.lock();
        let entry = store.tasks.get_mut(id)?;
        if entry.status != Status::Working || entry.question.is_some() {
            return None;
        }
        let key = format!("q{}", entry.asked);
        entry.asked += 1;
        let (answer, receiver) = tokio::sync::oneshot::channel();
        entry.question = Some(OpenQuestion {
            key,
            request,
            answer,
        });
        entry.status = Status::InputRequired;
        entry.touch();
        Some(receiver)
    }

    /// Task `id`'s open question (2026-07-28) is over (answered, withdrawn, its call
    /// ended): none is open, and a task waiting for it works again.
    pub(crate) fn settle(&self, id: &str) {
        let mut store = self.lock();
        let Some(entry) = store.tasks.get_mut(id) else {
            return;
        };
        entry.question = None;
        if entry.status == Status::InputRequired {
            entry.status = Status::Working;
            entry.touch();
        }
    }

    /// 2026-07-28's `tasks/update`: hands the caller's task `id` the response in
    /// `responses` under its open question's key, if there is one (the task then works
    /// again); every other response is ignored and none is kept. `None` when `id` is
    /// not one of the caller's tasks; else whether a response was taken.
    pub(crate) fn respond(
        &self,
        owner: &str,
        id: &str,
        responses: &serde_json::Map<String, Value>,
    ) -> Option<bool> {
        let mut store = self.lock();
        store.sweep(Instant::now());
        let entry = store
            .tasks
            .get_mut(id)
            .filter(|entry| entry.owner == owner)?;
        let response = entry
            .question
            .as_ref()
            .and_then(|question| responses.get(&question.key))
            .cloned();
        let Some(response) = response else {
            return Some(false);
        };
        let Some(question) = entry.question.take() else {
            return Some(false);
        };
        entry.status = Status::Working;
        entry.touch();
        // The call may have stopped meanwhile: then nobody takes it.
        let _ = question.answer.send(response);
        Some(true)
    }

    /// What tells when the caller's task `id` changes (2026-07-28's
    /// `subscriptions/listen` with `taskIds`), when it is one of the caller's tasks:
    /// marked changed at once, so that its state now is told first. It closes when the
    /// task is forgotten.
    pub(crate) fn watch(&self, owner: &str, id: &str) -> Option<watch::Receiver<u64>> {
        let mut store = self.lock();
        store.sweep(Instant::now());
        store.owned(owner, id).map(|entry| {
            let mut changes = entry.changes.subscribe();
            changes.mark_changed();
            changes
        })
    }

    /// `tasks/result`: how the caller's task `id` ended, or a receiver to wait on.
    pub(crate) fn outcome(&self, owner: &str, id: &str) -> Option<Outcome> {
        let mut store = self.lock();
        store.sweep(Instant::now());
        let entry = store.owned(owner, id)?;
        let done = entry.done.borrow().clone();
        Some(match done {
            Some(finished) => Outcome::Ended(finished),
            None => Outcome::Working(entry.done.clone()),
        })
    }

    /// `tasks/cancel`: stops the caller's working task `id` at once and frees its place.
    ///
    /// # Errors
    /// [`CancelError::NotFound`]; [`CancelError::Ended`] for a task already ended.
    pub(crate) fn cancel(&self, owner: &str, id: &str, reason: &str) -> Result<Value, CancelError> {
        let mut store = self.lock();
        store.sweep(Instant::now());
        let Some(entry) = store.tasks.get_mut(id).filter(|entry| entry.owner == owner) else {
            return Err(CancelError::NotFound);
        };
        if !entry.status.running() {
            return Err(CancelError::Ended(entry.status));
        }
        entry.cancel.cancel();
        entry.status = Status::Cancelled;
        entry.message = Some(reason.to_owned());
        entry.touch();
        let task = entry.json(id);
        count(&store.counters.tasks_cancelled);
        store.release(id, self.per_session, self.max_tasks);
        Ok(task)
    }

    /// Task `created`'s call was stopped (cancelled, or its session ended): marks it
    /// cancelled when it still works, and its waiters learn it.
    pub(crate) fn stopped(&self, created: Created, reason: &str) {
        if self.cancel_entry(&created.id, reason) {
            created.sender.send_replace(Some(Arc::new(Finished {
                status: Status::Cancelled,
                result: None,
            })));
        }
    }

    /// Whether task `id` is known and cancelled now (by this or before).
    fn cancel_entry(&self, id: &str, reason: &str) -> bool {
        let mut store = self.lock();
        let Some(entry) = store.tasks.get_mut(id) else {
            return false;
        };
        if !entry.status.running() {
            return entry.status == Status::Cancelled;
        }
        entry.status = Status::Cancelled;
        entry.message = Some(reason.to_owned());
        entry.touch();
        count(&store.counters.tasks_cancelled);
        store.release(id, self.per_session, self.max_tasks);
        true
    }

    /// `tasks/list`: a page of the caller's tasks, oldest first, from `cursor` (the
    /// `nextCursor` of the page before).
    ///
    /// # Errors
    /// A message for a cursor this store did not give.
    pub(crate) fn list(&self, owner: &str, cursor: Option<&str>) -> Result<Value, String> {
        let after = match cursor {
            None => None,
            Some(text) => Some(
                text.parse::<u64>()
                    .map_err(|_| "Invalid params: \"cursor\" is not one this server gave; send the nextCursor of the last tasks/list page, or none for the first".to_owned())?,
            ),
        };
        let mut store = self.lock();
        store.sweep(Instant::now());
        let mut mine: Vec<(&String, &Entry)> = store
            .tasks
            .iter()
            .filter(|(_, entry)| entry.owner == owner)
            .filter(|(_, entry)| after.is_none_or(|after| entry.seq > after))
            .collect();
        mine.sort_by_key(|(_, entry)| entry.seq);
        let more = mine.len() > TASK_PAGE_SIZE;
        mine.truncate(TASK_PAGE_SIZE);
        let tasks: Vec<Value> = mine.iter().map(|(id, entry)| entry.json(id)).collect();
        let mut result = json!({ "tasks": tasks });
        if more {
            if let Some((_, last)) = mine.last() {
                result["nextCursor"] = json!(last.seq.to_string());
            }
        }
        Ok(result)
    }

    /// Forgets every task of session `owner` (it was terminated): working calls stop,
    /// places and bytes are free.
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "used by the HTTP transport")
    )]
    pub(crate) fn forget_owner(&self, owner: &str) {
        let mut store = self.lock();
        let ids: Vec<String> = store
            .tasks
            .iter()
            .filter(|(_, entry)| entry.owner == owner)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            store.remove(&id);
        }
    }

    /// What the store holds now.
    pub(crate) fn counts(&self) -> TaskCounts {
        let store = self.lock();
        TaskCounts {
            tasks: store.tasks.len(),
            places: store.places,
            bytes: store.bytes,
        }
    }
}
