//! Task state that several server processes can share: the records of MCP tasks
//! (status, timestamps, owner, result, time to live, lease) behind one trait,
//! [`TaskBackend`], so a task created through one `host serve --http` process can be
//! read, listed and cancelled through another behind the same load balancer.
//!
//! Two backends:
//! - [`MemoryBackend`]: in this process only (what one process needs; the reference
//!   behaviour the other backend is tested against);
//! - `RedisBackend` (feature `redis-state`): records in Redis, shared by every process
//!   pointed at the same server and database.
//!
//! What a record carries and how it ends:
//! - a running task (`working`, `input_required`) carries a **lease**: the process
//!   running it renews it with [`TaskBackend::heartbeat`] (every
//!   [`HEARTBEAT_INTERVAL`], 200 ms); a reader that finds a running task whose lease
//!   ran out stores and reports it `failed` with [`LEASE_EXPIRED`], so the tasks of a
//!   process that was killed never stay `working`. The lease is
//!   [`DEFAULT_TASK_LEASE`] (30 s) unless set (`--task-lease`, at least
//!   [`MIN_TASK_LEASE`], at most [`MAX_TASK_LEASE`]);
//! - cancellation ([`TaskBackend::cancel`], from any process) marks the record
//!   `cancelled`; the running process learns it from its next heartbeat's answer
//!   ([`Heartbeat::Ended`]), so within 200 ms plus one round trip (polling, not
//!   pub/sub: nothing to resubscribe after a reconnect, and the heartbeat that renews
//!   the lease is the same command);
//! - a record is forgotten `ttl_ms` after its creation, as in one process;
//! - a record's result is at most the server's `max_task_result_bytes`
//!   ([`TaskBackend`] implementations refuse a larger one read back:
//!   [`StateError::TooLarge`]).
//!
//! Quota counts shared the same way are [`QuotaCounter`] (fixed windows, counted on the
//! server in one round trip; both backends implement it).
//!
//! A server shares its sessionless callers' tasks through a backend given to
//! `HttpConfig::with_shared_tasks` (feature `http`); the CLI's `--state` gives it a
//! `RedisBackend`. The trait itself, on the in-process backend:
//!
//! ```
//! use std::time::Duration;
//! use toolhost_mcp::state::{
//!     now_ms, Heartbeat, MemoryBackend, TaskBackend, TaskRecord, TaskStatus,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let backend = MemoryBackend::new(1 << 20);
//! let now = now_ms();
//! let task = TaskRecord {
//!     id: "0b7f5a0e-5a43-4d51-9c1a-8f3c1d2e4b5a".into(),
//!     owner: "caller:alice".into(),
//!     status: TaskStatus::Working,
//!     status_message: None,
//!     created_ms: now,
//!     updated_ms: now,
//!     ttl_ms: 60_000,
//!     result: None,
//! };
//! backend.create(&task, Duration::from_secs(30)).await?;
//! // Another process cancels it; the running one learns it from its next heartbeat.
//! backend.cancel("caller:alice", &task.id, "cancelled by the client").await?;
//! let beat = backend.heartbeat(&task.id, Duration::from_secs(30)).await?;
//! assert_eq!(beat, Heartbeat::Ended(TaskStatus::Cancelled));
//! // Nobody else sees it.
//! assert_eq!(backend.get("caller:bob", &task.id).await?, None);
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::collections::HashMap;

#[cfg(feature = "redis-state")]
mod capped;
mod counter;
#[cfg(feature = "redis-state")]
mod redis_backend;
pub use self::counter::{Counted, QuotaCounter, MAX_WINDOW};
#[cfg(feature = "redis-state")]
pub use self::redis_backend::{
    RedisBackend, StateCa, StateCaError, StateUrl, StateUrlError, MAX_CA_FILE_BYTES, MAX_LISTED,
    PASSWORD_ENV, REPLY_OVERHEAD,
};

#[cfg(test)]
mod tests;

