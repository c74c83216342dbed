//! Error text in JSON's words for a model: serde's expected types and values and what was
//! got, translated, and the model's own text quoted and cut to [`MAX_QUOTED_CHARS`].

use super::MAX_QUOTED_CHARS;
use serde::de::Unexpected;
use serde_json::Value;

/// What serde's `Expected` text (a visitor's `expecting`) means in JSON's words, for a
/// wrong type.
pub(super) fn expected_type(expected: &str) -> String {
    let words = match expected {
        "f32" | "f64" => "a number",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64" | "u128"
        | "usize" => "an integer",
        "a boolean" => "a boolean",
        "a string" | "a borrowed string" | "a character" | "a char" | "path string"
        | "a string or bytes" => "a string",
        "a sequence" | "a tuple" => "an array",
        "a map" => "an object",
        "unit" => "null",
        other => {
            if other.starts_with("struct ") {
                "an object"
            } else if other.starts_with("tuple struct ") {
                "an array"
            } else if let Some(size) = other
                .strip_prefix("a tuple of size ")
                .or_else(|| other.strip_prefix("an array of length "))
            {
                return format!("an array of {size} elements");
            } else {
                return other.to_owned();
            }
        }
    };
    words.to_owned()
}

/// What serde's `Expected` text means in JSON's words, for a value of the right type
/// that is not acceptable: integer types give their range.
pub(super) fn expected_value(expected: &str) -> String {
    let range = |min: i128, max: i128| format!("an integer from {min} to {max}");
    match expected {
        "u8" => range(0, u8::MAX.into()),
        "u16" => range(0, u16::MAX.into()),
        "u32" => range(0, u32::MAX.into()),
        "u64" | "u128" | "usize" => "an integer of 0 or more".to_owned(),
        "i8" => range(i8::MIN.into(), i8::MAX.into()),
        "i16" => range(i16::MIN.into(), i16::MAX.into()),
        "i32" => range(i32::MIN.into(), i32::MAX.into()),
        "i64" | "i128" | "isize" => "an integer".to_owned(),
        "a character" => "a single character".to_owned(),
        other => expected_type(other),
    }
}

/// What the model sent, from serde's `Unexpected`: `string "2"`, `number 1.5`, `null`.
pub(super) fn got(unexpected: &Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Bool(b) => format!("boolean {b}"),
        Unexpected::Unsigned(n) => format!("number {n}"),
        Unexpected::Signed(n) => format!("number {n}"),
        Unexpected::Float(n) => format!("number {n}"),
        Unexpected::Char(c) => format!("string {}", quote(&c.to_string())),
        Unexpected::Str(s) => format!("string {}", quote(s)),
        Unexpected::Bytes(_) => "bytes".to_owned(),
        Unexpected::Unit | Unexpected::Option => "null".to_owned(),
        Unexpected::Seq => "an array".to_owned(),
        Unexpected::Map => "an object".to_owned(),
        Unexpected::Other(other) => (*other).to_owned(),
        _ => "a value of another kind".to_owned(),
    }
}

/// What a JSON value is, as [`got`] says it.
pub(super) fn got_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", quote(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// `text` as a JSON string, cut to [`MAX_QUOTED_CHARS`].
pub(super) fn quote(text: &str) -> String {
    Value::String(cut(text)).to_string()
}

/// `text` cut to [`MAX_QUOTED_CHARS`] characters, ending in `...` when cut.
pub(super) fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

/// `"a", "b", "c"`.
pub(super) fn quoted_list(items: &[impl AsRef<str>]) -> String {
    items
        .iter()
        .map(|item| quote(item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}
