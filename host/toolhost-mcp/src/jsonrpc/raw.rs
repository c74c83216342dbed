//! [`raw_type_name`]: the JSON type of an unparsed value, for error messages. Below
//! every other module of `jsonrpc`, which all name types in their messages.

use serde_json::value::RawValue;

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