/// How often the process running a task renews its lease and looks for its
/// cancellation: 200 ms, so a cancellation through another process reaches it within
/// a second.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);

/// A running task's lease unless set (`--task-lease`): 30 s.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(30);

/// The shortest lease allowed: 1 s (five heartbeats).
pub const MIN_TASK_LEASE: Duration = Duration::from_secs(1);

/// The longest lease allowed: 1 hour.
pub const MAX_TASK_LEASE: Duration = Duration::from_secs(3600);

/// The time one operation on a shared backend may take before it fails
/// ([`StateError::Timeout`]): 2 s.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(2);

/// The status message stored for a running task whose lease ran out.
pub const LEASE_EXPIRED: &str = "the process running it stopped";

/// A task's state (MCP `TaskStatus`), as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Running, waiting for its user's answer.
    InputRequired,
    /// Done; its result is kept.
    Completed,
    /// Done with an error (or its process stopped: [`LEASE_EXPIRED`]).
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Its name on the wire (and in the store).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// The status named `name`, if it is one.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => return None,
        })
    }

    /// Whether the task's call still runs.
    #[must_use]
    pub fn running(self) -> bool {
        matches!(self, TaskStatus::Working | TaskStatus::InputRequired)
    }
}

/// One task as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// The task's id (unguessable, made by the process that created it).
    pub id: String,
    /// Its owner: the session, or over HTTP without a session the principal, that
    /// created it; another owner's reads find nothing.
    pub owner: String,
    /// Its status.
    pub status: TaskStatus,
    /// Why it is as it is (a failure's reason, a cancellation's).
    pub status_message: Option<String>,
    /// Created, in ms since the Unix epoch (the creating process's clock).
    pub created_ms: u64,
    /// Last changed, in ms since the Unix epoch.
    pub updated_ms: u64,
    /// Forgotten this long after its creation, in ms.
    pub ttl_ms: u64,
    /// The `tools/call` result's JSON text, once completed (or failed with one).
    pub result: Option<String>,
}

/// How a heartbeat found its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// Still running: its lease is renewed.
    Running,
    /// It ended elsewhere (cancelled through another process, or failed by a reader
    /// that found its lease run out): stop its call.
    Ended(TaskStatus),
    /// No such task any more (expired): stop its call.
    Gone,
}

/// Why `cancel` did not cancel.
#[derive(Debug, thiserror::Error)]
pub enum CancelRefusal {
    /// Not one of the owner's tasks.
    #[error("no such task")]
    NotFound,
    /// It had already ended, as this status.
    #[error("the task already ended ({})", .0.as_str())]
    Ended(TaskStatus),
    /// The backend failed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// Why a backend operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The server could not be reached, or the connection broke.
    #[error("the task state server is unreachable ({0}); tasks cannot be created or read until it is back, plain tool calls still work")]
    Unreachable(String),
    /// The server refused the credentials (no password given, or a wrong one).
    #[error("the task state server refused the credentials ({0}); give its password with --state-password-file FILE or TOOLHOST_STATE_PASSWORD")]
    Auth(String),
    /// The TLS connection (rediss://) failed: the server's certificate was refused (not
    /// signed by a trusted CA, not naming the host, expired) or the port does not speak
    /// TLS.
    #[error("the TLS connection to the task state server failed ({0}); a server whose certificate a private CA signed needs that CA given with --state-ca-file FILE, and the certificate must name the host of --state")]
    Tls(String),
    /// The server took longer than the operation's time limit.
    #[error("the task state server did not answer within {} ms; tasks cannot be created or read until it answers, plain tool calls still work", .0.as_millis())]
    Timeout(Duration),
    /// The server answered something that is not a task record.
    #[error("the task state server answered something unexpected ({0}); is --state pointing at a Redis server?")]
    Garbage(String),
    /// A record read back was larger than allowed.
    #[error("a task record read back holds {0} bytes, more than the {1} allowed; it is not read")]
    TooLarge(usize, usize),
    /// A record with that id already exists.
    #[error("a task with this id already exists")]
    Exists,
}

