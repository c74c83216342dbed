//! `toolhost:plugin/interaction` (0.3.0): a plugin asks the user behind the client of the
//! running call, through the call's [`Interaction`](toolhost::registry::Interaction).
//!
//! # Sandbox
//! - Allowed only when the manifest asks for it (`[grants] ask = true`) and the operator
//!   allows it (`PluginHostConfig::with_plugin_ask`, `--plugin-ask`); otherwise every
//!   question is `not-allowed`.
//! - At most [`MAX_QUESTIONS_PER_CALL`] questions per call, a message of at most
//!   [`MAX_MESSAGE_BYTES`], a schema of at most [`MAX_SCHEMA_BYTES`] that parses as a
//!   JSON object schema (`"type": "object"`); anything else is `invalid` before it
//!   reaches the client. The schema's size is checked before it is parsed.
//! - A call with no interaction set (no client, a client that cannot ask, a task) is
//!   `unsupported`: never a "yes".
//! - The wait is inside the call's deadline: a user who does not answer in time makes
//!   the call time out, as any slow import does.

use serde_json::Value;
use toolhost::registry::InteractionError;

use super::ImportCtx;

/// Most questions (`confirm` and `ask` together) one call may ask; the next ones are
/// `invalid`.
pub(crate) const MAX_QUESTIONS_PER_CALL: u32 = 16;
/// Longest message, in bytes (4 KiB).
pub(crate) const MAX_MESSAGE_BYTES: usize = 4 * 1024;
/// Longest schema, in bytes of JSON text (64 KiB).
pub(crate) const MAX_SCHEMA_BYTES: usize = 64 * 1024;

impl ImportCtx {
    /// Checks that this call may ask one more question with `message`, and counts it.
    fn admit_question(&mut self, message: &str) -> Result<(), InteractionError> {
        if !self.ask_allowed {
            return Err(InteractionError::NotAllowed(format!(
                "plugin {} may not ask the user: its manifest must say `[grants] ask = true` and the operator must allow it (--plugin-ask); go on without asking, or fail and say what you need",
                self.plugin
            )));
        }
        if self.questions >= MAX_QUESTIONS_PER_CALL {
            return Err(InteractionError::Invalid(format!(
                "this call already asked {MAX_QUESTIONS_PER_CALL} questions, the most one call may ask; ask fewer, or combine them into one form"
            )));
        }
        self.questions += 1;
        if message.len() > MAX_MESSAGE_BYTES {
            return Err(InteractionError::Invalid(format!(
                "the message is {} bytes, over the limit of {MAX_MESSAGE_BYTES}; say it shorter",
                message.len()
            )));
        }
        Ok(())
    }

    /// The running call's interaction, or `unsupported`.
    fn interaction(
        &self,
    ) -> Result<std::sync::Arc<dyn toolhost::registry::Interaction>, InteractionError> {
        self.call.interaction().cloned().ok_or_else(|| {
            InteractionError::Unsupported(
                "nobody can be asked during this call (the client cannot ask its user, or the call is not served to a client); go on without asking, or fail and say what you need".into(),
            )
        })
    }

    /// `confirm` of the `interaction` import.
    pub(crate) async fn confirm(&mut self, message: String) -> Result<bool, InteractionError> {
        self.admit_question(&message)?;
        let interaction = self.interaction()?;
        interaction.confirm(message).await
    }

    /// `ask` of the `interaction` import: `schema` checked, the answer as JSON text.
    pub(crate) async fn ask(
        &mut self,
        message: String,
        schema: String,
    ) -> Result<Option<String>, InteractionError> {
        self.admit_question(&message)?;
        let schema = parse_schema(&schema)?;
        let interaction = self.interaction()?;
        let answer = interaction.ask(message, schema).await?;
        Ok(answer.map(|value| value.to_string()))
    }
}

/// `schema` parsed, when it is at most [`MAX_SCHEMA_BYTES`] of a JSON object schema.
fn parse_schema(schema: &str) -> Result<Value, InteractionError> {
    if schema.len() > MAX_SCHEMA_BYTES {
        return Err(InteractionError::Invalid(format!(
            "the schema is {} bytes, over the limit of {MAX_SCHEMA_BYTES}; ask for fewer values",
            schema.len()
        )));
    }
    let value: Value = serde_json::from_str(schema).map_err(|err| {
        InteractionError::Invalid(format!(
            "the schema is not valid JSON ({err}); send a JSON Schema object"
        ))
    })?;
    if value.get("type").and_then(Value::as_str) != Some("object") {
        return Err(InteractionError::Invalid(
            "the schema must be an object schema (`{\"type\": \"object\", \"properties\": {...}}`)"
                .into(),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_checked_for_size_json_and_object_type() {
        let big = format!(
            "{{\"type\":\"object\",\"x\":\"{}\"}}",
            "a".repeat(MAX_SCHEMA_BYTES)
        );
        assert!(
            matches!(parse_schema(&big), Err(InteractionError::Invalid(m)) if m.contains("over the limit of 65536"))
        );
        assert!(
            matches!(parse_schema("{nope"), Err(InteractionError::Invalid(m)) if m.starts_with("the schema is not valid JSON"))
        );
        assert!(
            matches!(parse_schema(r#"{"type":"string"}"#), Err(InteractionError::Invalid(m)) if m.starts_with("the schema must be an object schema"))
        );
        assert_eq!(
            parse_schema(r#"{"type":"object","properties":{}}"#),
            Ok(serde_json::json!({"type":"object","properties":{}}))
        );
    }
}
