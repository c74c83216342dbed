//! Sampling (`sampling/createMessage`), whatever carries it: the request's params built
//! and bounded, and the client's answer read and checked for shape.
//!
//! Bounds (docs/protocol.md, "Sampling"): a request of at most
//! [`MAX_SAMPLING_REQUEST_BYTES`] of payload, at least one message, each text, an image or
//! (2025-03-26 on) a sound, `maxTokens` at least 1; an answer of at most
//! [`MAX_SAMPLING_RESPONSE_BYTES`] of JSON with `role` `assistant` or `user`, one content
//! block (an object, or a list of exactly one) of text, an image or a sound, a `model`
//! string and an optional `stopReason` string. Anything else is
//! [`InteractionError::Invalid`], never passed on.

use base64::Engine as _;
use serde_json::{json, Map, Value};

use toolhost::catalog::Role;
use toolhost::registry::{
    ContentBlock, InteractionError, Media, SamplingRequest, SamplingResponse,
    MAX_SAMPLING_REQUEST_BYTES, MAX_SAMPLING_RESPONSE_BYTES,
};

use crate::content::content_block_json;
use crate::jsonrpc::ResponseBody;
use crate::revision::Revision;

/// Sampling requests one call may send in all, whatever its tools' grants: 16 (one at a
/// time). A plugin's grant usually allows fewer.
pub const MAX_SAMPLES_PER_CALL: usize = 16;

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// The params of a `sampling/createMessage` for `request`, checked.
pub(crate) fn sampling_params(
    revision: Revision,
    request: &SamplingRequest,
) -> Result<Value, InteractionError> {
    if request.messages.is_empty() {
        return Err(InteractionError::Invalid(
            "the request has no message; send at least one".to_owned(),
        ));
    }
    if request.max_tokens == 0 {
        return Err(InteractionError::Invalid(
            "the request asks for 0 tokens; ask for at least 1".to_owned(),
        ));
    }
    let size = request.payload_len();
    if size > MAX_SAMPLING_REQUEST_BYTES {
        return Err(InteractionError::Invalid(format!(
            "the request carries {size} bytes (messages, system prompt, stop sequences, model hints), over the limit of {MAX_SAMPLING_REQUEST_BYTES}; send less"
        )));
    }
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        match &message.content {
            ContentBlock::Text { .. } | ContentBlock::Image(_) => {}
            ContentBlock::Audio(_) if revision >= Revision::V2025_03_26 => {}
            ContentBlock::Audio(_) => {
                return Err(InteractionError::Invalid(format!(
                    "a message carries a sound, which this client's protocol revision {revision} cannot take (2025-03-26 added audio); send text or an image"
                )))
            }
            _ => {
                return Err(InteractionError::Invalid(
                    "a message carries a resource; sampling takes text, an image or a sound"
                        .to_owned(),
                ))
            }
        }
        messages.push(json!({
            "role": role_name(message.role),
            "content": content_block_json(&message.content),
        }));
    }
    let mut params = Map::new();
    params.insert("messages".into(), Value::Array(messages));
    if let Some(prompt) = &request.system_prompt {
        params.insert("systemPrompt".into(), json!(prompt));
    }
    params.insert("maxTokens".into(), json!(request.max_tokens));
    if let Some(temperature) = request.temperature.filter(|t| t.is_finite()) {
        params.insert("temperature".into(), json!(temperature));
    }
    if !request.stop_sequences.is_empty() {
        params.insert("stopSequences".into(), json!(request.stop_sequences));
    }
    if !request.model_hints.is_empty() {
        let hints: Vec<Value> = request
            .model_hints
            .iter()
            .map(|name| json!({ "name": name }))
            .collect();
        params.insert("modelPreferences".into(), json!({ "hints": hints }));
    }
    Ok(Value::Object(params))
}