/// A boxed future, so [`TaskBackend`] can be used as `dyn TaskBackend`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where task records are kept. Every method is bounded in time
/// ([`OPERATION_TIMEOUT`] for a shared backend) and fails with a [`StateError`]
/// rather than wait.
pub trait TaskBackend: Send + Sync + std::fmt::Debug {
    /// Stores a new record (its status running, with a lease of `lease`);
    /// [`StateError::Exists`] when its id is taken.
    fn create<'a>(
        &'a self,
        record: &'a TaskRecord,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// `owner`'s task `id`, `None` when it is not one (unknown, expired, another
    /// owner's). A running task whose lease ran out is stored and given as `failed`
    /// ([`LEASE_EXPIRED`]).
    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StateError>>;

    /// `owner`'s tasks, oldest first (leases checked as [`TaskBackend::get`] does).
    fn list<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<TaskRecord>, StateError>>;

    /// Cancels `owner`'s running task `id` (its status message `reason`), giving the
    /// record as it is now.
    fn cancel<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<TaskRecord, CancelRefusal>>;

    /// Renews running task `id`'s lease to `lease` from now, or tells that it ended.
    fn heartbeat<'a>(
        &'a self,
        id: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Heartbeat, StateError>>;

    /// Ends running task `id` as `status` (with its message and result); `false`
    /// when it was no longer running (cancelled or failed elsewhere: that stays).
    fn finish<'a>(
        &'a self,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StateError>>;
}

/// Milliseconds since the Unix epoch now (0 before it: a clock set before 1970).
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// A duration in whole milliseconds (saturating).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Tasks shared through a backend, as a server is given them
/// (`HttpConfig::with_shared_tasks`): the backend, and the lease of the tasks this
/// process runs.
#[derive(Debug, Clone)]
pub struct SharedTasks {
    pub(crate) backend: std::sync::Arc<dyn TaskBackend>,
    pub(crate) lease: Duration,
}

impl SharedTasks {
    /// Tasks kept in `backend`, each running task's lease `lease` (kept within
    /// [`MIN_TASK_LEASE`] and [`MAX_TASK_LEASE`]; [`DEFAULT_TASK_LEASE`] is the
    /// usual choice).
    #[must_use]
    pub fn new(backend: std::sync::Arc<dyn TaskBackend>, lease: Duration) -> Self {
        SharedTasks {
            backend,
            lease: lease.clamp(MIN_TASK_LEASE, MAX_TASK_LEASE),
        }
    }

    /// The lease of the tasks this process runs.
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.lease
    }
}

/// One stored task of [`MemoryBackend`].
#[derive(Debug, Clone)]
struct Stored {
    record: TaskRecord,
    /// When its running task's lease runs out (ms since the epoch).
    lease_until_ms: u64,
}

/// Task records in this process only: the reference behaviour of [`TaskBackend`]
/// (the Redis backend is tested against the same cases), with the same time to live,
/// lease and result-size rules; and quota counts in this process only (the reference
/// behaviour of [`QuotaCounter`]).
#[derive(Debug)]
pub struct MemoryBackend {
    tasks: Mutex<HashMap<String, Stored>>,
    max_result_bytes: usize,
    /// Quota windows ([`QuotaCounter`]), and how many there were after the last sweep.
    counts: Mutex<(counter::Windows, usize)>,
}

impl MemoryBackend {
    /// An empty store whose results may hold up to `max_result_bytes` bytes.
    #[must_use]
    pub fn new(max_result_bytes: usize) -> Self {
        MemoryBackend {
            tasks: Mutex::new(HashMap::new()),
            max_result_bytes,
            counts: Mutex::new((HashMap::new(), 0)),
        }
    }

