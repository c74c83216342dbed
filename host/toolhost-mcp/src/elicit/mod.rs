//! Asking the person behind the client (MCP elicitation, form mode): the server's own
//! requests (`elicitation/create`), the answers routed back to the call that asked, and
//! the [`Interaction`](toolhost::registry::Interaction) a call's tools (and the [approval policy](crate::ApprovalPolicy))
//! ask through.
//!
//! A session keeps its open questions in `Questions`: each has an id the server chose
//! (`"toolhost-ask-<random>-<n>"`, a string no client request id is compared with, and
//! random per session so another session's ids are never found here). A response whose id
//! is no open question of this session is ignored (logged once per session, then at
//! debug level), so a flood of them costs one map look-up each.
//!
//! Bounds (docs/protocol.md, "Elicitation and approval"):
//! - each question waits at most the [confirm timeout](DEFAULT_CONFIRM_TIMEOUT) (120 s
//!   unless set; at most [`MAX_CONFIRM_TIMEOUT`]), and never past the call's own
//!   cancellation or deadline (the tool's future is dropped then, which withdraws it);
//! - one open question per call at a time, [`MAX_QUESTIONS_PER_CALL`] per call,
//!   [`MAX_OPEN_QUESTIONS`] open per session;
//! - a question (message and schema) of at most [`MAX_QUESTION_BYTES`]; an answer of at
//!   most [`MAX_ANSWER_BYTES`], checked against the schema.
//!
//! Only a client that declared the `elicitation` capability (with form mode, or the
//! empty object that means form) at `initialize`, on a revision that has elicitation
//! (2025-06-18 and later legacy ones), is ever asked. Over Streamable HTTP the question
//! goes out on the event stream of the POST whose call asks, so a request that accepts
//! only JSON (or a batch member) cannot ask. The modern revision (2026-07-28) has no
//! server-to-client request: a call whose client declared elicitation in the request's
//! capabilities asks through an `input_required` result and the client's repeated
//! request instead (`Replay`).
//!
//! Sampling (`sampling/createMessage`, `sampling.rs`) goes the same ways, with the same
//! ids, open-request bounds and timeout, to a client that declared the `sampling`
//! capability (any revision: it is in every one since 2024-11-05), at most
//! [`MAX_SAMPLES_PER_CALL`] per call.

pub(crate) mod answer;
mod replay;
pub(crate) mod sampling;
pub(crate) mod schema;

pub use sampling::MAX_SAMPLES_PER_CALL;

pub(crate) use replay::{Replay, RetryInput};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tracing::{debug, warn};

use crate::approval::ApprovalPolicy;
use crate::jsonrpc::{Params, RequestId, ResponseBody};
use crate::revision::Revision;

/// How long one question waits for the user's answer unless the server is told
/// otherwise (`--confirm-timeout`): 120 s, time for a person to read a prompt and
/// decide, short enough that a client that never answers frees the call's place within
/// two minutes.
pub const DEFAULT_CONFIRM_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest confirm timeout accepted: one hour. A longer wait holds a call's place
/// (and its arguments) for nothing.
pub const MAX_CONFIRM_TIMEOUT: Duration = Duration::from_secs(3600);

/// Questions one session may have open at once (over every call): 16.
pub const MAX_OPEN_QUESTIONS: usize = 16;

/// Questions one call may ask in all: 16 (one at a time).
pub const MAX_QUESTIONS_PER_CALL: usize = 16;

/// The largest question sent, its message and schema as JSON: 16 KiB.
pub const MAX_QUESTION_BYTES: usize = 16 * 1024;

/// The largest answer taken (the response's `result` as JSON text): 64 KiB. A larger
/// one is refused ([`InteractionError::Invalid`](toolhost::registry::InteractionError)).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How a server asks: the time a question may wait, and which calls need approval.
/// Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asking {
    /// How long one question waits for its answer.
    pub(crate) timeout: Duration,
    /// Which calls need the user's approval: those the policy names, and those whose
    /// definition asks for it (checked even with an empty policy).
    pub(crate) approval: Arc<ApprovalPolicy>,
}

impl Default for Asking {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_CONFIRM_TIMEOUT,
            approval: Arc::default(),
        }
    }
}

impl Asking {
    /// These settings with `policy` (an empty one asks about nothing).
    pub(crate) fn with_approval(mut self, policy: ApprovalPolicy) -> Self {
        self.approval = Arc::new(policy);
        self
    }
}

