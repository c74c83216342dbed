//! Asking the person behind the client during a call (MCP elicitation): confirm a step,
//! or fill in a small form.
//!
//! The plugin's manifest must ask for it and the operator must allow it:
//!
//! ```toml
//! # deploy.toml, next to deploy.wasm; the host runs with --plugin-ask
//! [grants]
//! ask = true
//! ```
//!
//! ```no_run
//! use toolhost_sdk::{interaction, ToolError};
//!
//! fn delete_all() -> Result<String, ToolError> {
//!     if !interaction::confirm("Delete all 12 drafts?")? {
//!         return Ok("nothing deleted: the user said no".into());
//!     }
//!     let schema = serde_json::json!({
//!         "type": "object",
//!         "properties": {"reason": {"type": "string"}},
//!         "required": ["reason"],
//!     });
//!     let reason = interaction::ask("Why?", &schema)?
//!         .and_then(|answer| answer["reason"].as_str().map(str::to_owned))
//!         .unwrap_or_default();
//!     Ok(format!("deleted: {reason}"))
//! }
//! ```
//!
//! Nothing is ever assumed: a host that does not allow it, a client that cannot ask its
//! user, a user who does not answer in time, are all errors, never a "yes". The host
//! allows at most 16 questions per call, a message of at most 4 KiB and a schema of at
//! most 64 KiB (a JSON object schema with flat properties: string, number, integer,
//! boolean, enum).

use serde_json::Value;

use crate::bindings::toolhost::plugin::interaction as wit;
use crate::ToolError;

/// Why a question got no answer. Each message says what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InteractionError {
    /// The manifest does not say `[grants] ask = true`, or the operator did not allow it.
    #[error("{0}")]
    NotAllowed(String),
    /// Nobody can be asked: the client cannot ask its user, or the call is not served to
    /// a client.
    #[error("{0}")]
    Unsupported(String),
    /// No answer in time, or the call was cancelled meanwhile.
    #[error("{0}")]
    TimedOut(String),
    /// The message or schema was refused (too large, not an object schema), or this call
    /// already asked as many questions as it may.
    #[error("{0}")]
    Invalid(String),
}

impl From<wit::InteractionError> for InteractionError {
    fn from(error: wit::InteractionError) -> Self {
        match error {
            wit::InteractionError::NotAllowed(m) => InteractionError::NotAllowed(m),
            wit::InteractionError::Unsupported(m) => InteractionError::Unsupported(m),
            wit::InteractionError::TimedOut(m) => InteractionError::TimedOut(m),
            wit::InteractionError::Invalid(m) => InteractionError::Invalid(m),
        }
    }
}

impl From<InteractionError> for ToolError {
    /// The question's failure as the call's: [`ToolError::Failed`] with its message.
    fn from(error: InteractionError) -> Self {
        ToolError::Failed(format!("could not ask the user: {error}"))
    }
}

/// Asks the user to confirm `message` (plain text): `Ok(true)` only when they accepted,
/// `Ok(false)` when they declined or dismissed it.
///
/// # Errors
/// See [`InteractionError`].
pub fn confirm(message: &str) -> Result<bool, InteractionError> {
    wit::confirm(message).map_err(InteractionError::from)
}

/// Asks the user for the values `schema` describes (a JSON object schema):
/// `Ok(Some(answer))` with their answer (a JSON object the host checked against the
/// schema), `Ok(None)` when they declined or dismissed it.
///
/// # Errors
/// See [`InteractionError`]; an answer that is not JSON is [`InteractionError::Invalid`].
pub fn ask(message: &str, schema: &Value) -> Result<Option<Value>, InteractionError> {
    let answer = ask_text(message, &schema.to_string())?;
    answer
        .map(|text| {
            serde_json::from_str(&text)
                .map_err(|err| InteractionError::Invalid(format!("the answer is not JSON: {err}")))
        })
        .transpose()
}

/// As [`ask`], with the schema and the answer as JSON text.
///
/// # Errors
/// See [`InteractionError`].
pub fn ask_text(message: &str, schema: &str) -> Result<Option<String>, InteractionError> {
    wit::ask(message, schema).map_err(InteractionError::from)
}
