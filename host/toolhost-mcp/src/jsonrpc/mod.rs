//! JSON-RPC 2.0 framing: one line in, a classified message (or the error to answer) out,
//! and the response lines written back.
//!
//! Only what MCP over stdio uses: single messages (MCP dropped batches in 2025-06-18),
//! ids that are strings or numbers, params that are objects. Everything else is answered
//! with the JSON-RPC error the 2.0 spec names for it, and the server keeps serving.
//!
//! Ids and params are kept as the JSON text the client sent ([`RequestId`], [`Params`]),
//! never read into a [`Value`] on the way through: a `Value` number is an `u64`, `i64` or
//! `f64`, so an id such as `18446744073709551616` would come back as
//! `1.8446744073709552e19` (and `1e400` would not parse at all), and the client could not
//! match its answer. Tool arguments go to the registry as the client's own text too.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{json, Value};

/// JSON-RPC error code: the line is not valid JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: valid JSON, but not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: no such method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code: the method exists but its params are wrong.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// MCP error code (2026-07-28): the HTTP headers and the body disagree (`HeaderMismatch`).
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP error code (2026-07-28): the request needs a client capability it did not declare
/// (`MissingRequiredClientCapability`).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP error code (2026-07-28): the request's protocol version is not served
/// (`UnsupportedProtocolVersion`); `data` lists the supported ones.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A request id exactly as the client wrote it: the JSON text of a string or a number, or
/// `null` for an answer to a message whose id could not be read.
///
/// Two ids are equal when their text is; the answer to a request carries its id's text
/// byte for byte.
/// (The test `ids_are_kept_as_sent` shows each kind.)
#[derive(Clone, Default)]
pub(crate) struct RequestId(Option<Box<RawValue>>);

impl RequestId {
    /// `null`, the id of an answer to a message whose own id could not be read.
    pub(crate) fn null() -> Self {
        Self(None)
    }

    /// An id from its JSON text: `None` unless it is one JSON string or number.
    pub(crate) fn parse(json: &str) -> Option<Self> {
        let raw: Box<RawValue> = serde_json::from_str(json).ok()?;
        Self::from_raw(&raw).ok()
    }

    /// An id read from a message: `Err` with the JSON type's name unless it is a string or
    /// a number (JSON-RPC allows no other kind; MCP forbids `null` too).
    pub(crate) fn from_raw(raw: &RawValue) -> Result<Self, &'static str> {
        match raw_type_name(raw) {
            "string" | "number" => Ok(Self(Some(raw.to_owned()))),
            other => Err(other),
        }
    }

    /// The id's JSON text, as the client sent it.
    pub(crate) fn as_json(&self) -> &str {
        self.0.as_deref().map_or("null", RawValue::get)
    }

    /// Whether this is the `null` id.
    pub(crate) fn is_null(&self) -> bool {
        self.0.is_none()
    }

    /// The key two mentions of one request share: a number's exact text, or a string's
    /// decoded value (so `"x"` and `"\u0078"` name the same request, as JSON says they do).
    pub(crate) fn key(&self) -> String {
        let text = self.as_json();
        if text.starts_with('"') {
            if let Ok(decoded) = serde_json::from_str::<String>(text) {
                return Value::String(decoded).to_string();
            }
        }
        text.to_owned()
    }
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl Eq for RequestId {}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RequestId({})", self.as_json())
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_json())
    }
}

impl From<u64> for RequestId {
    fn from(id: u64) -> Self {
        Self(RawValue::from_string(id.to_string()).ok())
    }
}

impl From<&str> for RequestId {
    /// A string id (the text is JSON-encoded).
    fn from(id: &str) -> Self {
        Self(RawValue::from_string(Value::from(id).to_string()).ok())
    }
}

/// A message's params object, each member kept as the JSON text the client sent, read into
/// a value only where the server needs one.
#[derive(Clone, Default)]
pub(crate) struct Params(BTreeMap<String, Box<RawValue>>);

impl Params {
    /// Params from the JSON text of an object: `None` for anything else.
    pub(crate) fn parse(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok().map(Self)
    }

    /// A member's JSON text, as sent (`null` included).
    pub(crate) fn raw(&self, name: &str) -> Option<&RawValue> {
        self.0.get(name).map(AsRef::as_ref)
    }

