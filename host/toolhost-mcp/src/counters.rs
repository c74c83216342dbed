//! The server's counters ([`Counters`]): what it holds now and held at most, across the
//! sessions (and the task store) that share them; read as [`McpStats`].

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::limits::McpStats;

/// What a server holds now and held at most, counted across every session that shares
/// the counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) queued_bytes: AtomicUsize,
    pub(crate) queued_answers: AtomicUsize,
    pub(crate) peak_queued_bytes: AtomicUsize,
    pub(crate) calls_running: AtomicUsize,
    pub(crate) peak_calls_running: AtomicUsize,
    pub(crate) call_argument_bytes: AtomicUsize,
    pub(crate) calls_queued: AtomicUsize,
    pub(crate) peak_calls_queued: AtomicUsize,
    pub(crate) queued_call_bytes: AtomicUsize,
    pub(crate) tools_list_encodings: AtomicUsize,
    pub(crate) tasks_created: AtomicUsize,
    pub(crate) tasks_completed: AtomicUsize,
    pub(crate) tasks_failed: AtomicUsize,
    pub(crate) tasks_cancelled: AtomicUsize,
    /// HTTP requests refused by the admission checks, by [`REFUSAL_STATUSES`] index.
    pub(crate) http_refusals: [AtomicUsize; REFUSAL_STATUSES.len()],
}

/// The HTTP statuses whose refusals are counted ([`McpStats::http_refusals`]): no or a
/// bad token (401), a host, origin, scope or policy refusal (403), a quota (429), the
/// OAuth keys or a full quota table unavailable (503).
pub const REFUSAL_STATUSES: [u16; 4] = [401, 403, 429, 503];

impl Counters {
    /// Counts a refusal answered with `status`, when it is one of [`REFUSAL_STATUSES`].
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "counted by the HTTP transport")
    )]
    pub(crate) fn count_refusal(&self, status: u16) {
        if let Some(at) = REFUSAL_STATUSES.iter().position(|&s| s == status) {
            self.http_refusals[at].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters now.
    pub(crate) fn stats(&self) -> McpStats {
        let get = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        McpStats {
            queued_bytes: get(&self.queued_bytes),
            queued_answers: get(&self.queued_answers),
            peak_queued_bytes: get(&self.peak_queued_bytes),
            calls_running: get(&self.calls_running),
            peak_calls_running: get(&self.peak_calls_running),
            call_argument_bytes: get(&self.call_argument_bytes),
            calls_queued: get(&self.calls_queued),
            peak_calls_queued: get(&self.peak_calls_queued),
            queued_call_bytes: get(&self.queued_call_bytes),
            tools_list_encodings: get(&self.tools_list_encodings),
            tasks_created: get(&self.tasks_created),
            tasks_completed: get(&self.tasks_completed),
            tasks_failed: get(&self.tasks_failed),
            tasks_cancelled: get(&self.tasks_cancelled),
            http_refusals: self.http_refusals.each_ref().map(get),
        }
    }
}
