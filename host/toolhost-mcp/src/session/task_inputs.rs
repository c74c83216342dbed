//! A call run as a 2026-07-28 task asking its user, as the published tasks extension
//! has it (ext-tasks e434597): no server-to-client request. The question (an
//! `elicitation/create`'s method and params) is kept in the task, which is
//! `input_required` with it as `inputRequests` (`{"q<n>": {method, params}}`, each key
//! used once in the task) in `tasks/get` and `notifications/tasks`; the client answers
//! with `tasks/update` (`inputResponses: {"q<n>": ElicitResult}`) and the call goes on.
//! The bounds of a plain call's questions hold: one open at a time,
//! [`MAX_QUESTIONS_PER_CALL`] per call, each at most [`MAX_QUESTION_BYTES`](crate::elicit::MAX_QUESTION_BYTES)
//! with a schema elicitation can show, the answer at most [`MAX_ANSWER_BYTES`] and
//! checked against the schema, no answer within `--confirm-timeout` a refusal. A task's
//! call does not sample.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use toolhost::registry::{Interaction, InteractionError, InteractionFuture};

use crate::elicit::answer::{confirm_schema, question_params, read_result};
use crate::elicit::{MAX_ANSWER_BYTES, MAX_QUESTIONS_PER_CALL};
use crate::revision::Revision;
use crate::tasks::TaskStore;

/// The [`Interaction`] of a call run as a 2026-07-28 task (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct TaskInputs(Arc<Inputs>);

struct Inputs {
    store: Arc<TaskStore>,
    task: String,
    revision: Revision,
    timeout: Duration,
    /// Cancelled when the task is.
    token: CancellationToken,
    busy: AtomicBool,
    asked: AtomicUsize,
}

impl std::fmt::Debug for Inputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

/// Withdraws the task's open question, and frees the call's turn, however the wait ends.
struct Open<'a>(&'a Inputs);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.store.settle(&self.0.task);
        self.0.busy.store(false, Ordering::Release);
    }
}

impl TaskInputs {
    /// Questions of task `task` (kept in `store`) of `revision`, each waiting `timeout`
    /// at most, none once `token` is cancelled.
    pub(super) fn new(
        store: Arc<TaskStore>,
        task: String,
        revision: Revision,
        timeout: Duration,
        token: CancellationToken,
    ) -> Self {
        Self(Arc::new(Inputs {
            store,
            task,
            revision,
            timeout,
            token,
            busy: AtomicBool::new(false),
            asked: AtomicUsize::new(0),
        }))
    }
}

impl Inputs {
    async fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> Result<Option<Value>, InteractionError> {
        let params = question_params(self.revision, message, schema)?;
        if self.busy.swap(true, Ordering::AcqRel) {
            return Err(InteractionError::Invalid(
                "this call already has a question open: ask one at a time, waiting for each answer"
                    .to_owned(),
            ));
        }
        if self.asked.fetch_add(1, Ordering::Relaxed) >= MAX_QUESTIONS_PER_CALL {
            self.busy.store(false, Ordering::Release);
            return Err(InteractionError::Invalid(format!(
                "this call has asked {MAX_QUESTIONS_PER_CALL} questions, the most one call may ask; ask for all the values in one question"
            )));
        }
        let request = json!({"method": "elicitation/create", "params": params});
        let Some(answer) = self.store.ask(&self.task, request) else {
            self.busy.store(false, Ordering::Release);
            return Err(InteractionError::TimedOut(
                "the task no longer works (cancelled, or forgotten): nobody can be asked"
                    .to_owned(),
            ));
        };
        let _open = Open(self);
        let answer = tokio::select! {
            answer = answer => answer.map_err(|_| {
                InteractionError::TimedOut("the task ended before its user answered".to_owned())
            })?,
            () = tokio::time::sleep(self.timeout) => {
                return Err(InteractionError::TimedOut(format!(
                    "the user gave no answer within {} s (the confirm timeout)",
                    self.timeout.as_secs_f64()
                )));
            }
            () = self.token.cancelled() => {
                return Err(InteractionError::TimedOut(
                    "the task was cancelled while waiting for its user's answer".to_owned(),
                ));
            }
        };
        let size = answer.to_string().len();
        if size > MAX_ANSWER_BYTES {
            return Err(InteractionError::Invalid(format!(
                "the answer is {size} bytes, over the {MAX_ANSWER_BYTES}-byte limit for one answer; it was not read"
            )));
        }
        read_result(&answer, &params["requestedSchema"])
    }
}

impl Interaction for TaskInputs {
    fn confirm(&self, message: String) -> InteractionFuture<bool> {
        let inputs = Arc::clone(&self.0);
        Box::pin(async move {
            let answer = inputs.elicit(message, confirm_schema()).await?;
            Ok(answer.is_some())
        })
    }

    fn ask(&self, message: String, schema: Value) -> InteractionFuture<Option<Value>> {
        let inputs = Arc::clone(&self.0);
        Box::pin(async move { inputs.elicit(message, schema).await })
    }
}