    /// A member read as a value; `None` when absent, or when it cannot be one (a number
    /// beyond `f64`, nesting deeper than serde_json's 128 levels).
    pub(crate) fn value(&self, name: &str) -> Option<Value> {
        serde_json::from_str(self.raw(name)?.get()).ok()
    }

    /// A member that is a JSON string, decoded.
    pub(crate) fn str(&self, name: &str) -> Option<String> {
        serde_json::from_str(self.raw(name)?.get()).ok()
    }

    /// How many members there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, x), (b, y))| a == b && x.get() == y.get())
    }
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(name, raw)| (name, raw.get())))
            .finish()
    }
}

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

/// One well-formed incoming message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    /// A request: it has an id and wants a response.
    Request {
        /// A string or a number, as sent.
        id: RequestId,
        /// The method name.
        method: String,
        /// The params object (empty when absent).
        params: Params,
    },
    /// A notification: no id, no response.
    Notification {
        /// The method name.
        method: String,
        /// The params object (empty when absent).
        params: Params,
    },
    /// A response to a request of ours. This server sends none, so it is only logged.
    Response {
        /// Its id.
        id: RequestId,
    },
}

/// Reads one line (without its newline) as a JSON-RPC message.
///
/// # Errors
/// The [`RpcError`] to send back: [`PARSE_ERROR`] for text that is not JSON,
/// [`INVALID_REQUEST`] for JSON that is not a single JSON-RPC 2.0 message, and
/// [`INVALID_PARAMS`] for params that are not an object.
pub(crate) fn parse_line(line: &[u8]) -> Result<Incoming, RpcError> {
    let message: &RawValue = serde_json::from_slice(line).map_err(|err| {
        RpcError::new(
            RequestId::null(),
            PARSE_ERROR,
            format!("Parse error: the line is not valid JSON ({err}); send one JSON-RPC 2.0 message per line"),
        )
    })?;
    classify(message)
}

/// Classifies one JSON value (its text, already checked to be JSON) as a JSON-RPC message.
///
/// # Errors
/// As [`parse_line`], without the parse error.
fn classify(message: &RawValue) -> Result<Incoming, RpcError> {
    match raw_type_name(message) {
        "object" => {}
        "array" => {
            return Err(invalid_request(
                RequestId::null(),
                "a batch (array); batches are only accepted once protocol version 2025-03-26 is negotiated, send one message per line",
            ))
        }
        _ => return Err(invalid_request(RequestId::null(), "not a JSON object")),
    }
    // Valid JSON and an object, so this only fails on something serde_json itself cannot
    // hold; answer it as the parse error it would have been.
    let Members {
        mut members,
        repeated,
    } = serde_json::from_str(message.get()).map_err(|err| {
        RpcError::new(
            RequestId::null(),
            PARSE_ERROR,
            format!("Parse error: the message cannot be read ({err}); send one JSON-RPC 2.0 message per line"),
        )
    })?;
    if let Some(name) = repeated {
        return Err(invalid_request(
            RequestId::null(),
            &format!("the member {name:?} appears more than once, so the message is ambiguous; send each member once"),
        ));
    }
    let message = &mut members;
    // The id, if present, must be a string or a number (MCP forbids null ids).
    let id = match message.remove("id") {
        None => None,
        Some(raw) => Some(RequestId::from_raw(raw).map_err(|other| {
            invalid_request(
                RequestId::null(),
                &format!("\"id\" must be a string or a number, got {other}"),
            )
        })?),
    };
    let reply_id = id.clone().unwrap_or_default();
    let version = message
        .get("jsonrpc")
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    if version.as_deref() != Some("2.0") {
        return Err(invalid_request(reply_id, "\"jsonrpc\" must be \"2.0\""));
    }
    let method = match message.remove("method") {
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(method) => method,
            Err(_) => {
                return Err(invalid_request(
                    reply_id,
                    &format!("\"method\" must be a string, got {}", raw_type_name(raw)),
                ))
            }
        },
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
        None => Params::default(),
        Some(raw) => match raw_type_name(raw) {
            "null" => Params::default(),
            "object" => Params::parse(raw.get()).ok_or_else(|| {
                RpcError::new(
                    reply_id.clone(),
                    INVALID_PARAMS,
                    format!("Invalid params: \"params\" of {method} cannot be read"),
                )
            })?,
            other => {
                return Err(RpcError::new(
                    reply_id,
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: \"params\" of {method} must be an object, got {other}"
                    ),
                ))
            }
        },
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// The longest batch read: more messages in one array are refused as a whole.
pub(crate) const MAX_BATCH_LEN: usize = 64;

