//! Reading what comes in: one line as a message ([`parse_line`]) or a batch
//! ([`parse_batch`]), each classified as an [`Incoming`] request, notification or
//! response, or the [`RpcError`] to answer.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::raw::raw_type_name;
use super::{Params, RequestId, RpcError, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR};

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
    /// A response to a request of ours (an `elicitation/create`): handed to the
    /// question waiting for it, if any.
    Response {
        /// Its id.
        id: RequestId,
        /// Its `result`, or its `error`, as JSON text.
        body: ResponseBody,
    },
}

/// What a response carries: its `result` or its `error` member, as the client's JSON text
/// (read only by the question that waits for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResponseBody {
    /// The `result` member.
    Result(String),
    /// The `error` member.
    Error(String),
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
    // "2.0" as sent by every client; an escaped spelling is decoded first.
    let version_ok = message.get("jsonrpc").is_some_and(|raw| {
        raw.get() == "\"2.0\""
            || serde_json::from_str::<String>(raw.get()).is_ok_and(|version| version == "2.0")
    });
    if !version_ok {
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
                Some(id) => match (message.get("result"), message.get("error")) {
                    (Some(result), None) => Ok(Incoming::Response {
                        id,
                        body: ResponseBody::Result(result.get().to_owned()),
                    }),
                    // Both is no answer a question can take: read as an error.
                    (_, Some(error)) => Ok(Incoming::Response {
                        id,
                        body: ResponseBody::Error(error.get().to_owned()),
                    }),
                    (None, None) => Err(invalid_request(id, "\"method\" is missing")),
                },
                _ => Err(invalid_request(reply_id, "\"method\" is missing")),
            };
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
///
/// Names are borrowed from the line (owned only when they hold an escape): four member
/// names a message, none of them worth an allocation.
struct Members<'a> {
    members: BTreeMap<Cow<'a, str>, &'a RawValue>,
    repeated: Option<String>,
}

/// A member's name, borrowed from the line unless it holds an escape.
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Name<'a>(#[serde(borrow)] Cow<'a, str>);

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
                while let Some(Name(name)) = map.next_key::<Name<'a>>()? {
                    let value: &'a RawValue = map.next_value()?;
                    match members.entry(name) {
                        std::collections::btree_map::Entry::Occupied(entry) => {
                            repeated.get_or_insert_with(|| entry.key().to_string());
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

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::Name;

    #[test]
    fn names_are_borrowed_unless_escaped() {
        let Name(plain) = serde_json::from_str::<Name<'_>>(r#""method""#).unwrap();
        assert!(matches!(plain, Cow::Borrowed("method")), "{plain:?}");
        let Name(escaped) = serde_json::from_str::<Name<'_>>(r#""m\u0065thod""#).unwrap();
        assert!(
            matches!(&escaped, Cow::Owned(name) if name == "method"),
            "{escaped:?}"
        );
    }
}
