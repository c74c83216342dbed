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
}

impl Counters {
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
        }
    }
}
