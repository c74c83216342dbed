//! JSON-RPC 2.0 framing: one line in, a classified message (or the error to answer) out,
//! and the response objects written back.
//!
//! Only what MCP over stdio uses: single messages (MCP dropped batches in 2025-06-18),
//! ids that are strings or numbers, params that are objects. Everything else is answered
//! with the JSON-RPC error the 2.0 spec names for it, and the server keeps serving.

use serde_json::{json, Map, Value};

/// JSON-RPC error code: the line is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: valid JSON, but not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code: the method exists but its params are wrong.
pub const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC error object, with the id of the request it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The request's id, `Value::Null` when it could not be read.
    pub id: Value,
    /// One of the codes above.
    pub code: i64,
    /// What was wrong, for the client's developer.
    pub message: String,
}

impl RpcError {
    /// An error answering `id`.
    pub fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            code,
            message: message.into(),
        }
    }

    /// The response object.
    pub fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": { "code": self.code, "message": self.message },
        })
    }
}

/// One well-formed incoming message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it has an id and wants a response.
    Request {
        /// A string or a number.
        id: Value,
        /// The method name.
        method: String,
        /// The params object (empty when absent).
        params: Map<String, Value>,
    },
    /// A notification: no id, no response.
    Notification {
        /// The method name.
        method: String,
        /// The params object (empty when absent).
        params: Map<String, Value>,
    },
    /// A response to a request of ours. This server sends none, so it is only logged.
    Response {
        /// Its id.
        id: Value,
    },
}

/// Reads one line (without its newline) as a JSON-RPC message.
///
/// # Errors
/// The [`RpcError`] to send back: [`PARSE_ERROR`] for text that is not JSON,
/// [`INVALID_REQUEST`] for JSON that is not a single JSON-RPC 2.0 message, and
/// [`INVALID_PARAMS`] for params that are not an object.
pub fn parse_line(line: &[u8]) -> Result<Incoming, RpcError> {
    let value: Value = serde_json::from_slice(line).map_err(|err| {
        RpcError::new(
            Value::Null,
            PARSE_ERROR,
            format!("Parse error: the line is not valid JSON ({err}); send one JSON-RPC 2.0 message per line"),
        )
    })?;
    classify(value)
}

/// Classifies a parsed JSON value as a JSON-RPC message.
///
/// # Errors
/// As [`parse_line`], without the parse error.
pub fn classify(value: Value) -> Result<Incoming, RpcError> {
    let Value::Object(mut message) = value else {
        let what = if value.is_array() {
            "a batch (array); batches are not supported, send one message per line"
        } else {
            "not a JSON object"
        };
        return Err(invalid_request(Value::Null, what));
    };
    // The id, if present, must be a string or a number (MCP forbids null ids).
    let id = match message.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(other) => {
            return Err(invalid_request(
                Value::Null,
                &format!(
                    "\"id\" must be a string or a number, got {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if message.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(invalid_request(reply_id, "\"jsonrpc\" must be \"2.0\""));
    }
    let method = match message.remove("method") {
        Some(Value::String(method)) => method,
        Some(other) => {
            return Err(invalid_request(
                reply_id,
                &format!("\"method\" must be a string, got {}", type_name(&other)),
            ))
        }
        None => {
            return match id {
                Some(id) if message.contains_key("result") || message.contains_key("error") => {
                    Ok(Incoming::Response { id })
                }
                _ => Err(invalid_request(reply_id, "\"method\" is missing")),
            }
        }
    };
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(other) => {
            return Err(RpcError::new(
                reply_id,
                INVALID_PARAMS,
                format!(
                    "Invalid params: \"params\" of {method} must be an object, got {}",
                    type_name(&other)
                ),
            ))
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// A success response answering `id`.
pub fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

fn invalid_request(id: Value, what: &str) -> RpcError {
    RpcError::new(
        id,
        INVALID_REQUEST,
        format!("Invalid Request: {what}; expected a JSON-RPC 2.0 message"),
    )
}

/// The JSON type of `value`, for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> RpcError {
        parse_line(line.as_bytes()).unwrap_err()
    }

    #[test]
    fn request_notification_and_response() {
        assert_eq!(
            parse_line(
                br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"a"}}"#
            ),
            Ok(Incoming::Request {
                id: json!(7),
                method: "tools/list".into(),
                params: json!({"cursor":"a"}).as_object().cloned().unwrap(),
            })
        );
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification {
                method: "notifications/initialized".into(),
                params: Map::new(),
            })
        );
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            Ok(Incoming::Response { id: json!("x") })
        );
    }

    #[test]
    fn garbage_is_a_parse_error_with_null_id() {
        let e = err("this is not json");
        assert_eq!((e.id.clone(), e.code), (Value::Null, PARSE_ERROR));
        assert!(e
            .message
            .starts_with("Parse error: the line is not valid JSON ("));
        assert_eq!(err("{\"jsonrpc\":").code, PARSE_ERROR);
        assert_eq!(parse_line(b"\xff\xfe").unwrap_err().code, PARSE_ERROR);
    }

    #[test]
    fn invalid_requests() {
        let cases = [
            (
                r#"[1,2]"#,
                Value::Null,
                "a batch (array); batches are not supported, send one message per line",
            ),
            (r#"42"#, Value::Null, "not a JSON object"),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                Value::Null,
                "\"id\" must be a string or a number, got null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                Value::Null,
                "\"id\" must be a string or a number, got object",
            ),
            (
                r#"{"id":1,"method":"ping"}"#,
                json!(1),
                "\"jsonrpc\" must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                json!(1),
                "\"jsonrpc\" must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":7}"#,
                json!(7),
                "\"method\" is missing",
            ),
            (r#"{"jsonrpc":"2.0"}"#, Value::Null, "\"method\" is missing"),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
                json!("a"),
                "\"method\" must be a string, got number",
            ),
        ];
        for (line, id, what) in cases {
            assert_eq!(
                err(line),
                RpcError::new(
                    id,
                    INVALID_REQUEST,
                    format!("Invalid Request: {what}; expected a JSON-RPC 2.0 message")
                ),
                "{line}"
            );
        }
    }

    #[test]
    fn params_must_be_an_object() {
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}"#),
            RpcError::new(
                json!(3),
                INVALID_PARAMS,
                "Invalid params: \"params\" of tools/call must be an object, got array"
            )
        );
        // A null params is read as none.
        assert!(matches!(
            parse_line(br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":null}"#),
            Ok(Incoming::Request { .. })
        ));
    }

    #[test]
    fn response_shapes() {
        assert_eq!(
            response(&json!(1), json!({})),
            json!({"jsonrpc":"2.0","id":1,"result":{}})
        );
        assert_eq!(
            RpcError::new(Value::Null, PARSE_ERROR, "bad").to_json(),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}})
        );
    }
}