/// Reads the client's answer to a sampling request.
pub(crate) fn read_sampling_answer(
    body: ResponseBody,
    revision: Revision,
) -> Result<SamplingResponse, InteractionError> {
    let text = match body {
        ResponseBody::Result(text) => text,
        ResponseBody::Error(text) => {
            let cut: String = text.chars().take(200).collect();
            return Err(InteractionError::Unsupported(format!(
                "the client answered the sampling request with an error: {cut}"
            )));
        }
    };
    if text.len() > MAX_SAMPLING_RESPONSE_BYTES {
        return Err(InteractionError::Invalid(format!(
            "the client's answer is {} bytes, over the {MAX_SAMPLING_RESPONSE_BYTES}-byte limit for a sampling answer; it was not read",
            text.len()
        )));
    }
    let result: Value = serde_json::from_str(&text).map_err(|err| {
        InteractionError::Invalid(format!("the client's answer cannot be read: {err}"))
    })?;
    read_sampling_result(&result, revision)
}

/// Reads a `sampling/createMessage` result (a `CreateMessageResult`), checked for shape.
pub(crate) fn read_sampling_result(
    result: &Value,
    revision: Revision,
) -> Result<SamplingResponse, InteractionError> {
    let invalid = |what: &str| {
        InteractionError::Invalid(format!(
            "the client's answer is not a sampling result: {what}"
        ))
    };
    let role = match result.get("role").and_then(Value::as_str) {
        Some("assistant") => Role::Assistant,
        Some("user") => Role::User,
        _ => return Err(invalid("\"role\" must be \"assistant\" or \"user\"")),
    };
    let block = match result.get("content") {
        Some(Value::Array(blocks)) if blocks.len() == 1 => &blocks[0],
        Some(block @ Value::Object(_)) => block,
        _ => {
            return Err(invalid(
                "\"content\" must be one content block (text, image or audio)",
            ))
        }
    };
    let content = read_block(block, revision).map_err(|why| invalid(&why))?;
    let model = match result.get("model") {
        Some(Value::String(model)) => model.clone(),
        _ => return Err(invalid("\"model\" must be a string")),
    };
    let stop_reason = match result.get("stopReason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return Err(invalid("\"stopReason\" must be a string")),
    };
    Ok(SamplingResponse {
        role,
        content,
        model,
        stop_reason,
    })
}

