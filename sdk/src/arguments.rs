//! Reading a tool's arguments into a serde type, with errors written for a model.
//!
//! serde_json's own errors are written for a programmer reading a file: `invalid type:
//! string "2", expected f64 at line 1 column 17`. A model reads them in a tool result and
//! has to find the argument it got wrong, so [`parse`] names the argument by its path and
//! the types in JSON's words: `argument "numbers[1]" must be a number, got string "2"`.
//! [`Tool::new`](crate::Tool::new) uses it for every call; tools made with
//! [`Tool::raw`](crate::Tool::raw) can call it themselves.
//!
//! ```
//! use toolhost_sdk::arguments::{parse, Problem};
//!
//! #[derive(Debug, serde::Deserialize)]
//! struct Sum {
//!     numbers: Vec<f64>,
//! }
//!
//! let err = parse::<Sum>(r#"{"numbers": [1, "2"]}"#).unwrap_err();
//! assert_eq!(err.to_string(), r#"argument "numbers[1]" must be a number, got string "2""#);
//! assert_eq!(err.path(), "numbers[1]");
//! assert!(matches!(err.problem(), Problem::WrongType { .. }));
//!
//! let err = parse::<Sum>("{}").unwrap_err();
//! assert_eq!(err.to_string(), r#"argument "numbers" is required"#);
//! assert_eq!(parse::<Sum>(r#"{"numbers": [1.5, 2]}"#)?.numbers, [1.5, 2.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! How the messages read:
//!
//! | what is wrong | message |
//! |---|---|
//! | text that is not JSON | `the arguments are not valid JSON (expected value at line 1 column 2); send one JSON object` |
//! | arguments that are not an object | `the arguments must be an object, got an array` |
//! | a missing field | `argument "name" is required` |
//! | a wrong type | `argument "numbers[1]" must be a number, got string "2"` |
//! | a number out of range | `argument "count" must be an integer from 0 to 255, got number 300` |
//! | an unknown enum value | `argument "mode" must be one of "fast", "exact", got "quick"` |
//! | an unknown field (`#[serde(deny_unknown_fields)]`) | `argument "colour" is not accepted (accepted here: "color", "size")` |
//! | an array of the wrong length (tuples) | `argument "point" must be an array of 2 elements, got 3 elements` |
//! | a type's own check (`try_from`, custom `Deserialize`) | `argument "date": ` followed by its message |
//!
//! The values the model sent are quoted at most 60 characters long, so an error never
//! echoes a huge argument back. Paths use `.` between fields and `[i]` for array elements
//! (`todos[2].status`).
//!
//! Object keys are read as strings: a map keyed by numbers (`HashMap<u32, T>`) does not
//! parse here; key it by `String` and convert.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde_json::{Map, Value};

/// The longest piece of a model's own text (a string value, an object key) an error
/// quotes, in characters; longer ones are cut and end in `...`.
pub const MAX_QUOTED_CHARS: usize = 60;

/// Parses `arguments` (a JSON object as text; empty or blank text counts as `{}`) into
/// `T`.
///
/// # Errors
/// An [`ArgumentError`] naming the argument and what was wrong with it; its message is
/// written for the model, to be returned as the tool's invalid-arguments error.
pub fn parse<T: DeserializeOwned>(arguments: &str) -> Result<T, ArgumentError> {
    let arguments = arguments.trim();
    let value: Value = if arguments.is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(arguments).map_err(|err| {
            ArgumentError::new(Problem::NotJson {
                detail: err.to_string(),
            })
            .at(&Path::Root)
        })?
    };
    from_value(&value)
}

/// Reads `T` from arguments already parsed; they must be a JSON object.
///
/// # Errors
/// As [`parse`], without [`Problem::NotJson`].
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, ArgumentError> {
    if !value.is_object() {
        // Tool arguments are an object, whatever T would also accept (serde reads a
        // struct from an array too).
        return Err(ArgumentError::new(Problem::WrongType {
            expected: "an object".to_owned(),
            got: got_value(value),
        })
        .at(&Path::Root));
    }
    T::deserialize(Reader {
        value,
        path: &Path::Root,
    })
    .map_err(|err| err.at(&Path::Root))
}