/// Reads one line as a JSON-RPC batch (2025-03-26), if it is an array: `None` when it is
/// not (read it with [`parse_line`] then). Each member is classified on its own, so one
/// bad member gets its own error and the rest are served.
///
/// # Errors
/// [`PARSE_ERROR`] when the line is not JSON, [`INVALID_REQUEST`] for an empty batch or
/// one longer than [`MAX_BATCH_LEN`].
pub(crate) fn parse_batch(
    line: &[u8],
) -> Option<Result<Vec<Result<Incoming, RpcError>>, RpcError>> {
    if line.trim_ascii_start().first() != Some(&b'[') {
        return None;
    }
    let members: Vec<&RawValue> = match serde_json::from_slice(line) {
        Ok(members) => members,
        Err(err) => {
            return Some(Err(RpcError::new(
                RequestId::null(),
                PARSE_ERROR,
                format!("Parse error: the line is not valid JSON ({err}); send one JSON-RPC 2.0 message or batch per line"),
            )))
        }
    };
    if members.is_empty() {
        return Some(Err(invalid_request(RequestId::null(), "an empty batch")));
    }
    if members.len() > MAX_BATCH_LEN {
        return Some(Err(invalid_request(
            RequestId::null(),
            &format!(
                "a batch of {} messages; at most {MAX_BATCH_LEN} are read in one batch, send the rest in another",
                members.len()
            ),
        )));
    }
    Some(Ok(members
        .into_iter()
        .map(|member| match raw_type_name(member) {
            "array" => Err(invalid_request(RequestId::null(), "a batch inside a batch")),
            _ => classify(member),
        })
        .collect()))
}

/// The members of a message object, and the first name given twice, if any.
///
/// `{"id":3,"id":1,...}` is valid JSON, but which id is answered, which method runs, is
/// up to the parser: serde keeps the last, others the first. A proxy or logger in front
/// of the server could then read another request than the one served, so a repeated
/// member makes the message an Invalid Request (found by the `jsonrpc_line` fuzz target).
struct Members<'a> {
    members: BTreeMap<String, &'a RawValue>,
    repeated: Option<String>,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Members<'a>, M::Error> {
                let mut members = BTreeMap::new();
                let mut repeated = None;
                while let Some(name) = map.next_key::<String>()? {
                    let value: &'a RawValue = map.next_value()?;
                    match members.entry(name) {
                        std::collections::btree_map::Entry::Occupied(entry) => {
                            repeated.get_or_insert_with(|| entry.key().clone());
                        }
                        std::collections::btree_map::Entry::Vacant(entry) => {
                            entry.insert(value);
                        }
                    }
                }
                Ok(Members { members, repeated })
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

fn invalid_request(id: RequestId, what: &str) -> RpcError {
    RpcError::new(
        id,
        INVALID_REQUEST,
        format!("Invalid Request: {what}; expected a JSON-RPC 2.0 message"),
    )
}

