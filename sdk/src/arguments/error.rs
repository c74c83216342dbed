//! [`ArgumentError`]: where arguments did not fit (the argument's path) and what was
//! wrong ([`Problem`]), its message for the model, and the serde error hooks that build it.

use std::fmt;

use super::words::{cut, expected_type, expected_value, got, quote, quoted_list};
use serde::de::{self, Expected, Unexpected};

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

    pub(super) fn new(problem: Problem) -> Self {
        Self {
            place: Place::Unplaced,
            problem,
        }
    }

    /// Places an error raised for the value at `path` (or, for a missing or duplicate
    /// field, in the object at `path`). An error placed deeper keeps its place.
    pub(super) fn at(mut self, path: &Path<'_>) -> Self {
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
pub(super) enum Path<'a> {
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