    /// The record of `owner`'s task `id`, expired and lease-checked at `now`.
    fn current(
        tasks: &mut HashMap<String, Stored>,
        owner: Option<&str>,
        id: &str,
        now: u64,
    ) -> Option<TaskRecord> {
        let stored = tasks.get_mut(id)?;
        if stored
            .record
            .created_ms
            .saturating_add(stored.record.ttl_ms)
            <= now
        {
            tasks.remove(id);
            return None;
        }
        if owner.is_some_and(|owner| owner != stored.record.owner) {
            return None;
        }
        if stored.record.status.running() && stored.lease_until_ms <= now {
            stored.record.status = TaskStatus::Failed;
            stored.record.status_message = Some(LEASE_EXPIRED.into());
            stored.record.updated_ms = now;
        }
        Some(stored.record.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Stored>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_counts(&self) -> std::sync::MutexGuard<'_, (counter::Windows, usize)> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl TaskBackend for MemoryBackend {
    fn create<'a>(
        &'a self,
        record: &'a TaskRecord,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let size = record.result.as_ref().map_or(0, String::len);
            if size > self.max_result_bytes {
                return Err(StateError::TooLarge(size, self.max_result_bytes));
            }
            let now = now_ms();
            let mut tasks = self.lock();
            if Self::current(&mut tasks, None, &record.id, now).is_some() {
                return Err(StateError::Exists);
            }
            tasks.insert(
                record.id.clone(),
                Stored {
                    record: record.clone(),
                    lease_until_ms: now.saturating_add(millis(lease)),
                },
            );
            Ok(())
        })
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StateError>> {
        Box::pin(async move { Ok(Self::current(&mut self.lock(), Some(owner), id, now_ms())) })
    }

    fn list<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<TaskRecord>, StateError>> {
        Box::pin(async move {
            let now = now_ms();
            let mut tasks = self.lock();
            let ids: Vec<String> = tasks.keys().cloned().collect();
            let mut records: Vec<TaskRecord> = ids
                .iter()
                .filter_map(|id| Self::current(&mut tasks, Some(owner), id, now))
                .collect();
            records.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            Ok(records)
        })
    }

    fn cancel<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<TaskRecord, CancelRefusal>> {
        Box::pin(async move {
            let now = now_ms();
            let mut tasks = self.lock();
            let record =
                Self::current(&mut tasks, Some(owner), id, now).ok_or(CancelRefusal::NotFound)?;
            if !record.status.running() {
                return Err(CancelRefusal::Ended(record.status));
            }
            let stored = tasks.get_mut(id).ok_or(CancelRefusal::NotFound)?;
            stored.record.status = TaskStatus::Cancelled;
            stored.record.status_message = Some(reason.into());
            stored.record.updated_ms = now;
            Ok(stored.record.clone())
        })
    }

    fn heartbeat<'a>(
        &'a self,
        id: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Heartbeat, StateError>> {
        Box::pin(async move {
            let now = now_ms();
            let mut tasks = self.lock();
            let Some(record) = Self::current(&mut tasks, None, id, now) else {
                return Ok(Heartbeat::Gone);
            };
            if !record.status.running() {
                return Ok(Heartbeat::Ended(record.status));
            }
            if let Some(stored) = tasks.get_mut(id) {
                stored.lease_until_ms = now.saturating_add(millis(lease));
            }
            Ok(Heartbeat::Running)
        })
    }

    fn finish<'a>(
        &'a self,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let size = result.map_or(0, str::len);
            if size > self.max_result_bytes {
                return Err(StateError::TooLarge(size, self.max_result_bytes));
            }
            let now = now_ms();
            let mut tasks = self.lock();
            let running = Self::current(&mut tasks, None, id, now)
                .is_some_and(|record| record.status.running());
            let Some(stored) = tasks.get_mut(id).filter(|_| running) else {
                return Ok(false);
            };
            stored.record.status = status;
            stored.record.status_message = message.map(Into::into);
            stored.record.result = result.map(Into::into);
            stored.record.updated_ms = now;
            Ok(true)
        })
    }
}