/// The JSON type of a value's text (valid JSON, as [`RawValue`] guarantees), for messages.
pub(crate) fn raw_type_name(raw: &RawValue) -> &'static str {
    match raw.get().trim_ascii_start().as_bytes().first() {
        Some(b'"') => "string",
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_kept_as_sent() {
        let id = RequestId::parse("18446744073709551616").unwrap();
        assert_eq!(id.as_json(), "18446744073709551616");
        assert_eq!(RequestId::from("x").as_json(), r#""x""#);
        assert_eq!(RequestId::null().as_json(), "null");
        assert!(RequestId::parse("[1]").is_none() && RequestId::parse("null").is_none());
    }

    fn err(line: &str) -> RpcError {
        parse_line(line.as_bytes()).unwrap_err()
    }

    fn id(json: &str) -> RequestId {
        RequestId::parse(json).unwrap()
    }

    #[test]
    fn request_notification_and_response() {
        assert_eq!(
            parse_line(
                br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"a"}}"#
            ),
            Ok(Incoming::Request {
                id: RequestId::from(7),
                method: "tools/list".into(),
                params: Params::parse(r#"{"cursor":"a"}"#).unwrap(),
            })
        );
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification {
                method: "notifications/initialized".into(),
                params: Params::default(),
            })
        );
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            Ok(Incoming::Response {
                id: RequestId::from("x")
            })
        );
    }

    #[test]
    fn ids_and_params_keep_the_text_as_sent() {
        for text in [
            "18446744073709551616",
            "-9223372036854775809",
            "1e400",
            "1.50",
            "-0",
            r#""\u0078""#,
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id": {text} ,"method":"ping"}}"#);
            let Ok(Incoming::Request { id, .. }) = parse_line(line.as_bytes()) else {
                panic!("{line}")
            };
            assert_eq!(id.as_json(), text);
        }
        // A string id is one request however its text escapes it; a number is its text.
        assert_eq!(id(r#""\u0078""#).key(), id(r#""x""#).key());
        assert_ne!(id("1.0").key(), id("1").key());
        assert_ne!(
            id("18446744073709551616").key(),
            id("18446744073709551617").key()
        );

        let Ok(Incoming::Request { params, .. }) = parse_line(
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"big":1e400, "n" : 18446744073709551617,"s":"a\"b","o":{"k":[1, 2]}}}"#,
        ) else {
            panic!()
        };
        assert_eq!(params.len(), 4);
        assert_eq!(params.raw("big").map(RawValue::get), Some("1e400"));
        assert_eq!(
            params.value("big"),
            None,
            "beyond f64: no value, but its text"
        );
        assert_eq!(
            params.raw("n").map(RawValue::get),
            Some("18446744073709551617")
        );
        assert_eq!(params.str("s").as_deref(), Some("a\"b"));
        assert_eq!(params.str("o"), None);
        assert_eq!(params.raw("o").map(RawValue::get), Some(r#"{"k":[1, 2]}"#));
        assert_eq!(params.value("o"), Some(json!({"k": [1, 2]})));
        assert!(params.raw("missing").is_none());
    }

    #[test]
    fn garbage_is_a_parse_error_with_null_id() {
        let e = err("this is not json");
        assert_eq!((e.id.clone(), e.code), (RequestId::null(), PARSE_ERROR));
        assert_eq!(
            e.message,
            "Parse error: the line is not valid JSON (expected ident at line 1 column 2); send one JSON-RPC 2.0 message per line"
        );
        assert_eq!(err("{\"jsonrpc\":").code, PARSE_ERROR);
        assert_eq!(err(r#"{"jsonrpc":"2.0"} x"#).code, PARSE_ERROR);
        assert_eq!(parse_line(b"\xff\xfe").unwrap_err().code, PARSE_ERROR);
        assert_eq!(
            parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}")
                .unwrap_err()
                .code,
            PARSE_ERROR
        );
    }

    /// Found by the `jsonrpc_line` fuzz target: with a repeated "id" the server answered
    /// the last one, where another reader of the line would take the first.
    #[test]
    fn a_repeated_member_is_an_invalid_request() {
        for line in [
            r#"{"jsonrpc":"2.0","id":3,"monrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}"#,
        ] {
            let error = err(line);
            assert_eq!(
                (error.id.clone(), error.code),
                (RequestId::null(), INVALID_REQUEST),
                "{line}"
            );
            assert!(
                error.message.contains("appears more than once"),
                "{}",
                error.message
            );
        }
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":3,"id":1,"method":"ping"}"#).message,
            "Invalid Request: the member \"id\" appears more than once, so the message is ambiguous; send each member once; expected a JSON-RPC 2.0 message"
        );
    }

    #[test]
    fn invalid_requests() {
        let cases = [
            (
                r#"[1,2]"#,
                RequestId::null(),
                "a batch (array); batches are only accepted once protocol version 2025-03-26 is negotiated, send one message per line",
            ),
            (r#"42"#, RequestId::null(), "not a JSON object"),
            (r#""x""#, RequestId::null(), "not a JSON object"),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                RequestId::null(),
                "\"id\" must be a string or a number, got null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                RequestId::null(),
                "\"id\" must be a string or a number, got object",
            ),
            (
                r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
                RequestId::null(),
                "\"id\" must be a string or a number, got boolean",
            ),
            (
                r#"{"id":1,"method":"ping"}"#,
                RequestId::from(1),
                "\"jsonrpc\" must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                RequestId::from(1),
                "\"jsonrpc\" must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
                RequestId::from(1),
                "\"jsonrpc\" must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":7}"#,
                RequestId::from(7),
                "\"method\" is missing",
            ),
            (
                r#"{"jsonrpc":"2.0"}"#,
                RequestId::null(),
                "\"method\" is missing",
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
                RequestId::from("a"),
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
        // An escaped "2.0" is "2.0".
        assert!(parse_line(br#"{"jsonrpc":"2\u002e0","id":1,"method":"ping"}"#).is_ok());
    }

    #[test]
    fn params_must_be_an_object() {
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}"#),
            RpcError::new(
                RequestId::from(3),
                INVALID_PARAMS,
                "Invalid params: \"params\" of tools/call must be an object, got array"
            )
        );
        // A null params is read as none.
        assert_eq!(
            parse_line(br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":null}"#),
            Ok(Incoming::Request {
                id: RequestId::from(3),
                method: "ping".into(),
                params: Params::default()
            })
        );
    }

    #[test]
    fn batches_are_read_member_by_member() {
        assert_eq!(
            parse_batch(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            None
        );
        let members = parse_batch(
            br#" [{"jsonrpc":"2.0","id":1,"method":"ping"}, 5, {"jsonrpc":"2.0","method":"n"}, [1]]"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(members.len(), 4);
        assert!(matches!(&members[0], Ok(Incoming::Request { method, .. }) if method == "ping"));
        assert_eq!(members[1].as_ref().unwrap_err().code, INVALID_REQUEST);
        assert!(matches!(&members[2], Ok(Incoming::Notification { .. })));
        assert_eq!(members[3].as_ref().unwrap_err().code, INVALID_REQUEST);
        assert_eq!(parse_batch(b"[").unwrap().unwrap_err().code, PARSE_ERROR);
        let empty = parse_batch(b"[]").unwrap().unwrap_err();
        assert_eq!(
            (empty.code, empty.message.as_str()),
            (
                INVALID_REQUEST,
                "Invalid Request: an empty batch; expected a JSON-RPC 2.0 message"
            )
        );
        let long = format!("[{}]", vec!["1"; MAX_BATCH_LEN + 1].join(","));
        assert!(parse_batch(long.as_bytes())
            .unwrap()
            .unwrap_err()
            .message
            .contains("a batch of 65 messages"));
    }

    #[test]
    fn null_ids_are_left_out_when_asked() {
        let err = RpcError::new(RequestId::null(), PARSE_ERROR, "bad");
        assert_eq!(
            err.encode_with(false),
            r#"{"error":{"code":-32700,"message":"bad"},"jsonrpc":"2.0"}"#
        );
        assert_eq!(
            err.encode_with(true),
            r#"{"error":{"code":-32700,"message":"bad"},"id":null,"jsonrpc":"2.0"}"#
        );
        // A readable id is always given.
        let err = RpcError::new(RequestId::from(4), UNSUPPORTED_PROTOCOL_VERSION, "v")
            .with_data(json!({"supported": ["2026-07-28"], "requested": "x"}));
        assert_eq!(
            err.encode_with(false),
            r#"{"error":{"code":-32022,"data":{"requested":"x","supported":["2026-07-28"]},"message":"v"},"id":4,"jsonrpc":"2.0"}"#
        );
    }

    #[test]
    fn response_shapes() {
        assert_eq!(
            encode_response(&id("18446744073709551616"), "{}"),
            r#"{"id":18446744073709551616,"jsonrpc":"2.0","result":{}}"#
        );
        assert_eq!(
            RpcError::new(RequestId::null(), PARSE_ERROR, "bad \"x\"").encode(),
            r#"{"error":{"code":-32700,"message":"bad \"x\""},"id":null,"jsonrpc":"2.0"}"#
        );
        assert_eq!(
            RpcError::new(id(r#""\u0078""#), INVALID_PARAMS, "m").encode(),
            r#"{"error":{"code":-32602,"message":"m"},"id":"\u0078","jsonrpc":"2.0"}"#
        );
        // Each line is JSON whose id is the request's.
        let line: Value =
            serde_json::from_str(&encode_response(&RequestId::from("a"), "[1]")).unwrap();
        assert_eq!(line, json!({"jsonrpc":"2.0","id":"a","result":[1]}));
    }
}
