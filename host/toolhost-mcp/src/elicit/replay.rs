//! Asking in the modern revision (2026-07-28): no server-to-client request. A call that
//! needs an answer it does not have ends with an `input_required` result naming the
//! question (`inputRequests`, one `elicitation/create`, or `sampling/createMessage` for a
//! client that declared sampling, keyed `q<n>`) and a
//! `requestState`; the client asks its user and repeats the same `tools/call` with
//! `inputResponses` (`{"q<n>": ElicitResult}`) and the `requestState`. The call then runs
//! again from its start: each question it asks is answered from the state (earlier
//! rounds) or the responses (this round), in order, and the first one without an answer
//! ends the round again.
//!
//! The state holds the answers of earlier rounds and the number of the question the
//! round ended on, tagged with a keyed hash (per process) of the tool's name, its
//! arguments and the answers. Responses are only read for that question and with a valid
//! state: an answer (an approval) is never replayed for other arguments, responses sent
//! without the server's state are not read, and a state from another process or edited
//! by hand is ignored (the questions are asked again from the first). Every replayed answer is checked against
//! its question's schema again, as a live one is. The client is the one answering, so
//! the tag is not a secret, only a binding.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use base64::Engine;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use toolhost::registry::{
    Interaction, InteractionError, InteractionFuture, SamplingRequest, SamplingResponse,
    MAX_SAMPLING_RESPONSE_BYTES,
};

use super::answer::{confirm_schema, question_params, read_result};
use super::sampling::{read_sampling_result, sampling_params, MAX_SAMPLES_PER_CALL};
use super::{MAX_ANSWER_BYTES, MAX_QUESTIONS_PER_CALL};
use crate::jsonrpc::Params;
use crate::revision::Revision;

/// The most `requestState` read or written: 2 MiB (16 answers of 64 KiB, base64).
pub(crate) const MAX_STATE_BYTES: usize = 2 << 20;

/// The most bytes of answers (as JSON) a round's state may carry: 1.5 MiB, so that the
/// state, in base64 with its tag, stays within [`MAX_STATE_BYTES`]. Sixteen elicitation
/// answers (at most 1 MiB) always fit; sampling answers (up to 1 MiB each) that would
/// not are refused ([`InteractionError::Invalid`]) rather than lost.
const MAX_STATE_ANSWER_BYTES: usize = 3 << 19;

/// What a repeated `tools/call` carries (2026-07-28): `inputResponses` and
/// `requestState`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RetryInput {
    /// `inputResponses`: the client's result per question key.
    pub(crate) responses: Map<String, Value>,
    /// `requestState`, as the server gave it.
    pub(crate) state: Option<String>,
}

impl RetryInput {
    /// Reads the members from `tools/call` params; `None` when neither is there.
    pub(crate) fn read(params: &Params) -> Option<Box<Self>> {
        params
            .raw("inputResponses")
            .or(params.raw("requestState"))?;
        let responses = match params.value("inputResponses") {
            Some(Value::Object(responses)) => responses,
            _ => Map::new(),
        };
        Some(Box::new(Self {
            responses,
            state: params.str("requestState"),
        }))
    }

    /// Bytes held (for the call's in-flight budget).
    pub(crate) fn held_bytes(&self) -> usize {
        self.state.as_ref().map_or(0, String::len)
            + self
                .responses
                .iter()
                .map(|(key, value)| key.len() + value.to_string().len())
                .sum::<usize>()
    }
}

/// The process's key for the state's tag.
fn key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// The question a round ended on: its number, its key and its `elicitation/create`
/// request.
type Needed = (usize, String, Value);

/// One call's [`Interaction`] in the modern revision.
#[derive(Clone)]
pub(crate) struct Replay(Arc<Rounds>);

struct Rounds {
    revision: Revision,
    /// Binds the state to the call: a hash of the tool's name and arguments.
    binding: u64,
    /// Answers known in order: from the state, then this round's responses as used.
    answers: Mutex<Vec<Value>>,
    /// The question the state says the last round ended on: the only one this round's
    /// responses may answer (none without a valid state).
    pending: Option<usize>,
    responses: Map<String, Value>,
    /// Questions and sampling requests of this round, in order (their keys' numbers).
    asked: AtomicUsize,
    /// Questions of this round (elicitation).
    questions: AtomicUsize,
    /// Sampling requests of this round.
    sampled: AtomicUsize,
    /// The client declared elicitation.
    elicits: bool,
    /// The client declared sampling.
    samples: bool,
    busy: AtomicBool,
    needed: Mutex<Option<Needed>>,
    /// Cancelled when a question has no answer: the round ends.
    ended: CancellationToken,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").finish_non_exhaustive()
    }
}

