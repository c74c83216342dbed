//! The flags bounding MCP tasks (a `tools/call` run in the background, its result
//! fetched later), shared by `host run` and `host serve`.

use std::num::NonZeroUsize;
use std::time::Duration;

use clap::Args;

use toolhost_mcp::limits::{McpLimits, DEFAULT_MAX_TASKS, DEFAULT_MAX_TASKS_PER_SESSION};

use super::values::{self, parse_duration, parse_size};

/// How long tasks run and are kept, and how many a server keeps.
#[derive(Debug, Clone, Args)]
pub struct TaskArgs {
    /// Longest a task (a tool call a client asked to run in the background) runs; past
    /// it the call is stopped, the task fails saying so and its place is free. A
    /// plugin's manifest may ask for less (task_timeout_ms under its limits). It replaces
    /// --timeout and a plugin's own per-call time limit for calls run as tasks.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub task_timeout: Duration,
    /// How long a task and its result are kept from its creation; a client asking for
    /// less gets less. Then it is forgotten and its place is free.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub task_ttl: Duration,
    /// Most tasks kept at once for the whole server (working, or holding a completed
    /// result); one more is refused with an error saying so. A failed or cancelled
    /// task frees its place at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TASKS, value_parser = parse_max_tasks)]
    pub max_tasks: NonZeroUsize,
    /// Most tasks kept at once for one session (one stdio client, one HTTP session; for
    /// HTTP requests without a session, 2026-07-28 or --stateless, one bearer token).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TASKS_PER_SESSION, value_parser = parse_max_tasks)]
    pub max_tasks_per_session: NonZeroUsize,
    /// Bytes of task results kept at once for the whole server; a result that does not
    /// fit is not kept and its task fails saying so.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_task_bytes)]
    pub max_task_result_bytes: NonZeroUsize,
}

impl TaskArgs {
    /// `limits` with these task bounds.
    pub fn apply(&self, limits: McpLimits) -> McpLimits {
        limits
            .with_task_timeout(self.task_timeout)
            .with_task_ttl(self.task_ttl)
            .with_max_tasks(self.max_tasks)
            .with_max_tasks_per_session(self.max_tasks_per_session)
            .with_max_task_result_bytes(self.max_task_result_bytes)
    }
}

/// `--max-tasks`, `--max-tasks-per-session`: a whole number of at least 1.
fn parse_max_tasks(text: &str) -> Result<NonZeroUsize, String> {
    values::parse_positive_count(
        text,
        "; give how many tasks may be kept at once, e.g. 64",
        "0 would refuse every task; give at least 1",
    )
}

/// `--max-task-result-bytes`: a size of at least 1 byte.
fn parse_task_bytes(text: &str) -> Result<NonZeroUsize, String> {
    let bytes = parse_size(text)?;
    NonZeroUsize::new(usize::try_from(bytes).unwrap_or(usize::MAX))
        .ok_or_else(|| "0 would fail every task's result; give at least 1, e.g. 64MiB".to_owned())
}
