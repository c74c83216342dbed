//! The [`TaskStore`]: the tasks of every session of one server within their bounds
//! (places, result bytes, time to live), and a task's life: created, ended with its
//! result, cancelled, forgotten with its session.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use toolhost::registry::{format_bytes, Environment};

use super::records::{count, Entry, Store};
use super::{CancelError, CreateError, Created, Finished, Status, TaskCounts};
use crate::counters::Counters;
use crate::limits::McpLimits;

fn widen(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// The tasks of every session of one server (see the [module docs](super)).
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

    pub(super) fn lock(&self) -> MutexGuard<'_, Store> {
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
