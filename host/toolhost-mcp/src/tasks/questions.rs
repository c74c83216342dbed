//! A task waiting for its user's answer: `input_required` while its call asks (an
//! `elicitation/create` in 2025-11-25), and 2026-07-28's open question, surfaced as
//! `inputRequests` and answered by `tasks/update`.

use std::time::Instant;

use serde_json::Value;

use super::records::OpenQuestion;
use super::{Status, TaskStore};

impl TaskStore {
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
}
