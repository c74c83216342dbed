//! [`RequestId`]: a request id kept as the JSON text the client sent.

use serde_json::value::RawValue;
use serde_json::Value;

use super::raw::raw_type_name;

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
