//! Where a session's tasks are kept and whom they belong to ([`TaskHome`],
//! [`TaskOwner`]): below the task modules that serve them (`tasks.rs`, `task_shared.rs`,
//! `task_published.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::task_asking::TaskOutlet;
use crate::tasks::TaskStore;

/// `notifications/tasks/status` one session is sent per second at most, beyond a burst
/// of [`STATUS_BURST`]; the rest are dropped (clients poll `tasks/get` anyway).
pub(crate) const STATUS_PER_SECOND: f64 = 50.0;
/// `notifications/tasks/status` one session may be sent at once before the rate applies.
pub(crate) const STATUS_BURST: f64 = 200.0;

/// Where a session's tasks are kept ([`TaskStore`], shared by the server's sessions)
/// and whom they belong to there.
#[derive(Debug)]
pub(crate) struct TaskHome {
    pub(super) store: Arc<TaskStore>,
    /// Whom its tasks are filed under.
    pub(super) owner: TaskOwner,
    /// What is left of the session's `notifications/tasks/status` allowance, and when.
    told: Mutex<(f64, Instant)>,
    /// Where the questions of its tasks that may ask go, by task id, while their calls
    /// run (at most one per task holding a place).
    askers: Mutex<HashMap<String, Arc<TaskOutlet>>>,
}

/// Whom a session's tasks belong to ([`Session::set_tasks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TaskOwner {
    /// The session, by its id: one that later requests find again (stdio, HTTP with
    /// sessions).
    Session(String),
    /// The caller of an HTTP request without a session (2026-07-28, a stateless
    /// server): the bearer token it presented, by its place in the token file (`None`
    /// on a server without tokens: every caller alike), so that every request of one
    /// caller finds the caller's tasks and no other caller's.
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "made by the HTTP transport")
    )]
    Caller(Option<usize>),
    /// The OAuth principal of an HTTP request without a session: its issuer and
    /// subject (`oauth\0ISSUER\0SUB`), so one principal's requests find its tasks
    /// whatever token of its issuer they carry, and no other principal's.
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "made by the HTTP transport")
    )]
    Principal(String),
}

impl TaskOwner {
    /// Its key in the [`TaskStore`]: made when a task method needs it, so a plain
    /// call pays nothing for it. Callers' keys cannot meet session ids (hex, UUIDs).
    pub(super) fn key(&self) -> std::borrow::Cow<'_, str> {
        match self {
            TaskOwner::Session(id) => std::borrow::Cow::Borrowed(id),
            TaskOwner::Caller(None) => std::borrow::Cow::Borrowed("caller:anyone"),
            TaskOwner::Caller(Some(token)) => {
                std::borrow::Cow::Owned(format!("caller:token#{token}"))
            }
            TaskOwner::Principal(binding) => std::borrow::Cow::Owned(format!("caller:{binding}")),
        }
    }
}

impl TaskHome {
    /// A home in `store` for `owner`'s tasks.
    pub(super) fn new(store: Arc<TaskStore>, owner: TaskOwner) -> Self {
        Self {
            store,
            owner,
            told: Mutex::new((STATUS_BURST, Instant::now())),
            askers: Mutex::default(),
        }
    }

    pub(super) fn askers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TaskOutlet>>> {
        self.askers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether one more status notification fits the session's rate.
    pub(super) fn admit(&self) -> bool {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let refill = now.duration_since(told.1).as_secs_f64() * STATUS_PER_SECOND;
        told.0 = (told.0 + refill).min(STATUS_BURST);
        told.1 = now;
        if told.0 >= 1.0 {
            told.0 -= 1.0;
            true
        } else {
            false
        }
    }
}
