//! [`SessionInteraction`]: one call's [`Interaction`], asking through its session's
//! client with `elicitation/create`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{Interaction, InteractionError, InteractionFuture};

use super::{Message, Notifier};
use crate::elicit::answer::{confirm_schema, question_params, read_answer};
use crate::elicit::{OpenError, Questions, MAX_OPEN_QUESTIONS, MAX_QUESTIONS_PER_CALL};
use crate::jsonrpc::RequestId;
use crate::revision::Revision;
use crate::tasks::RELATED_TASK;

/// How one call asks its client's user. Made per call, only for a client that declared
/// elicitation; the call's tools reach it through
/// [`CallContext::interaction`](toolhost::registry::CallContext::interaction).
#[derive(Debug, Clone)]
pub(crate) struct SessionInteraction(Arc<Asker>);

/// What [`SessionInteraction`] shares with its questions' futures.
struct Asker {
    questions: Arc<Questions>,
    /// Where the call's own messages go (stdio: the output; HTTP: the POST's stream).
    notifier: Notifier,
    /// The call's cancellation (the client's, the session's end, the client gone).
    token: CancellationToken,
    timeout: Duration,
    revision: Revision,
    /// A question of this call is open.
    busy: AtomicBool,
    /// Questions this call has asked.
    asked: AtomicUsize,
    /// The task the call runs as, named in each question's
    /// `_meta["io.modelcontextprotocol/related-task"]`.
    task: Option<String>,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("timeout", &self.timeout)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

/// Withdraws a question and frees the call's turn when the asking ends, however it ends
/// (answered, timed out, cancelled, or its future dropped at the call's deadline).
struct Open<'a> {
    interaction: &'a Asker,
    id: Option<RequestId>,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.interaction.questions.close(id);
        }
        self.interaction.busy.store(false, Ordering::Release);
    }
}

impl SessionInteraction {
    /// The interaction of one call.
    pub(crate) fn new(
        questions: Arc<Questions>,
        notifier: Notifier,
        token: CancellationToken,
        timeout: Duration,
        revision: Revision,
    ) -> Self {
        Self(Arc::new(Asker {
            questions,
            notifier,
            token,
            timeout,
            revision,
            busy: AtomicBool::new(false),
            asked: AtomicUsize::new(0),
            task: None,
        }))
    }

    /// The interaction of the call task `task` runs: as [`SessionInteraction::new`], its
    /// questions tied to the task (`_meta["io.modelcontextprotocol/related-task"]`).
    pub(crate) fn for_task(
        questions: Arc<Questions>,
        notifier: Notifier,
        token: CancellationToken,
        timeout: Duration,
        revision: Revision,
        task: String,
    ) -> Self {
        Self(Arc::new(Asker {
            questions,
            notifier,
            token,
            timeout,
            revision,
            busy: AtomicBool::new(false),
            asked: AtomicUsize::new(0),
            task: Some(task),
        }))
    }
}

impl Asker {
    /// Asks `message` with `schema`: the accepted content, `None` when declined or
    /// dismissed.
    async fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> Result<Option<Value>, InteractionError> {
        if !self.notifier.is_connected() {
            return Err(InteractionError::Unsupported(
                "this request cannot carry a question to the user: over Streamable HTTP, send the call alone (not in a batch) with Accept: text/event-stream".to_owned(),
            ));
        }
        let mut params = question_params(self.revision, message, schema)?;
        if let Some(task) = &self.task {
            params["_meta"] = serde_json::json!({ RELATED_TASK: { "taskId": task } });
        }
        if self.busy.swap(true, Ordering::AcqRel) {
            return Err(InteractionError::Invalid(
                "this call already has a question open: ask one at a time, waiting for each answer"
                    .to_owned(),
            ));
        }
        let mut open = Open {
            interaction: self,
            id: None,
        };
        if self.asked.fetch_add(1, Ordering::Relaxed) >= MAX_QUESTIONS_PER_CALL {
            return Err(InteractionError::Invalid(format!(
                "this call has asked {MAX_QUESTIONS_PER_CALL} questions, the most one call may ask; ask for all the values in one question"
            )));
        }
        let (id, answer) = match self.questions.open() {
            Ok(opened) => opened,
            Err(OpenError::Full) => {
                return Err(InteractionError::Invalid(format!(
                    "{MAX_OPEN_QUESTIONS} questions are waiting for this session's user, the most allowed; try again once one is answered"
                )))
            }
        };
        open.id = Some(id.clone());
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"elicitation/create","params":{params}}}"#,
            id.as_json()
        );
        let timeout = self.timeout;
        let asked = async {
            self.notifier.send(Message::text(request)).await;
            debug!(%id, "asked the client's user (elicitation/create)");
            answer.await
        };
        let body = tokio::select! {
            body = asked => match body {
                Ok(body) => body,
                // The session dropped its questions: it ended.
                Err(_) => return Err(InteractionError::TimedOut("the session ended before the user answered".to_owned())),
            },
            () = tokio::time::sleep(timeout) => {
                info!(%id, timeout_s = timeout.as_secs_f64(), "no answer to a question in time");
                // Tell the client to take the question down (best effort).
                let cancel = format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"no answer in time"}}}}"#,
                    id.as_json()
                );
                self.notifier.try_send(Message::text(cancel));
                return Err(InteractionError::TimedOut(format!(
                    "the user gave no answer within {} s (the confirm timeout)",
                    timeout.as_secs_f64()
                )));
            }
            () = self.token.cancelled() => {
                return Err(InteractionError::TimedOut("the call was cancelled while waiting for the user's answer".to_owned()));
            }
        };
        drop(open);
        read_answer(body, &params["requestedSchema"])
    }
}

impl Interaction for SessionInteraction {
    fn confirm(&self, message: String) -> InteractionFuture<bool> {
        let asker = Arc::clone(&self.0);
        Box::pin(async move {
            let answer = asker.elicit(message, confirm_schema()).await?;
            Ok(answer.is_some())
        })
    }

    fn ask(&self, message: String, schema: Value) -> InteractionFuture<Option<Value>> {
        let asker = Arc::clone(&self.0);
        Box::pin(async move { asker.elicit(message, schema).await })
    }
}