impl Replay {
    /// The interaction of a call of `tool` with `arguments`, answering from `input` (a
    /// repeated call's) when there is one; `(elicits, samples)`: what the request's
    /// client capabilities declare.
    pub(crate) fn new(
        tool: &str,
        arguments: &str,
        input: Option<&RetryInput>,
        revision: Revision,
        (elicits, samples): (bool, bool),
    ) -> Self {
        let binding = key().hash_one((tool, arguments));
        let (answers, pending) = input
            .and_then(|input| input.state.as_deref())
            .and_then(|state| decode(state, binding))
            .map_or((Vec::new(), None), |(answers, pending)| {
                (answers, Some(pending))
            });
        Self(Arc::new(Rounds {
            revision,
            binding,
            answers: Mutex::new(answers),
            pending,
            responses: input
                .map(|input| input.responses.clone())
                .unwrap_or_default(),
            asked: AtomicUsize::new(0),
            questions: AtomicUsize::new(0),
            sampled: AtomicUsize::new(0),
            elicits,
            samples,
            busy: AtomicBool::new(false),
            needed: Mutex::new(None),
            ended: CancellationToken::new(),
        }))
    }

    /// Completes when a question had no answer: the call must end with
    /// [`Replay::input_required`].
    pub(crate) async fn needs_input(&self) {
        self.0.ended.cancelled().await;
    }

    /// The `input_required` result (without the modern `_meta`) for the question that
    /// had no answer; `None` if there is none.
    pub(crate) fn input_required(&self) -> Option<Value> {
        let (number, key, request) = self
            .0
            .needed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let answers = self
            .0
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut requests = Map::new();
        requests.insert(key, request);
        Some(json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": encode(&answers, number, self.0.binding),
        }))
    }
}

fn tag(binding: u64, payload: &str) -> u64 {
    key().hash_one((binding, payload))
}

fn encode(answers: &[Value], pending: usize, binding: u64) -> String {
    let payload = json!({"answers": answers, "pending": pending}).to_string();
    let tag = tag(binding, &payload);
    format!(
        "{tag:016x}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload)
    )
}

/// The answers a state holds and the question it waits for, if it is one of this
/// process's for this call.
fn decode(state: &str, binding: u64) -> Option<(Vec<Value>, usize)> {
    if state.len() > MAX_STATE_BYTES {
        return None;
    }
    let (tag_text, body) = state.split_once('.')?;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .ok()?;
    let payload = String::from_utf8(payload).ok()?;
    if u64::from_str_radix(tag_text, 16).ok()? != tag(binding, &payload) {
        return None;
    }
    let mut state: Value = serde_json::from_str(&payload).ok()?;
    let pending = usize::try_from(state.get("pending")?.as_u64()?).ok()?;
    match state.get_mut("answers")?.take() {
        Value::Array(answers)
            if answers.len() <= MAX_QUESTIONS_PER_CALL + MAX_SAMPLES_PER_CALL
                && pending == answers.len() =>
        {
            Some((answers, pending))
        }
        _ => None,
    }
}

impl Rounds {
    async fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> Result<Option<Value>, InteractionError> {
        if !self.elicits {
            return Err(InteractionError::Unsupported(
                "nobody can be asked during this call (the client cannot ask its user, or the call is not served to a client); go on without asking, or fail and say what you need".to_owned(),
            ));
        }
        let params = question_params(self.revision, message, schema)?;
        let cap = (&self.questions, MAX_QUESTIONS_PER_CALL, || {
            format!(
            "this call has asked {MAX_QUESTIONS_PER_CALL} questions, the most one call may ask; ask for all the values in one question"
        )
        });
        let answer = self
            .round("elicitation/create", &params, cap, MAX_ANSWER_BYTES)
            .await?;
        read_result(&answer, &params["requestedSchema"])
    }

