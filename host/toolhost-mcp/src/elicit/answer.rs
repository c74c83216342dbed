//! The questions and answers of elicitation, whatever carries them: the params of an
//! `elicitation/create`, and the client's result read against the question's schema.

use serde_json::{json, Map, Value};

use toolhost::registry::InteractionError;

use super::schema::{check_answer, check_schema};
use super::{MAX_ANSWER_BYTES, MAX_QUESTION_BYTES};
use crate::jsonrpc::ResponseBody;
use crate::revision::Revision;

/// The schema of a yes/no question: no fields, the answer is the action.
pub(crate) fn confirm_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The params of an `elicitation/create` asking `message` with `schema`, checked: the
/// schema must be elicitation's restricted one, and one `revision` has (multiple choice
/// fields, `type: array`, came in 2025-11-25: 2025-06-18's schema has none), the whole at
/// most [`MAX_QUESTION_BYTES`]. 2025-11-25 on say `"mode": "form"`.
pub(crate) fn question_params(
    revision: Revision,
    message: String,
    schema: Value,
) -> Result<Value, InteractionError> {
    check_schema(&schema).map_err(InteractionError::Invalid)?;
    if revision < Revision::V2025_11_25 {
        let multiple = schema["properties"].as_object().and_then(|properties| {
            properties
                .iter()
                .find(|(_, property)| property["type"] == "array")
        });
        if let Some((name, _)) = multiple {
            return Err(InteractionError::Invalid(format!(
                "field {name:?} is a multiple choice (type array), which this client's protocol revision {revision} cannot show (2025-11-25 added them); ask for a single choice, or a boolean per option, instead"
            )));
        }
    }
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
pub(crate) fn read_answer(
    body: ResponseBody,
    schema: &Value,
) -> Result<Option<Value>, InteractionError> {
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
pub(crate) fn read_result(
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
