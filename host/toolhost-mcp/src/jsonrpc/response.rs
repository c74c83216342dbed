//! What is written back: [`RpcError`] (an error response) and the parts of a success
//! response around its result ([`response_head`]).

use serde_json::{json, Value};

use super::RequestId;

/// A JSON-RPC error object, with the id of the request it answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    /// The request's id, [`RequestId::null`] when it could not be read.
    pub id: RequestId,
    /// One of the codes above.
    pub code: i64,
    /// What was wrong, for the client's developer.
    pub message: String,
    /// More about it, for the client's code (`UnsupportedProtocolVersion` lists the
    /// supported versions here).
    pub data: Option<Value>,
}

impl RpcError {
    /// An error answering `id`.
    pub(crate) fn new(id: RequestId, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            code,
            message: message.into(),
            data: None,
        }
    }

    /// This error with `data`.
    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The response object's JSON text (one line, no newline), the id as the client sent
    /// it, and `"id": null` when it could not be read (JSON-RPC 2.0's rule).
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "the HTTP transport's refusals use it")
    )]
    pub(crate) fn encode(&self) -> String {
        self.encode_with(true)
    }

    /// As [`RpcError::encode`]; with `null_id` false, an error whose id could not be read
    /// has no `id` member at all, as MCP 2025-11-25 and later ask
    /// ([`Revision::null_error_id`](crate::Revision::null_error_id)).
    pub(crate) fn encode_with(&self, null_id: bool) -> String {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        if self.id.is_null() && !null_id {
            return format!("{{\"error\":{error},\"jsonrpc\":\"2.0\"}}");
        }
        format!(
            "{{\"error\":{error},\"id\":{},\"jsonrpc\":\"2.0\"}}",
            self.id.as_json()
        )
    }
}

/// A success response's JSON text (one line, no newline): `result` is the result's JSON text.
/// (The server writes [`response_head`], the result and the tail itself.)
#[cfg(test)]
pub(crate) fn encode_response(id: &RequestId, result: &str) -> String {
    [response_head(id).as_str(), result, RESPONSE_TAIL].concat()
}

/// What comes before the result in a success response (keys in the order serde_json's
/// maps give them, so the line reads as it did when built from a `Value`).
pub(crate) fn response_head(id: &RequestId) -> String {
    format!("{{\"id\":{},\"jsonrpc\":\"2.0\",\"result\":", id.as_json())
}

/// What comes after the result in a success response.
#[cfg(test)]
pub(crate) const RESPONSE_TAIL: &str = "}";
