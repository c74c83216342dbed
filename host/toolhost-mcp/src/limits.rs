//! The limits on what a client makes the server hold ([`McpLimits`]), shared by the
//! stdio server, the session core and the HTTP transport, and what the server holds now
//! ([`McpStats`]), and the fixed bounds of a session (page size, subscriptions, progress
//! rate). Below every transport: this module imports nothing of the crate.

use std::num::NonZeroUsize;
use std::time::Duration;

/// Tools per `tools/list` page unless the server is told otherwise: more than any
/// ordinary set (the built-in tools are twelve), so most clients see one page.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// Subscriptions (`subscriptions/listen`) one session may hold open at once.
pub const MAX_SUBSCRIPTIONS: usize = 16;

/// Files one session may have subscribed to at once (`resources/subscribe`, with
/// `--watch`): 64. Subscribing again to a subscribed file takes no more room; past the
/// cap a subscription is refused (`-32602`) until one is dropped. Each is polled every
/// [`RESOURCE_POLL_INTERVAL`] (its content is read, up to the read cap, and compared),
/// so the cap also bounds the reading a session causes.
pub const MAX_RESOURCE_SUBSCRIPTIONS: usize = 64;

/// The most task ids one 2026-07-28 `subscriptions/listen` may name
/// (`notifications.taskIds`, the tasks extension): one naming more is refused (-32602)
/// before any is looked up. Only the caller's own tasks are listened to, so what one
/// subscription watches is bounded by the caller's tasks too.
pub(crate) const MAX_LISTEN_TASKS: usize = 256;

/// How often subscribed files are checked for changes: every second.
pub const RESOURCE_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The largest answer a prompt or resource source of the catalog may give, counted as
/// the text and base64 bytes it carries: 4 MiB. A `prompts/get`, a catalog
/// `resources/read` over it is refused (`-32603`), a `resources/list` page is cut before
/// it (the rest follows through `nextCursor`).
pub const MAX_CATALOG_RESULT_BYTES: usize = 4 << 20;

/// The longest `nextCursor` a resource source may hand out: 1 KiB (it travels inside the
/// server's own cursor); a longer one is refused (`-32603`).
pub const MAX_SOURCE_CURSOR_BYTES: usize = 1024;

/// The least time between two progress notifications of one call (the last one, at the
/// total, always goes).
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The longest line (one JSON-RPC message) the server reads: 16 MiB. A peer that never
/// sends a newline would otherwise grow the buffer until the process runs out of memory.
/// Tool arguments carry whole files (`write_file`, 1 MiB by default), so the cap is
/// generous; a longer line is answered with an Invalid Request error and skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Default for [`McpLimits::max_in_flight`]: 64 tool calls at once. Far more than an agent
/// runs in parallel (a handful of calls per turn), while 600 concurrent `grep` calls over a
/// large tree once took the host past 4 GiB.
pub const DEFAULT_MAX_IN_FLIGHT: NonZeroUsize = non_zero(64);

/// Default for [`McpLimits::max_queued_calls`]: 256 tool calls waiting for a place while
/// [`McpLimits::max_in_flight`] run, four times [`DEFAULT_MAX_IN_FLIGHT`]: a client
/// that sends a burst of calls is read to its end, while one that floods calls is held
/// back long before the waiting calls weigh anything (their arguments count against
/// [`McpLimits::max_in_flight_bytes`]; the rest is a few hundred bytes a call).
pub const DEFAULT_MAX_QUEUED_CALLS: NonZeroUsize = non_zero(256);

/// Default for [`McpLimits::max_queued_bytes`]: 4 MiB of answers waiting for the client to
/// read them. Room for each of [`DEFAULT_MAX_IN_FLIGHT`] calls to have a full-size result
/// (the registry's 64 KiB cap) queued at once, so a client that reads normally never
/// waits on it; small next to what the host needs anyway.
pub const DEFAULT_MAX_QUEUED_BYTES: NonZeroUsize = non_zero(4 << 20);

