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
//!
//! This file holds the entry points; the error type is in `error.rs`, the deserializer
//! that tracks paths in `reader.rs`, the wording of messages in `words.rs`.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

mod error;
mod reader;
#[cfg(test)]
mod tests;
mod words;

use error::Path;
pub use error::{ArgumentError, Problem};
use reader::Reader;
use words::got_value;

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