/// Why arguments did not fit: where ([`ArgumentError::path`]) and what
/// ([`ArgumentError::problem`]). Its `Display` is the message for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    place: Place,
    problem: Problem,
}

/// Where an error is, as far as it is known while it rises to the reader that knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// Not known yet: the reader of the value it was raised for places it.
    Unplaced,
    /// A missing or duplicate field of an object whose path is not known yet.
    FieldOf(String),
    /// The argument's path.
    At(String),
}

/// What was wrong with an argument. The texts are in JSON's words (`a number`, `an
/// array`, `string "2"`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The text is not JSON.
    NotJson {
        /// The JSON parser's message, with line and column.
        detail: String,
    },
    /// A value of the wrong type.
    WrongType {
        /// What the argument must be (`a number`, `an object`).
        expected: String,
        /// What it was (`string "2"`).
        got: String,
    },
    /// A value of the right type that is not acceptable (a number out of range).
    WrongValue {
        /// What the argument must be (`an integer from 0 to 255`).
        expected: String,
        /// What it was (`number 300`).
        got: String,
    },
    /// An array with the wrong number of elements.
    WrongLength {
        /// What the argument must be (`an array of 2 elements`).
        expected: String,
        /// How many elements it had.
        got: usize,
    },
    /// A required field is missing (or `null` where a value is needed).
    Missing,
    /// A field given twice.
    Duplicate,
    /// A field the type does not accept.
    NotAccepted {
        /// The fields accepted at that place.
        accepted: Vec<String>,
    },
    /// A value not among the allowed ones (an enum's variants).
    NotOneOf {
        /// The allowed values.
        allowed: Vec<String>,
        /// The value given, quoted.
        got: String,
    },
    /// A type's own check failed; the message is the type's.
    Other {
        /// The type's message.
        message: String,
    },
}

impl ArgumentError {
    /// The argument's path: `numbers[1]`, `todos[0].status`; empty for the arguments as a
    /// whole.
    pub fn path(&self) -> &str {
        match &self.place {
            Place::At(path) => path,
            Place::Unplaced | Place::FieldOf(_) => "",
        }
    }

    /// What was wrong.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    fn new(problem: Problem) -> Self {
        Self {
            place: Place::Unplaced,
            problem,
        }
    }

    /// Places an error raised for the value at `path` (or, for a missing or duplicate
    /// field, in the object at `path`). An error placed deeper keeps its place.
    fn at(mut self, path: &Path<'_>) -> Self {
        self.place = match self.place {
            Place::Unplaced => Place::At(path.to_string()),
            Place::FieldOf(field) => Place::At(Path::Field(path, &field).to_string()),
            placed @ Place::At(_) => placed,
        };
        self
    }
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        let subject = if path.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("argument \"{path}\"")
        };
        match &self.problem {
            Problem::NotJson { detail } => write!(
                f,
                "the arguments are not valid JSON ({detail}); send one JSON object"
            ),
            Problem::WrongType { expected, got } | Problem::WrongValue { expected, got } => {
                write!(f, "{subject} must be {expected}, got {got}")
            }
            Problem::WrongLength { expected, got } => {
                let unit = if *got == 1 { "element" } else { "elements" };
                write!(f, "{subject} must be {expected}, got {got} {unit}")
            }
            Problem::Missing => write!(f, "{subject} is required"),
            Problem::Duplicate => write!(f, "{subject} is given twice"),
            Problem::NotAccepted { accepted } if accepted.is_empty() => {
                write!(f, "{subject} is not accepted (nothing is accepted here)")
            }
            Problem::NotAccepted { accepted } => {
                write!(
                    f,
                    "{subject} is not accepted (accepted here: {})",
                    quoted_list(accepted)
                )
            }
            Problem::NotOneOf { allowed, got } => {
                write!(
                    f,
                    "{subject} must be one of {}, got {got}",
                    quoted_list(allowed)
                )
            }
            Problem::Other { message } if path.is_empty() => f.write_str(message),
            Problem::Other { message } => write!(f, "{subject}: {message}"),
        }
    }
}

impl std::error::Error for ArgumentError {}

