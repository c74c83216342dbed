//! What the readers of a task get from the [`TaskStore`]: `tasks/get` (both
//! revisions' forms), `tasks/result` (the end, or what to wait on), `tasks/list` (a page
//! of the caller's tasks), and `subscriptions/listen`'s watch on a task.

use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::records::Entry;
use super::{published, Outcome, TaskStore, TASK_PAGE_SIZE};

impl TaskStore {
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
}