/// Default for [`McpLimits::max_in_flight_bytes`]: 64 MiB of arguments (their JSON text)
/// held by the calls in flight. [`DEFAULT_MAX_IN_FLIGHT`] calls each writing a file of
/// the default largest size (1 MiB) all fit, so ordinary use never waits on it; without
/// it, 64 slow calls carrying a 16 MiB line each would hold a gigabyte and more.
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: NonZeroUsize = non_zero(64 << 20);

/// Default for [`McpLimits::task_timeout`]: 10 minutes. A task is for a call longer
/// than a client waits on one request, yet one that spins for ever must not hold its
/// place (and a thread or an instance) for ever.
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Default for [`McpLimits::task_ttl`]: 1 hour. How long a task (and its result) is
/// kept from its creation; a client asking for less gets less.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(60 * 60);

/// Default for [`McpLimits::max_tasks`]: 1024 tasks for the whole server, as many as
/// the HTTP transport's default session count, and small next to what the tasks hold
/// (a record of a few hundred bytes each, plus its result against
/// [`DEFAULT_MAX_TASK_RESULT_BYTES`]).
pub const DEFAULT_MAX_TASKS: NonZeroUsize = non_zero(1024);

/// Default for [`McpLimits::max_tasks_per_session`]: 64 tasks for one session, as many
/// as [`DEFAULT_MAX_IN_FLIGHT`] calls: an agent starts a handful of long calls, and one
/// session cannot take every place of [`DEFAULT_MAX_TASKS`].
pub const DEFAULT_MAX_TASKS_PER_SESSION: NonZeroUsize = non_zero(64);

/// Default for [`McpLimits::max_task_result_bytes`]: 64 MiB of task results kept, for
/// the whole server: room for a thousand results of the registry's 64 KiB result cap.
pub const DEFAULT_MAX_TASK_RESULT_BYTES: NonZeroUsize = non_zero(64 << 20);

/// How often a client is told to poll a working task (`pollInterval`, milliseconds).
pub const TASK_POLL_INTERVAL_MS: u64 = 1000;

const fn non_zero(n: usize) -> NonZeroUsize {
    match NonZeroUsize::new(n) {
        Some(n) => n,
        None => panic!("a limit of 0"),
    }
}

/// How much the server holds for its client at most (see [the crate docs](crate) for the
/// memory this bounds). [`Default`] (or [`McpLimits::new`]) gives the documented
/// defaults; each `with_` setter says its own default and bound.
///
/// ```
/// use std::num::NonZeroUsize;
/// use toolhost_mcp::limits::{McpLimits, DEFAULT_MAX_QUEUED_CALLS};
///
/// let limits = McpLimits::new().with_max_in_flight(NonZeroUsize::new(8).unwrap());
/// assert_eq!(limits.max_in_flight().get(), 8);
/// assert_eq!(limits.max_queued_calls(), DEFAULT_MAX_QUEUED_CALLS);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpLimits {
    pub(crate) max_line_bytes: usize,
    pub(crate) max_queued_bytes: NonZeroUsize,
    pub(crate) max_in_flight: NonZeroUsize,
    pub(crate) max_queued_calls: NonZeroUsize,
    pub(crate) max_in_flight_bytes: NonZeroUsize,
    pub(crate) task_timeout: Duration,
    pub(crate) task_ttl: Duration,
    pub(crate) max_tasks: NonZeroUsize,
    pub(crate) max_tasks_per_session: NonZeroUsize,
    pub(crate) max_task_result_bytes: NonZeroUsize,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: MAX_LINE_BYTES,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_queued_calls: DEFAULT_MAX_QUEUED_CALLS,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
            task_timeout: DEFAULT_TASK_TIMEOUT,
            task_ttl: DEFAULT_TASK_TTL,
            max_tasks: DEFAULT_MAX_TASKS,
            max_tasks_per_session: DEFAULT_MAX_TASKS_PER_SESSION,
            max_task_result_bytes: DEFAULT_MAX_TASK_RESULT_BYTES,
        }
    }
}

