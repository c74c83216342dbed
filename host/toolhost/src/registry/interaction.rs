//! Asking the person behind the client during a call (MCP elicitation): what a tool, or
//! the host's approval policy, calls to confirm a step or to get a few values; and
//! asking the client's model for a completion (MCP sampling, [`Interaction::sample`]).
//!
//! The caller (an MCP server session) puts an [`Interaction`] in the call's
//! [`CallContext`](super::CallContext); a call without one cannot ask, and must treat
//! that as a refusal, never as a "yes".

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::sampling::{SamplingRequest, SamplingResponse};

/// The future an [`Interaction`] returns.
pub type InteractionFuture<T> = Pin<Box<dyn Future<Output = Result<T, InteractionError>> + Send>>;

/// Asks the user behind the client of one call. Implemented by the MCP server for a
/// client that declared elicitation; each question waits for the answer within the
/// server's time limit and the call's own deadline.
pub trait Interaction: Send + Sync + 'static {
    /// Asks the user to confirm `message`: `Ok(true)` only when they accepted,
    /// `Ok(false)` when they declined or dismissed it.
    fn confirm(&self, message: String) -> InteractionFuture<bool>;

    /// Asks the user for values described by `schema` (a flat object JSON Schema, as
    /// MCP elicitation allows): `Ok(Some(object))` with their answer, checked against the
    /// schema; `Ok(None)` when they declined or dismissed it.
    fn ask(&self, message: String, schema: Value) -> InteractionFuture<Option<Value>>;

    /// Asks the client's language model for a completion of `request` (MCP
    /// `sampling/createMessage`): the client's answer, checked for shape.
    ///
    /// The default answers [`InteractionError::Unsupported`]: an implementor that cannot
    /// sample (or predates sampling) never sends anything. An implementor that can must
    /// refuse a request over [`MAX_SAMPLING_REQUEST_BYTES`](super::MAX_SAMPLING_REQUEST_BYTES)
    /// and an answer over [`MAX_SAMPLING_RESPONSE_BYTES`](super::MAX_SAMPLING_RESPONSE_BYTES)
    /// ([`InteractionError::Invalid`]), and send only to a client that declared sampling.
    fn sample(&self, request: SamplingRequest) -> InteractionFuture<SamplingResponse> {
        drop(request);
        Box::pin(async {
            Err(InteractionError::Unsupported(
                "the client's model cannot be asked during this call (sampling is not offered here)"
                    .to_owned(),
            ))
        })
    }
}

/// Why a question got no answer. Each message says what happened and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InteractionError {
    /// Asking (or sampling) is not allowed for this caller (a plugin without the grant).
    #[error("{0}")]
    NotAllowed(String),
    /// The client cannot ask its user (no elicitation capability) or its model (no
    /// sampling capability), or nobody is behind the call (a task, a library call
    /// without an [`Interaction`]).
    #[error("{0}")]
    Unsupported(String),
    /// No answer within the time limit, or the call was cancelled meanwhile.
    #[error("{0}")]
    TimedOut(String),
    /// The question (or sampling request) was refused: too large, a schema elicitation
    /// cannot show, too many in one call, more tokens than allowed, or an answer that does
    /// not match the schema (or is not a sampling result).
    #[error("{0}")]
    Invalid(String),
}