    async fn sample(&self, request: SamplingRequest) -> Result<SamplingResponse, InteractionError> {
        if !self.samples {
            return Err(InteractionError::Unsupported(
                "the client's model cannot be asked: this request's client capabilities do not declare sampling".to_owned(),
            ));
        }
        let params = sampling_params(self.revision, &request)?;
        drop(request);
        let cap = (&self.sampled, MAX_SAMPLES_PER_CALL, || {
            format!(
            "this call has sent {MAX_SAMPLES_PER_CALL} sampling requests, the most one call may send"
        )
        });
        let answer = self
            .round(
                "sampling/createMessage",
                &params,
                cap,
                MAX_SAMPLING_RESPONSE_BYTES,
            )
            .await?;
        read_sampling_result(&answer, self.revision)
    }

    /// The answer to the next request (`method` with `params`), at most `max_bytes` as
    /// JSON; or, when it has none yet, the round ends (this never resolves). `cap`: the
    /// counter of this kind of request, its most per call, and the refusal past it.
    async fn round(
        &self,
        method: &str,
        params: &Value,
        (count, most, over): (&AtomicUsize, usize, impl FnOnce() -> String),
        max_bytes: usize,
    ) -> Result<Value, InteractionError> {
        if self.busy.swap(true, Ordering::AcqRel) {
            return Err(InteractionError::Invalid(
                "this call already has a question open: ask one at a time, waiting for each answer"
                    .to_owned(),
            ));
        }
        if count.fetch_add(1, Ordering::Relaxed) >= most {
            self.busy.store(false, Ordering::Release);
            return Err(InteractionError::Invalid(over()));
        }
        let number = self.asked.fetch_add(1, Ordering::Relaxed);
        let outcome = self.answer(number, method, params, max_bytes);
        self.busy.store(false, Ordering::Release);
        match outcome {
            Some(answer) => answer,
            None => {
                // No answer yet: this round ends with the question; the call's future is
                // dropped before this resolves.
                std::future::pending::<()>().await;
                Err(InteractionError::TimedOut("the round ended".to_owned()))
            }
        }
    }

    /// The answer to request `number`, or `None` after recording it as needed.
    fn answer(
        &self,
        number: usize,
        method: &str,
        params: &Value,
        max_bytes: usize,
    ) -> Option<Result<Value, InteractionError>> {
        let key = format!("q{number}");
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = match answers.get(number) {
            Some(answer) => answer.clone(),
            None => match self.responses.get(&key) {
                Some(answer) if self.pending == Some(number) && answers.len() == number => {
                    let size = answer.to_string().len();
                    // An answer over its own limit is pushed and refused below, as ever.
                    let held: usize = answers.iter().map(|a| a.to_string().len()).sum();
                    if size <= max_bytes && held + size > MAX_STATE_ANSWER_BYTES {
                        return Some(Err(InteractionError::Invalid(format!(
                            "this call's answers reach {} bytes, over the {MAX_STATE_ANSWER_BYTES} bytes its rounds may carry; ask for shorter answers",
                            held + size
                        ))));
                    }
                    answers.push(answer.clone());
                    answer.clone()
                }
                _ => {
                    drop(answers);
                    let request = json!({"method": method, "params": params});
                    *self.needed.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some((number, key, request));
                    self.ended.cancel();
                    return None;
                }
            },
        };
        let size = answer.to_string().len();
        if size > max_bytes {
            return Some(Err(InteractionError::Invalid(format!(
                "the answer is {size} bytes, over the {max_bytes}-byte limit for one answer; it was not read"
            ))));
        }
        Some(Ok(answer))
    }
}

impl Interaction for Replay {
    fn confirm(&self, message: String) -> InteractionFuture<bool> {
        let rounds = Arc::clone(&self.0);
        Box::pin(async move {
            let answer = rounds.elicit(message, confirm_schema()).await?;
            Ok(answer.is_some())
        })
    }

    fn ask(&self, message: String, schema: Value) -> InteractionFuture<Option<Value>> {
        let rounds = Arc::clone(&self.0);
        Box::pin(async move { rounds.elicit(message, schema).await })
    }

    fn sample(&self, request: SamplingRequest) -> InteractionFuture<SamplingResponse> {
        let rounds = Arc::clone(&self.0);
        Box::pin(async move { rounds.sample(request).await })
    }
}