impl McpLimits {
    /// The documented defaults (as [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The longest line (one message) read (stdio): [`MAX_LINE_BYTES`] (16 MiB) by
    /// default, any number of bytes; a longer line is answered with an Invalid Request
    /// error and skipped.
    #[must_use]
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    /// Bytes of answers waiting to be written (stdio): [`DEFAULT_MAX_QUEUED_BYTES`]
    /// (4 MiB) by default, at least 1 (a single larger answer still goes alone); while
    /// it is full the server reads no request.
    #[must_use]
    pub fn with_max_queued_bytes(mut self, bytes: NonZeroUsize) -> Self {
        self.max_queued_bytes = bytes;
        self
    }

    /// Tool calls running at once, for the whole server: [`DEFAULT_MAX_IN_FLIGHT`] (64)
    /// by default, at least 1; further calls wait in order in a queue of
    /// [`McpLimits::max_queued_calls`] (stdio) while the server goes on reading, or are
    /// refused as busy (HTTP).
    #[must_use]
    pub fn with_max_in_flight(mut self, calls: NonZeroUsize) -> Self {
        self.max_in_flight = calls;
        self
    }

    /// Tool calls waiting for a place while [`McpLimits::max_in_flight`] run (stdio
    /// only): [`DEFAULT_MAX_QUEUED_CALLS`] (256) by default, at least 1; while the queue
    /// is full the server reads no message until a queued call starts or a running one
    /// ends. Cancelling a queued call frees its place at once.
    #[must_use]
    pub fn with_max_queued_calls(mut self, calls: NonZeroUsize) -> Self {
        self.max_queued_calls = calls;
        self
    }

    /// Bytes of arguments, ids and tool names (their JSON text) the calls running and
    /// queued hold between them: [`DEFAULT_MAX_IN_FLIGHT_BYTES`] (64 MiB) by default, at
    /// least 1; a call that does not fit waits (and the reading with it; HTTP refuses it
    /// as busy) until calls end. A call larger than the whole budget waits until no
    /// other call holds any, then goes alone.
    #[must_use]
    pub fn with_max_in_flight_bytes(mut self, bytes: NonZeroUsize) -> Self {
        self.max_in_flight_bytes = bytes;
        self
    }