impl de::Error for ArgumentError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self::new(Problem::Other {
            message: message.to_string(),
        })
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::new(Problem::WrongType {
            expected: expected_type(&expected.to_string()),
            got: got(&unexpected),
        })
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::new(Problem::WrongValue {
            expected: expected_value(&expected.to_string()),
            got: got(&unexpected),
        })
    }

    fn invalid_length(len: usize, expected: &dyn Expected) -> Self {
        Self::new(Problem::WrongLength {
            expected: expected_type(&expected.to_string()),
            got: len,
        })
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Problem::NotOneOf {
            allowed: expected.iter().map(|v| (*v).to_owned()).collect(),
            got: quote(variant),
        })
    }

    fn unknown_field(_field: &str, expected: &'static [&'static str]) -> Self {
        Self::new(Problem::NotAccepted {
            accepted: expected.iter().map(|v| (*v).to_owned()).collect(),
        })
    }

    fn missing_field(field: &'static str) -> Self {
        Self {
            place: Place::FieldOf(field.to_owned()),
            problem: Problem::Missing,
        }
    }

    fn duplicate_field(field: &'static str) -> Self {
        Self {
            place: Place::FieldOf(field.to_owned()),
            problem: Problem::Duplicate,
        }
    }
}

/// Where a value sits in the arguments: a chain of field names and array indexes.
enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(Path::Root, name) => f.write_str(&cut(name)),
            Path::Field(parent, name) => write!(f, "{parent}.{}", cut(name)),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// A serde deserializer over one argument value that knows its path, so every error it
/// passes on names the argument.
struct Reader<'de, 'p> {
    value: &'de Value,
    path: &'p Path<'p>,
}

impl Reader<'_, '_> {
    fn wrong_type(&self, expected: &str) -> ArgumentError {
        ArgumentError::new(Problem::WrongType {
            expected: expected.to_owned(),
            got: got_value(self.value),
        })
    }
}

