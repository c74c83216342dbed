//! [`SessionInteraction`]: one call's [`Interaction`], asking through its session's
//! client with `elicitation/create`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::{Interaction, InteractionError, InteractionFuture};

use super::schema::{check_answer, check_schema};
use super::{
    OpenError, Questions, MAX_ANSWER_BYTES, MAX_OPEN_QUESTIONS, MAX_QUESTIONS_PER_CALL,
    MAX_QUESTION_BYTES,
};
use crate::jsonrpc::{RequestId, ResponseBody};
use crate::revision::Revision;
use crate::session::{Message, Notifier};

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
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("timeout", &self.timeout)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

/// The schema of a yes/no question: no fields, the answer is the action.
pub(super) fn confirm_schema() -> Value {
    json!({"type": "object", "properties": {}})
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
        let params = question_params(self.revision, message, schema)?;
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

/// The params of an `elicitation/create` asking `message` with `schema`, checked: the
/// schema must be elicitation's restricted one, the whole at most
/// [`MAX_QUESTION_BYTES`]. 2025-11-25 on say `"mode": "form"`.
pub(super) fn question_params(
    revision: Revision,
    message: String,
    schema: Value,
) -> Result<Value, InteractionError> {
    check_schema(&schema).map_err(InteractionError::Invalid)?;
    let mut params = Map::new();
    if revision >= Revision::V2025_11_25 {
        params.insert("mode".into(), json!("form"));
    }
    params.insert("message".into(), Value::String(message));
    params.insert("requestedSchema".into(), schema);
    let params = Value::Object(params);
    let size = params.to_string().len();
    if size > MAX_QUESTION_BYTES {
        return Err(InteractionError::Invalid(format!(
            "the question is {size} bytes as JSON, over the {MAX_QUESTION_BYTES}-byte limit; ask with a shorter message"
        )));
    }
    Ok(params)
}

/// Reads the client's answer to a question with `schema`.
fn read_answer(body: ResponseBody, schema: &Value) -> Result<Option<Value>, InteractionError> {
    let text = match body {
        ResponseBody::Result(text) => text,
        ResponseBody::Error(text) => {
            let cut: String = text.chars().take(200).collect();
            return Err(InteractionError::Unsupported(format!(
                "the client answered the question with an error: {cut}"
            )));
        }
    };
    if text.len() > MAX_ANSWER_BYTES {
        return Err(InteractionError::Invalid(format!(
            "the answer is {} bytes, over the {MAX_ANSWER_BYTES}-byte limit for one answer; it was not read",
            text.len()
        )));
    }
    let result: Value = serde_json::from_str(&text)
        .map_err(|err| InteractionError::Invalid(format!("the answer cannot be read: {err}")))?;
    read_result(&result, schema)
}

/// Reads an `elicitation/create` result (an `ElicitResult`) to a question with `schema`.
pub(super) fn read_result(
    result: &Value,
    schema: &Value,
) -> Result<Option<Value>, InteractionError> {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = match result.get("content") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(content) => content.clone(),
            };
            check_answer(schema, &content).map_err(|why| {
                InteractionError::Invalid(format!(
                    "the answer does not match the question's schema: {why}"
                ))
            })?;
            Ok(Some(content))
        }
        Some("decline" | "cancel") => Ok(None),
        _ => Err(InteractionError::Invalid(
            "the answer has no \"action\" of accept, decline or cancel".to_owned(),
        )),
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