/// One content block of an answer: text, an image or a sound.
fn read_block(block: &Value, revision: Revision) -> Result<ContentBlock, String> {
    let kind = block.get("type").and_then(Value::as_str);
    match kind {
        Some("text") => match block.get("text") {
            Some(Value::String(text)) => Ok(ContentBlock::text(text.clone())),
            _ => Err("a text block needs a \"text\" string".to_owned()),
        },
        Some(kind @ ("image" | "audio")) => {
            if kind == "audio" && revision < Revision::V2025_03_26 {
                return Err(format!(
                    "audio is not in protocol revision {revision} (2025-03-26 added it)"
                ));
            }
            let (Some(data), Some(mime_type)) = (
                block.get("data").and_then(Value::as_str),
                block.get("mimeType").and_then(Value::as_str),
            ) else {
                return Err(format!(
                    "an {kind} block needs \"data\" (base64) and \"mimeType\" strings"
                ));
            };
            let data = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| format!("the {kind} block's \"data\" is not base64"))?;
            let media = Media {
                data,
                mime_type: mime_type.to_owned(),
            };
            Ok(if kind == "image" {
                ContentBlock::Image(media)
            } else {
                ContentBlock::Audio(media)
            })
        }
        _ => Err("\"content\" must be a text, image or audio block".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(message: &str) -> Result<SamplingResponse, InteractionError> {
        Err(InteractionError::Invalid(message.to_owned()))
    }

    #[test]
    fn params_carry_the_request_as_mcp_spells_it() {
        let mut request = SamplingRequest::new(vec![SamplingRequest::user_text("Hi")], 100)
            .with_system_prompt("Be brief.");
        request.temperature = Some(0.5);
        request.stop_sequences = vec!["END".into()];
        request.model_hints = vec!["claude".into()];
        assert_eq!(
            sampling_params(Revision::V2025_06_18, &request).unwrap(),
            json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
                "systemPrompt": "Be brief.",
                "maxTokens": 100,
                "temperature": 0.5,
                "stopSequences": ["END"],
                "modelPreferences": {"hints": [{"name": "claude"}]},
            })
        );
        request.max_tokens = 0;
        assert_eq!(
            sampling_params(Revision::V2025_06_18, &request),
            Err(InteractionError::Invalid(
                "the request asks for 0 tokens; ask for at least 1".into()
            ))
        );
        let audio = SamplingRequest::new(
            vec![toolhost::registry::SamplingMessage {
                role: Role::User,
                content: ContentBlock::Audio(Media {
                    data: vec![1],
                    mime_type: "audio/wav".into(),
                }),
            }],
            10,
        );
        assert!(sampling_params(Revision::V2025_03_26, &audio).is_ok());
        assert_eq!(
            sampling_params(Revision::V2024_11_05, &audio),
            Err(InteractionError::Invalid("a message carries a sound, which this client's protocol revision 2024-11-05 cannot take (2025-03-26 added audio); send text or an image".into()))
        );
    }

    #[test]
    fn answers_are_read_only_when_shaped_as_a_sampling_result() {
        let v = Revision::V2025_06_18;
        assert_eq!(
            read_sampling_result(
                &json!({"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m", "stopReason": "endTurn"}),
                v
            ),
            Ok(SamplingResponse {
                role: Role::Assistant,
                content: ContentBlock::text("Hello"),
                model: "m".into(),
                stop_reason: Some("endTurn".into()),
            })
        );
        assert_eq!(
            read_sampling_result(
                &json!({"role": "assistant", "content": [{"type": "image", "data": "AAE=", "mimeType": "image/png"}], "model": "m"}),
                v
            ),
            Ok(SamplingResponse {
                role: Role::Assistant,
                content: ContentBlock::Image(Media {
                    data: vec![0, 1],
                    mime_type: "image/png".into()
                }),
                model: "m".into(),
                stop_reason: None,
            })
        );
        for (answer, message) in [
            (json!({"role": "system", "content": {"type": "text", "text": "x"}, "model": "m"}), "the client's answer is not a sampling result: \"role\" must be \"assistant\" or \"user\""),
            (json!({"role": "assistant", "content": [], "model": "m"}), "the client's answer is not a sampling result: \"content\" must be one content block (text, image or audio)"),
            (json!({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "model": "m"}), "the client's answer is not a sampling result: \"content\" must be one content block (text, image or audio)"),
            (json!({"role": "assistant", "content": {"type": "resource_link", "uri": "file:///etc/passwd", "name": "p"}, "model": "m"}), "the client's answer is not a sampling result: \"content\" must be a text, image or audio block"),
            (json!({"role": "assistant", "content": {"type": "text"}, "model": "m"}), "the client's answer is not a sampling result: a text block needs a \"text\" string"),
            (json!({"role": "assistant", "content": {"type": "image", "data": "!!", "mimeType": "image/png"}, "model": "m"}), "the client's answer is not a sampling result: the image block's \"data\" is not base64"),
            (json!({"role": "assistant", "content": {"type": "text", "text": "x"}}), "the client's answer is not a sampling result: \"model\" must be a string"),
            (json!({"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m", "stopReason": 5}), "the client's answer is not a sampling result: \"stopReason\" must be a string"),
        ] {
            assert_eq!(read_sampling_result(&answer, v), invalid(message), "{answer}");
        }
        let huge = format!(
            r#"{{"role":"assistant","content":{{"type":"text","text":"{}"}},"model":"m"}}"#,
            "a".repeat(MAX_SAMPLING_RESPONSE_BYTES)
        );
        let size = huge.len();
        assert_eq!(
            read_sampling_answer(ResponseBody::Result(huge), v),
            invalid(&format!("the client's answer is {size} bytes, over the 1048576-byte limit for a sampling answer; it was not read"))
        );
        assert_eq!(
            read_sampling_answer(ResponseBody::Error(r#"{"code":-1,"message":"User rejected sampling request"}"#.into()), v),
            Err(InteractionError::Unsupported(r#"the client answered the sampling request with an error: {"code":-1,"message":"User rejected sampling request"}"#.into()))
        );
    }
}