    /// The longest a task (a `tools/call` run in the background) runs:
    /// [`DEFAULT_TASK_TIMEOUT`] (10 min) by default, at least 1 ms; a tool's own
    /// shorter limit (a plugin manifest's `[limits] task_timeout_ms`) applies when it
    /// has one. Past it the call is stopped and the task fails, saying so, and its
    /// place is free at once.
    #[must_use]
    pub fn with_task_timeout(mut self, timeout: Duration) -> Self {
        self.task_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a task and its result are kept from its creation: [`DEFAULT_TASK_TTL`]
    /// (1 h) by default, at least 1 ms; a client asking for a shorter `ttl` gets it, a
    /// longer one gets this. Then the task is forgotten and its place free.
    #[must_use]
    pub fn with_task_ttl(mut self, ttl: Duration) -> Self {
        self.task_ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// Tasks kept at once (working, or done with their result) for the whole server:
    /// [`DEFAULT_MAX_TASKS`] (1024) by default, at least 1; one more is refused with an
    /// error saying so until one ends, is cancelled or expires.
    #[must_use]
    pub fn with_max_tasks(mut self, tasks: NonZeroUsize) -> Self {
        self.max_tasks = tasks;
        self
    }

    /// Tasks kept at once for one session: [`DEFAULT_MAX_TASKS_PER_SESSION`] (64) by
    /// default, at least 1 (and never more than [`McpLimits::max_tasks`] in effect).
    /// Over HTTP without a session (2026-07-28 requests, a stateless server) the bound
    /// is per bearer token (per server without tokens).
    #[must_use]
    pub fn with_max_tasks_per_session(mut self, tasks: NonZeroUsize) -> Self {
        self.max_tasks_per_session = tasks;
        self
    }

    /// Bytes of task results kept at once for the whole server:
    /// [`DEFAULT_MAX_TASK_RESULT_BYTES`] (64 MiB) by default, at least 1. A result that
    /// does not fit is not kept: its task fails with a message saying so.
    #[must_use]
    pub fn with_max_task_result_bytes(mut self, bytes: NonZeroUsize) -> Self {
        self.max_task_result_bytes = bytes;
        self
    }

    /// The longest a task runs ([`McpLimits::with_task_timeout`]).
    pub fn task_timeout(&self) -> Duration {
        self.task_timeout
    }

    /// How long a task is kept ([`McpLimits::with_task_ttl`]).
    pub fn task_ttl(&self) -> Duration {
        self.task_ttl
    }

    /// Tasks kept at once ([`McpLimits::with_max_tasks`]).
    pub fn max_tasks(&self) -> NonZeroUsize {
        self.max_tasks
    }

    /// Tasks kept at once per session ([`McpLimits::with_max_tasks_per_session`]).
    pub fn max_tasks_per_session(&self) -> NonZeroUsize {
        self.max_tasks_per_session
    }

    /// Bytes of task results kept ([`McpLimits::with_max_task_result_bytes`]).
    pub fn max_task_result_bytes(&self) -> NonZeroUsize {
        self.max_task_result_bytes
    }

    /// The longest line read ([`McpLimits::with_max_line_bytes`]).
    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Bytes of answers that may wait ([`McpLimits::with_max_queued_bytes`]).
    pub fn max_queued_bytes(&self) -> NonZeroUsize {
        self.max_queued_bytes
    }

    /// Tool calls running at once ([`McpLimits::with_max_in_flight`]).
    pub fn max_in_flight(&self) -> NonZeroUsize {
        self.max_in_flight
    }

    /// Tool calls that may wait for a place ([`McpLimits::with_max_queued_calls`]).
    pub fn max_queued_calls(&self) -> NonZeroUsize {
        self.max_queued_calls
    }

    /// Bytes the calls in flight may hold ([`McpLimits::with_max_in_flight_bytes`]).
    pub fn max_in_flight_bytes(&self) -> NonZeroUsize {
        self.max_in_flight_bytes
    }
}

/// What a server holds now and held at most, for monitoring and tests. Shared by the
/// clones of one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpStats {
    /// Bytes of answers waiting to be written.
    pub queued_bytes: usize,
    /// Answers waiting to be written.
    pub queued_answers: usize,
    /// The most bytes of answers that waited at once.
    pub peak_queued_bytes: usize,
    /// Tool calls holding a slot (running, or done and waiting to queue their answer).
    pub calls_running: usize,
    /// The most tool calls that held a slot at once.
    pub peak_calls_running: usize,
    /// Bytes of arguments (with ids and tool names) the calls holding a slot carry.
    pub call_argument_bytes: usize,
    /// Tool calls waiting in the queue for a slot (stdio).
    pub calls_queued: usize,
    /// The most tool calls that waited in the queue at once.
    pub peak_calls_queued: usize,
    /// Bytes of arguments (with ids and tool names) the queued calls carry.
    pub queued_call_bytes: usize,
    /// How many times `tools/list` was encoded (once, unless tools were added since).
    pub tools_list_encodings: usize,
    /// Tasks created (a `tools/call` run as a task) since start.
    pub tasks_created: usize,
    /// Tasks that ended with their result.
    pub tasks_completed: usize,
    /// Tasks that ended with an error (the tool's, their time limit, the result budget).
    pub tasks_failed: usize,
    /// Tasks cancelled: by their client, or stopped with their session or at their
    /// time to live while still working.
    pub tasks_cancelled: usize,
    /// HTTP requests refused before they reached a session, by status, in the order of
    /// [`REFUSAL_STATUSES`](crate::REFUSAL_STATUSES) (401, 403, 429, 503).
    pub http_refusals: [usize; 4],
}