impl<'de> de::Deserializer<'de> for Reader<'de, '_> {
    type Error = ArgumentError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgumentError> {
        let path = self.path;
        let result: Result<V::Value, ArgumentError> = match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => {
                let mut seq = Elements {
                    items: items.iter(),
                    index: 0,
                    path,
                };
                let value = visitor.visit_seq(&mut seq)?;
                if seq.items.len() > 0 {
                    return Err(ArgumentError::new(Problem::WrongLength {
                        expected: format!("an array of {} elements", seq.index),
                        got: items.len(),
                    })
                    .at(path));
                }
                Ok(value)
            }
            Value::Object(fields) => {
                let mut map = Fields {
                    fields: fields.iter(),
                    pending: None,
                    path,
                };
                let value = visitor.visit_map(&mut map)?;
                if map.fields.len() > 0 {
                    return Err(ArgumentError::new(Problem::WrongLength {
                        expected: "an object with fewer fields".to_owned(),
                        got: fields.len(),
                    })
                    .at(path));
                }
                Ok(value)
            }
        };
        result.map_err(|err| err.at(path))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgumentError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        let variant = match self.value {
            Value::String(variant) => Some((variant.as_str(), None)),
            Value::Object(fields) if fields.len() == 1 => fields
                .iter()
                .next()
                .map(|(variant, value)| (variant.as_str(), Some(value))),
            _ => None,
        };
        let Some((variant, value)) = variant else {
            let expected = if variants.is_empty() {
                "a string".to_owned()
            } else {
                format!("one of {}", quoted_list(variants))
            };
            return Err(self.wrong_type(&expected).at(self.path));
        };
        visitor
            .visit_enum(Variant {
                variant,
                value,
                path: self.path,
            })
            .map_err(|err| err.at(self.path))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// The elements of an array, each read at `path[index]`.
struct Elements<'de, 'p> {
    items: std::slice::Iter<'de, Value>,
    index: usize,
    path: &'p Path<'p>,
}

impl<'de> SeqAccess<'de> for Elements<'de, '_> {
    type Error = ArgumentError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ArgumentError> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        let path = Path::Index(self.path, self.index);
        self.index += 1;
        seed.deserialize(Reader { value, path: &path })
            .map(Some)
            .map_err(|err| err.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// The fields of an object, each value read at `path.key`.
struct Fields<'de, 'p> {
    fields: serde_json::map::Iter<'de>,
    pending: Option<(&'de str, &'de Value)>,
    path: &'p Path<'p>,
}

impl<'de> MapAccess<'de> for Fields<'de, '_> {
    type Error = ArgumentError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ArgumentError> {
        let Some((key, value)) = self.fields.next() else {
            return Ok(None);
        };
        self.pending = Some((key, value));
        let path = Path::Field(self.path, key);
        seed.deserialize(BorrowedStrDeserializer::<ArgumentError>::new(key))
            .map(Some)
            .map_err(|err| err.at(&path))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ArgumentError> {
        let Some((key, value)) = self.pending.take() else {
            return Err(ArgumentError::new(Problem::Other {
                message: "a value was asked for before its key (a bug in the type's Deserialize)"
                    .to_owned(),
            })
            .at(self.path));
        };
        let path = Path::Field(self.path, key);
        seed.deserialize(Reader { value, path: &path })
            .map_err(|err| err.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.fields.len())
    }
}

/// An enum value: a variant name, with its content for a variant that has one
/// (`{"circle": {"r": 1}}`).
struct Variant<'de, 'p> {
    variant: &'de str,
    value: Option<&'de Value>,
    path: &'p Path<'p>,
}

impl<'de, 'p> EnumAccess<'de> for Variant<'de, 'p> {
    type Error = ArgumentError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), ArgumentError> {
        let name = seed
            .deserialize(self.variant.into_deserializer())
            .map_err(|err: ArgumentError| err.at(self.path))?;
        Ok((name, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de, '_> {
    type Error = ArgumentError;

    fn unit_variant(self) -> Result<(), ArgumentError> {
        match self.value {
            None | Some(Value::Null) => Ok(()),
            Some(value) => Err(ArgumentError::new(Problem::WrongType {
                expected: format!("the string \"{}\" alone", cut(self.variant)),
                got: format!("an object with content {}", got_value(value)),
            })
            .at(self.path)),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, ArgumentError> {
        let path = Path::Field(self.path, self.variant);
        match self.value {
            Some(value) => seed
                .deserialize(Reader { value, path: &path })
                .map_err(|err| err.at(&path)),
            None => Err(missing_content(self.variant).at(self.path)),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        let path = Path::Field(self.path, self.variant);
        match self.value {
            Some(value) => {
                de::Deserializer::deserialize_seq(Reader { value, path: &path }, visitor)
                    .map_err(|err| err.at(&path))
            }
            None => Err(missing_content(self.variant).at(self.path)),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        let path = Path::Field(self.path, self.variant);
        match self.value {
            Some(value) => {
                de::Deserializer::deserialize_map(Reader { value, path: &path }, visitor)
                    .map_err(|err| err.at(&path))
            }
            None => Err(missing_content(self.variant).at(self.path)),
        }
    }
}

/// A variant that needs content was given as a bare string.
fn missing_content(variant: &str) -> ArgumentError {
    let variant = cut(variant);
    ArgumentError::new(Problem::WrongType {
        expected: format!("an object {{\"{variant}\": ...}} with the variant's content"),
        got: format!("string \"{variant}\""),
    })
}

/// What serde's `Expected` text (a visitor's `expecting`) means in JSON's words, for a
/// wrong type.
fn expected_type(expected: &str) -> String {
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
fn expected_value(expected: &str) -> String {
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
fn got(unexpected: &Unexpected<'_>) -> String {
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
fn got_value(value: &Value) -> String {
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
fn quote(text: &str) -> String {
    Value::String(cut(text)).to_string()
}

/// `text` cut to [`MAX_QUOTED_CHARS`] characters, ending in `...` when cut.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

/// `"a", "b", "c"`.
fn quoted_list(items: &[impl AsRef<str>]) -> String {
    items
        .iter()
        .map(|item| quote(item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde::Deserialize;

    use super::*;

    fn message<T: DeserializeOwned + fmt::Debug>(arguments: &str) -> String {
        parse::<T>(arguments).unwrap_err().to_string()
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Sum {
        numbers: Vec<f64>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
        Exact,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Todo {
        content: String,
        status: Mode,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Plan {
        todos: Vec<Todo>,
        count: Option<u8>,
        offset: Option<i64>,
        point: Option<(i32, i32)>,
        letter: Option<char>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    #[serde(deny_unknown_fields)]
    struct Strict {
        color: Option<String>,
        size: Option<u32>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Circle { r: f64 },
        Square(f64),
        Dot,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Draw {
        shape: Shape,
    }

    #[test]
    fn the_issue_example() {
        assert_eq!(
            message::<Sum>(r#"{"numbers": [1, "2"]}"#),
            r#"argument "numbers[1]" must be a number, got string "2""#
        );
    }

    #[test]
    fn types_are_named_in_json_words_with_the_path() {
        let cases = [
            (
                r#"{"todos": 3}"#,
                r#"argument "todos" must be an array, got number 3"#,
            ),
            (
                r#"{"todos": [7]}"#,
                r#"argument "todos[0]" must be an object, got number 7"#,
            ),
            (
                r#"{"todos": [{"content": 5, "status": "fast"}]}"#,
                r#"argument "todos[0].content" must be a string, got number 5"#,
            ),
            (
                r#"{"todos": [{"content": "a", "status": "fast", "tags": [true]}]}"#,
                r#"argument "todos[0].tags[0]" must be a string, got boolean true"#,
            ),
            (
                r#"{"todos": [], "offset": 1.5}"#,
                r#"argument "offset" must be an integer, got number 1.5"#,
            ),
            (
                r#"{"todos": [], "offset": "1"}"#,
                r#"argument "offset" must be an integer, got string "1""#,
            ),
            (
                r#"{"todos": null}"#,
                r#"argument "todos" must be an array, got null"#,
            ),
            (
                r#"{"todos": {}}"#,
                r#"argument "todos" must be an array, got an object"#,
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(message::<Plan>(arguments), expected, "{arguments}");
        }
    }

    #[test]
    fn ranges_lengths_and_characters() {
        let cases = [
            (
                r#"{"todos": [], "count": 300}"#,
                r#"argument "count" must be an integer from 0 to 255, got number 300"#,
            ),
            (
                r#"{"todos": [], "count": -1}"#,
                r#"argument "count" must be an integer from 0 to 255, got number -1"#,
            ),
            (
                r#"{"todos": [], "point": [1, 2, 3]}"#,
                r#"argument "point" must be an array of 2 elements, got 3 elements"#,
            ),
            (
                r#"{"todos": [], "point": [1]}"#,
                r#"argument "point" must be an array of 2 elements, got 1 element"#,
            ),
            (
                r#"{"todos": [], "letter": "ab"}"#,
                r#"argument "letter" must be a single character, got string "ab""#,
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(message::<Plan>(arguments), expected, "{arguments}");
        }
    }

    #[test]
    fn missing_unknown_and_enum_values() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
        struct Aliased {
            #[serde(alias = "colour")]
            color: String,
        }
        assert_eq!(message::<Plan>("{}"), r#"argument "todos" is required"#);
        assert_eq!(message::<Plan>(""), r#"argument "todos" is required"#);
        assert_eq!(
            message::<Plan>(r#"{"todos": [{"content": "a"}]}"#),
            r#"argument "todos[0].status" is required"#
        );
        assert_eq!(
            message::<Plan>(r#"{"todos": [{"content": "a", "status": "quick"}]}"#),
            r#"argument "todos[0].status" must be one of "fast", "exact", got "quick""#
        );
        assert_eq!(
            message::<Plan>(r#"{"todos": [{"content": "a", "status": 1}]}"#),
            r#"argument "todos[0].status" must be one of "fast", "exact", got number 1"#
        );
        assert_eq!(
            message::<Strict>(r#"{"colour": "red"}"#),
            r#"argument "colour" is not accepted (accepted here: "color", "size")"#
        );
        assert_eq!(
            message::<Aliased>(r#"{"color": "red", "colour": "blue"}"#),
            r#"argument "color" is given twice"#
        );
    }

    #[test]
    fn enums_with_content() {
        let draw = |text: &str| parse::<Draw>(text).map(|draw| draw.shape);
        assert_eq!(draw(r#"{"shape": "dot"}"#), Ok(Shape::Dot));
        assert_eq!(draw(r#"{"shape": {"square": 2}}"#), Ok(Shape::Square(2.0)));
        assert_eq!(
            draw(r#"{"shape": {"circle": {"r": 1}}}"#),
            Ok(Shape::Circle { r: 1.0 })
        );
        assert_eq!(
            message::<Draw>(r#"{"shape": {"circle": {"r": "big"}}}"#),
            r#"argument "shape.circle.r" must be a number, got string "big""#
        );
        assert_eq!(
            message::<Draw>(r#"{"shape": {"circle": {}}}"#),
            r#"argument "shape.circle.r" is required"#
        );
        assert_eq!(
            message::<Draw>(r#"{"shape": "circle"}"#),
            r#"argument "shape" must be an object {"circle": ...} with the variant's content, got string "circle""#
        );
        assert_eq!(
            message::<Draw>(r#"{"shape": {"hexagon": 1}}"#),
            r#"argument "shape" must be one of "circle", "square", "dot", got "hexagon""#
        );
    }

    #[test]
    fn the_whole_arguments() {
        assert_eq!(
            message::<Sum>("[1, 2]"),
            "the arguments must be an object, got an array"
        );
        assert_eq!(
            message::<Sum>("{\"numbers\": "),
            "the arguments are not valid JSON (EOF while parsing a value at line 1 column 11); \
             send one JSON object"
        );
        assert_eq!(parse::<HashMap<String, u8>>("  ").unwrap(), HashMap::new());
        assert_eq!(
            parse::<Value>(r#"{"a":[1,{"b":null}]}"#).unwrap()["a"][1]["b"],
            Value::Null
        );
    }

    #[test]
    fn custom_messages_keep_their_text_at_the_path() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
        struct Even(#[serde(deserialize_with = "even")] u32);

        fn even<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
            let n = u32::deserialize(deserializer)?;
            if n % 2 == 1 {
                return Err(de::Error::custom(format!(
                    "{n} is odd; pass an even number"
                )));
            }
            Ok(n)
        }

        #[derive(Debug, Deserialize)]
        #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
        struct Args {
            pairs: Vec<Even>,
        }

        assert_eq!(
            message::<Args>(r#"{"pairs": [2, 3]}"#),
            r#"argument "pairs[1]": 3 is odd; pass an even number"#
        );
    }

    #[test]
    fn echoed_text_is_cut() {
        let long = "x".repeat(10_000);
        let text = message::<Sum>(&format!(r#"{{"numbers": ["{long}"]}}"#));
        assert_eq!(
            text,
            format!(
                r#"argument "numbers[0]" must be a number, got string "{}...""#,
                "x".repeat(MAX_QUOTED_CHARS)
            )
        );
        let text = message::<Strict>(&format!(r#"{{"{long}": 1}}"#));
        assert!(text.len() < 200, "{text}");
        assert!(text.starts_with(&format!(
            "argument \"{}...\" is not accepted",
            "x".repeat(60)
        )));
        // Quotes and control characters in a model's text stay inside the quotes.
        assert_eq!(
            message::<Sum>(r#"{"numbers": ["a\"\n"]}"#),
            r#"argument "numbers[0]" must be a number, got string "a\"\n""#
        );
    }

    #[test]
    fn flatten_untagged_and_tagged_types_work() {
        #[derive(Debug, Deserialize, PartialEq)]
        #[serde(untagged)]
        enum NumberOrText {
            Number(f64),
            Text(String),
        }

        #[derive(Debug, Deserialize, PartialEq)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        enum Query {
            ByName { name: String },
            ById { id: u64 },
        }

        #[derive(Debug, Deserialize, PartialEq)]
        struct Args {
            value: NumberOrText,
            query: Query,
            #[serde(flatten)]
            rest: HashMap<String, Value>,
        }

        let args: Args =
            parse(r#"{"value": "x", "query": {"kind": "by_id", "id": 4}, "extra": 1}"#).unwrap();
        assert_eq!(args.value, NumberOrText::Text("x".into()));
        assert_eq!(args.query, Query::ById { id: 4 });
        assert_eq!(args.rest.get("extra"), Some(&Value::from(1)));
        assert_eq!(
            message::<Args>(r#"{"value": 1, "query": {"id": 4}}"#),
            r#"argument "query.kind" is required"#
        );
        assert_eq!(
            message::<Args>(r#"{"value": [], "query": {"kind": "by_id", "id": 4}}"#),
            r#"argument "value": data did not match any variant of untagged enum NumberOrText"#
        );
    }
}
