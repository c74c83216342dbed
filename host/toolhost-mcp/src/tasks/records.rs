//! What the [`TaskStore`](super::TaskStore) keeps: each task's entry (its owner,
//! status, times, result's size, the token that stops its call, its open question) and
//! each session's share, and the bookkeeping over them: places and bytes held, tasks
//! forgotten at their expiry or past the count of ended tasks kept.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Finished, Status};
use crate::counters::Counters;

/// What one task is.
pub(super) struct Entry {
    pub(super) owner: String,
    /// Creation order, for `tasks/list`.
    pub(super) seq: u64,
    pub(super) created_at: SystemTime,
    pub(super) updated_at: SystemTime,
    /// Forgotten at this instant.
    pub(super) expires: Instant,
    pub(super) ttl: Duration,
    pub(super) status: Status,
    pub(super) message: Option<String>,
    /// Whether it holds a place (working, or completed with its result).
    pub(super) holds_place: bool,
    /// Bytes of its result, counted against the budget.
    pub(super) bytes: usize,
    pub(super) cancel: CancellationToken,
    pub(super) done: watch::Receiver<Option<Arc<Finished>>>,
    /// Questions its call asked through `inputRequests` (2026-07-28): each one's key is
    /// `q<n>`, never used twice in one task.
    pub(super) asked: usize,
    /// The question open now (2026-07-28), until answered or withdrawn.
    pub(super) question: Option<OpenQuestion>,
    /// Counts its changes (2026-07-28's `subscriptions/listen` with `taskIds` waits on
    /// it); dropped with the entry, which ends the waits.
    pub(super) changes: watch::Sender<u64>,
}

/// A question of a 2026-07-28 task's call, surfaced as `inputRequests` in `tasks/get`
/// and answered by `tasks/update`.
pub(super) struct OpenQuestion {
    pub(super) key: String,
    /// `{method, params}`, as `inputRequests` carries it.
    pub(super) request: Value,
    pub(super) answer: tokio::sync::oneshot::Sender<Value>,
}

impl Entry {
    /// Its status (or open question) changed now.
    pub(super) fn touch(&mut self) {
        self.updated_at = SystemTime::now();
        self.changes
            .send_modify(|count| *count = count.wrapping_add(1));
    }
}

/// One session's share.
#[derive(Default)]
pub(super) struct Owner {
    /// Places held.
    pub(super) places: usize,
    /// Its tasks that ended without a place (failed, cancelled), oldest first.
    pub(super) ended: VecDeque<String>,
}

/// Every session's tasks, and what they hold in all.
#[derive(Default)]
pub(super) struct Store {
    pub(super) tasks: HashMap<String, Entry>,
    pub(super) owners: HashMap<String, Owner>,
    pub(super) places: usize,
    pub(super) bytes: usize,
    /// Every session's ended tasks (failed, cancelled), oldest first: at most
    /// `max_tasks` are kept in all, however many sessions came and went.
    pub(super) ended: VecDeque<String>,
    pub(super) next_seq: u64,
    /// The earliest expiry among the tasks, when there are any.
    pub(super) next_expiry: Option<Instant>,
    /// Where tasks created and ended are counted ([`TaskStore::counting`]).
    ///
    /// [`TaskStore::counting`]: super::TaskStore::counting
    pub(super) counters: Arc<Counters>,
}

/// Adds one to `counter`.
pub(super) fn count(counter: &std::sync::atomic::AtomicUsize) {
    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

impl Store {
    /// Forgets the tasks whose time is up.
    pub(super) fn sweep(&mut self, now: Instant) {
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
    pub(super) fn remove(&mut self, id: &str) -> Option<Entry> {
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
    pub(super) fn release(&mut self, id: &str, keep: usize, keep_all: usize) {
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
    pub(super) fn owned(&self, owner: &str, id: &str) -> Option<&Entry> {
        self.tasks.get(id).filter(|entry| entry.owner == owner)
    }
}
