//! [`Message`]: one JSON-RPC message on its way out, kept as parts so a shared part
//! (the encoded `tools/list`) is not copied.

use bytes::Bytes;
#[cfg(test)]
use serde_json::Value;

use crate::jsonrpc::{response_head, RequestId, RpcError};

/// One JSON-RPC message on its way out (a response or a notification): its JSON text in
/// parts, without a line end. A shared part (the encoded `tools/list`) is not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    parts: Vec<Bytes>,
    error_code: Option<i64>,
}

impl Message {
    /// A success response answering `id` with `result` (its JSON text).
    pub(crate) fn response(id: &RequestId, result: Bytes) -> Self {
        Self {
            parts: vec![
                Bytes::from(response_head(id)),
                result,
                Bytes::from_static(b"}"),
            ],
            error_code: None,
        }
    }

    /// An error response (an unreadable id given as `"id": null`, JSON-RPC 2.0's rule;
    /// see [`Message::error_with`]).
    #[cfg(feature = "http")]
    pub(crate) fn error(err: &RpcError) -> Self {
        Self::error_with(err, true)
    }

    /// An error response; `null_id` says how an unreadable id is given
    /// ([`RpcError::encode_with`]: as `null`, or no `id` member, as 2025-11-25 on ask).
    pub(crate) fn error_with(err: &RpcError, null_id: bool) -> Self {
        Self {
            parts: vec![Bytes::from(err.encode_with(null_id))],
            error_code: Some(err.code),
        }
    }

    /// A message whose whole JSON text is `text`.
    pub(crate) fn text(text: String) -> Self {
        Self {
            parts: vec![Bytes::from(text)],
            error_code: None,
        }
    }

    /// The answers of a JSON-RPC batch as one message, a JSON array (`None` when there is
    /// none: a batch of notifications only is not answered).
    pub(crate) fn batch(answers: Vec<Message>) -> Option<Self> {
        if answers.is_empty() {
            return None;
        }
        let mut parts = Vec::with_capacity(answers.len() * 4 + 1);
        for (at, answer) in answers.into_iter().enumerate() {
            parts.push(Bytes::from_static(if at == 0 { b"[" } else { b"," }));
            parts.extend(answer.parts);
        }
        parts.push(Bytes::from_static(b"]"));
        Some(Self {
            parts,
            error_code: None,
        })
    }

    /// A notification: `method` with `params` (left out when `None`). Only the tests
    /// build notifications from a [`Value`]; the server writes its own as text.
    #[cfg(test)]
    pub(crate) fn notification(method: &str, params: Option<&Value>) -> Self {
        let mut message = serde_json::json!({ "jsonrpc": "2.0", "method": method });
        if let Some(params) = params {
            message["params"] = params.clone();
        }
        Self {
            parts: vec![Bytes::from(message.to_string())],
            error_code: None,
        }
    }

    /// The error code, when this is an error response made here.
    #[cfg(feature = "http")]
    pub(crate) fn error_code(&self) -> Option<i64> {
        self.error_code
    }

    /// The JSON text in parts, in order.
    pub(crate) fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The length of the JSON text in bytes.
    #[cfg(feature = "http")]
    pub(crate) fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// The JSON text in one piece.
    #[cfg(any(feature = "http", test))]
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }
}
