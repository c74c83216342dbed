//! [`SessionInteraction`]: one call's [`Interaction`], asking through its session's
//! client with `elicitation/create` (its user) and `sampling/createMessage` (its model).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{
    Interaction, InteractionError, InteractionFuture, SamplingRequest, SamplingResponse,
};

use super::{Message, Notifier};
use crate::elicit::answer::{confirm_schema, question_params, read_answer};
use crate::elicit::sampling::{read_sampling_answer, sampling_params};
use crate::elicit::{
    OpenError, Questions, MAX_OPEN_QUESTIONS, MAX_QUESTIONS_PER_CALL, MAX_SAMPLES_PER_CALL,
};
use crate::jsonrpc::{RequestId, ResponseBody};
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
    /// Sampling requests this call has sent.
    sampled: AtomicUsize,
    /// The client declared elicitation: its user can be asked.
    elicits: bool,
    /// The client declared sampling: its model can be asked.
    samples: bool,
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
    /// The interaction of one call, whose client declared elicitation (`elicits`)
    /// and/or sampling (`samples`).
    #[allow(
        clippy::too_many_arguments,
        reason = "one call's channel, bounds and the client's two capabilities"
    )]
    pub(crate) fn new(
        questions: Arc<Questions>,
        notifier: Notifier,
        token: CancellationToken,
        timeout: Duration,
        revision: Revision,
        elicits: bool,
        samples: bool,
    ) -> Self {
        Self(Arc::new(Asker {
            questions,
            notifier,
            token,
            timeout,
            revision,
            busy: AtomicBool::new(false),
            asked: AtomicUsize::new(0),
            sampled: AtomicUsize::new(0),
            elicits,
            samples,
            task: None,
        }))
    }

    /// The interaction of the call task `task` runs, whose client declared elicitation:
    /// as [`SessionInteraction::new`], its questions tied to the task
    /// (`_meta["io.modelcontextprotocol/related-task"]`). A task's call does not sample:
    /// nobody reviews a model request made in the background.
    pub(crate) fn for_task(
        questions: Arc<Questions>,
        notifier: Notifier,
        token: CancellationToken,
        timeout: Duration,
        revision: Revision,
        task: String,
    ) -> Self {
        let mut interaction = Self::new(questions, notifier, token, timeout, revision, true, false);
        // Just made, so not shared yet: always found.
        if let Some(asker) = Arc::get_mut(&mut interaction.0) {
            asker.task = Some(task);
        }
        interaction
    }
}

/// What is being asked: the user (elicitation) or the client's model (sampling).
#[derive(Clone, Copy)]
enum Asked {
    User,
    Model,
}

impl Asked {
    fn method(self) -> &'static str {
        match self {
            Asked::User => "elicitation/create",
            Asked::Model => "sampling/createMessage",
        }
    }

    fn answer(self) -> &'static str {
        match self {
            Asked::User => "the user's answer",
            Asked::Model => "the answer of the client's model",
        }
    }

    fn who(self) -> &'static str {
        match self {
            Asked::User => "the user",
            Asked::Model => "the client's model",
        }
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
        if !self.elicits {
            return Err(InteractionError::Unsupported(NOBODY_TO_ASK.to_owned()));
        }
        self.connected()?;
        let mut params = question_params(self.revision, message, schema)?;
        if let Some(task) = &self.task {
            params["_meta"] = serde_json::json!({ RELATED_TASK: { "taskId": task } });
        }
        let body = self
            .exchange(Asked::User, &params, &self.asked, || {
                format!(
                    "this call has asked {MAX_QUESTIONS_PER_CALL} questions, the most one call may ask; ask for all the values in one question"
                )
            }, MAX_QUESTIONS_PER_CALL)
            .await?;
        read_answer(body, &params["requestedSchema"])
    }

    /// Sends `request` to the client's model: its answer, checked.
    async fn sample(&self, request: SamplingRequest) -> Result<SamplingResponse, InteractionError> {
        if !self.samples {
            return Err(InteractionError::Unsupported(
                "the client's model cannot be asked: this client did not declare the sampling capability".to_owned(),
            ));
        }
        self.connected()?;
        let params = sampling_params(self.revision, &request)?;
        drop(request);
        let body = self
            .exchange(Asked::Model, &params, &self.sampled, || {
                format!(
                    "this call has sent {MAX_SAMPLES_PER_CALL} sampling requests, the most one call may send"
                )
            }, MAX_SAMPLES_PER_CALL)
            .await?;
        read_sampling_answer(body, self.revision)
    }

    /// Whether the call's channel can carry a request to the client.
    fn connected(&self) -> Result<(), InteractionError> {
        if self.notifier.is_connected() {
            Ok(())
        } else {
            Err(InteractionError::Unsupported(
                "this request cannot carry a question to the user: over Streamable HTTP, send the call alone (not in a batch) with Accept: text/event-stream".to_owned(),
            ))
        }
    }

    /// Sends one request of `asked` with `params` and waits for its answer: one at a
    /// time per call, at most `cap` counted in `count`, within the timeout and the
    /// call's cancellation.
    async fn exchange(
        &self,
        asked: Asked,
        params: &Value,
        count: &AtomicUsize,
        over_cap: impl FnOnce() -> String,
        cap: usize,
    ) -> Result<ResponseBody, InteractionError> {
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
        if count.fetch_add(1, Ordering::Relaxed) >= cap {
            return Err(InteractionError::Invalid(over_cap()));
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
            r#"{{"jsonrpc":"2.0","id":{},"method":"{}","params":{params}}}"#,
            id.as_json(),
            asked.method()
        );
        let timeout = self.timeout;
        let sent = async {
            self.notifier.send(Message::text(request)).await;
            debug!(%id, method = asked.method(), "asked the client");
            answer.await
        };
        let body = tokio::select! {
            body = sent => match body {
                Ok(body) => body,
                // The session dropped its questions: it ended.
                Err(_) => return Err(InteractionError::TimedOut(format!("the session ended before {} answered", asked.who()))),
            },
            () = tokio::time::sleep(timeout) => {
                info!(%id, timeout_s = timeout.as_secs_f64(), method = asked.method(), "no answer in time");
                // Tell the client to take the request down (best effort).
                let cancel = format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"no answer in time"}}}}"#,
                    id.as_json()
                );
                self.notifier.try_send(Message::text(cancel));
                return Err(InteractionError::TimedOut(format!(
                    "{} gave no answer within {} s (the confirm timeout)",
                    asked.who(),
                    timeout.as_secs_f64()
                )));
            }
            () = self.token.cancelled() => {
                return Err(InteractionError::TimedOut(format!("the call was cancelled while waiting for {}", asked.answer())));
            }
        };
        drop(open);
        Ok(body)
    }
}

/// What a plugin hears when it asks during a call whose client cannot ask its user (as
/// when the call has no interaction at all).
const NOBODY_TO_ASK: &str = "nobody can be asked during this call (the client cannot ask its user, or the call is not served to a client); go on without asking, or fail and say what you need";

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

    fn sample(&self, request: SamplingRequest) -> InteractionFuture<SamplingResponse> {
        let asker = Arc::clone(&self.0);
        Box::pin(async move { asker.sample(request).await })
    }
}