/// One session's open questions and what its client declared.
pub(crate) struct Questions {
    /// Random per session: the middle of every id this session's questions carry.
    nonce: String,
    /// Whether the client declared form elicitation at `initialize`.
    client_asks: AtomicBool,
    /// Whether the client declared sampling at `initialize`.
    client_samples: AtomicBool,
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<ResponseBody>>>,
    /// Responses to no open question, for the log (the first is logged at warn level).
    ignored: AtomicU64,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions")
            .field("client_asks", &self.client_asks.load(Ordering::Relaxed))
            .field(
                "client_samples",
                &self.client_samples.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

impl Default for Questions {
    fn default() -> Self {
        let nonce = toolhost::registry::Environment::generate().turn_id;
        Self {
            nonce: nonce.replace('-', ""),
            client_asks: AtomicBool::new(false),
            client_samples: AtomicBool::new(false),
            next: AtomicU64::new(0),
            waiting: Mutex::new(HashMap::new()),
            ignored: AtomicU64::new(0),
        }
    }
}

/// Why a question could not be opened.
pub(crate) enum OpenError {
    /// [`MAX_OPEN_QUESTIONS`] are open.
    Full,
}

impl Questions {
    /// Reads the client's capabilities from `initialize`'s params: form elicitation is
    /// declared by `capabilities.elicitation` as an empty object or one with `form`.
    pub(crate) fn read_capabilities(&self, params: &Params, revision: Option<Revision>) {
        let declared = params
            .value("capabilities")
            .and_then(|caps| caps.get("elicitation").cloned())
            .and_then(|elicitation| match elicitation {
                serde_json::Value::Object(modes) => {
                    Some(modes.is_empty() || modes.contains_key("form"))
                }
                _ => None,
            })
            .unwrap_or(false);
        let revision_has_it = revision.is_some_and(has_elicitation);
        self.client_asks
            .store(declared && revision_has_it, Ordering::Relaxed);
        // Sampling is in every legacy revision (2024-11-05 on): `capabilities.sampling`
        // as an object declares it.
        let samples = params.value("capabilities").is_some_and(|caps| {
            caps.get("sampling")
                .is_some_and(serde_json::Value::is_object)
        });
        self.client_samples
            .store(samples && revision.is_some(), Ordering::Relaxed);
    }

    /// Whether the client declared it can sample its model.
    pub(crate) fn client_samples(&self) -> bool {
        self.client_samples.load(Ordering::Relaxed)
    }

    /// Whether the client declared it can ask its user (form mode).
    pub(crate) fn client_asks(&self) -> bool {
        self.client_asks.load(Ordering::Relaxed)
    }

    /// Opens a question: its id (as sent) and where its answer arrives.
    pub(crate) fn open(&self) -> Result<(RequestId, oneshot::Receiver<ResponseBody>), OpenError> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::from(format!("toolhost-ask-{}-{number}", self.nonce).as_str());
        let (sender, receiver) = oneshot::channel();
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.len() >= MAX_OPEN_QUESTIONS {
            return Err(OpenError::Full);
        }
        waiting.insert(id.key(), sender);
        Ok((id, receiver))
    }

    /// Withdraws a question (answered, timed out, or its call gone).
    pub(crate) fn close(&self, id: &RequestId) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id.key());
    }

    /// How many questions are open now.
    #[cfg(test)]
    pub(crate) fn open_count(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// How many responses matched no open question.
    #[cfg(test)]
    pub(crate) fn ignored(&self) -> u64 {
        self.ignored.load(Ordering::Relaxed)
    }

    /// Hands a response to the question it answers; one that answers none (a forged or
    /// stale id, another session's) is ignored.
    pub(crate) fn answer(&self, id: &RequestId, body: ResponseBody) {
        let sender = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id.key());
        match sender {
            Some(sender) => {
                // The asker may have given up this instant: then nobody needs it.
                let _ = sender.send(body);
            }
            None => {
                if self.ignored.fetch_add(1, Ordering::Relaxed) == 0 {
                    warn!(%id, "ignored a response that answers no open question of this session (further ones are logged at debug level)");
                } else {
                    debug!(%id, "ignored a response that answers no open question");
                }
            }
        }
    }
}

/// Whether `revision` has elicitation (2025-06-18 and later legacy revisions).
fn has_elicitation(revision: Revision) -> bool {
    matches!(revision, Revision::V2025_06_18 | Revision::V2025_11_25)
}

/// Checks a confirm timeout against its bounds.
///
/// ```
/// use std::time::Duration;
/// use toolhost_mcp::elicit::check_confirm_timeout;
///
/// assert_eq!(check_confirm_timeout(Duration::from_secs(30)), Ok(Duration::from_secs(30)));
/// assert!(check_confirm_timeout(Duration::ZERO).is_err());
/// assert!(check_confirm_timeout(Duration::from_secs(7200)).is_err());
/// ```
///
/// # Errors
/// A message saying the bound, for a zero timeout or one over [`MAX_CONFIRM_TIMEOUT`].
pub fn check_confirm_timeout(timeout: Duration) -> Result<Duration, String> {
    if timeout.is_zero() || timeout > MAX_CONFIRM_TIMEOUT {
        return Err(format!(
            "a confirm timeout must be more than 0 and at most {} s, got {} s",
            MAX_CONFIRM_TIMEOUT.as_secs(),
            timeout.as_secs_f64()
        ));
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests;
