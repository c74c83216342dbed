//! Typed access to a call's arguments, with errors that name the tool and the field.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ToolError;

/// A call's arguments after dispatch checked them: a JSON object holding every required
/// field. The getters give errors in the form the model can act on, e.g.
/// `read_file: argument "offset" must be an integer, got string`.
///
/// ```
/// use toolhost::registry::Arguments;
///
/// let args = Arguments::parse("read_file", r#"{"path":"a.md","offset":"x"}"#)?;
/// assert_eq!(args.required_str("path")?, "a.md");
/// let err = args.optional_u64("offset").unwrap_err();
/// assert_eq!(err.to_string(), r#"read_file: argument "offset" must be an integer, got string"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Arguments {
    tool: String,
    raw: String,
    object: Map<String, Value>,
}

/// The JSON type name of a value, as error messages use it.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Arguments {
    /// Parses `raw` as dispatch does: empty or whitespace-only text is `{}`, anything else
    /// must be a JSON object.
    ///
    /// # Errors
    /// [`ToolError::InvalidArguments`] when the text is not JSON or not an object.
    pub fn parse(tool: &str, raw: &str) -> Result<Self, ToolError> {
        let invalid = |message: String| ToolError::InvalidArguments {
            tool: tool.to_owned(),
            message,
        };
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Ok(Self {
                tool: tool.to_owned(),
                raw: "{}".to_owned(),
                object: Map::new(),
            });
        }
        let value: Value = serde_json::from_str(trimmed).map_err(|err| {
            invalid(format!(
                "the arguments are not valid JSON ({err}); send a JSON object such as {{\"name\": \"value\"}}"
            ))
        })?;
        match value {
            Value::Object(object) => Ok(Self {
                tool: tool.to_owned(),
                raw: trimmed.to_owned(),
                object,
            }),
            other => Err(invalid(format!(
                "the arguments must be a JSON object, got {}; send an object such as {{\"name\": \"value\"}}",
                json_type(&other)
            ))),
        }
    }

    /// The tool these arguments are for.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The arguments as JSON text (`{}` when the call gave none).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The arguments as a JSON object.
    pub fn object(&self) -> &Map<String, Value> {
        &self.object
    }

    /// The field `name`, treating JSON `null` as absent.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.object.get(name).filter(|value| !value.is_null())
    }

    /// An [`ToolError::InvalidArguments`] for this tool with `message`.
    pub fn invalid(&self, message: impl Into<String>) -> ToolError {
        ToolError::InvalidArguments {
            tool: self.tool.clone(),
            message: message.into(),
        }
    }

    /// The error for field `name` holding a value of the wrong type.
    pub fn wrong_type(&self, name: &str, expected: &str, got: &Value) -> ToolError {
        self.invalid(format!(
            "argument \"{name}\" must be {expected}, got {}",
            json_type(got)
        ))
    }

    /// The error for a missing required field.
    pub fn missing(&self, name: &str) -> ToolError {
        self.invalid(format!("argument \"{name}\" is required"))
    }

    /// A required string field.
    ///
    /// # Errors
    /// InvalidArguments when it is missing, null or not a string.
    pub fn required_str(&self, name: &str) -> Result<&str, ToolError> {
        self.optional_str(name)?.ok_or_else(|| self.missing(name))
    }

    /// An optional string field (`null` counts as absent).
    ///
    /// # Errors
    /// InvalidArguments when it is present and not a string.
    pub fn optional_str(&self, name: &str) -> Result<Option<&str>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
        }
    }

    /// An optional non-negative integer field. `3.0` counts as `3`.
    ///
    /// # Errors
    /// InvalidArguments when it is present and not a non-negative integer.
    pub fn optional_u64(&self, name: &str) -> Result<Option<u64>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => match integer_of(value) {
                Some(n) if n >= 0 => Ok(Some(n as u64)),
                Some(n) => {
                    Err(self.invalid(format!("argument \"{name}\" must be 0 or more, got {n}")))
                }
                None => Err(self.wrong_type(name, "an integer", value)),
            },
        }
    }

    /// An optional integer field. `3.0` counts as `3`.
    ///
    /// # Errors
    /// InvalidArguments when it is present and not an integer.
    pub fn optional_i64(&self, name: &str) -> Result<Option<i64>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => integer_of(value)
                .map(Some)
                .ok_or_else(|| self.wrong_type(name, "an integer", value)),
        }
    }

    /// An optional boolean field.
    ///
    /// # Errors
    /// InvalidArguments when it is present and not a boolean.
    pub fn optional_bool(&self, name: &str) -> Result<Option<bool>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong_type(name, "a boolean", other)),
        }
    }

    /// A required array field.
    ///
    /// # Errors
    /// InvalidArguments when it is missing, null or not an array.
    pub fn required_array(&self, name: &str) -> Result<&Vec<Value>, ToolError> {
        match self.get(name) {
            None => Err(self.missing(name)),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(self.wrong_type(name, "an array", other)),
        }
    }

    /// Deserialises the whole object into `T`, with the errors plugins built with the SDK
    /// give ([`toolhost_sdk::arguments`]): the argument's path and JSON's words.
    ///
    /// # Errors
    /// InvalidArguments when the object does not fit `T`, e.g.
    /// `argument "numbers[1]" must be a number, got string "2"`.
    ///
    /// ```
    /// use toolhost::registry::Arguments;
    ///
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Sum {
    ///     numbers: Vec<f64>,
    /// }
    ///
    /// let args = Arguments::parse("sum", r#"{"numbers":[1,"2"]}"#)?;
    /// let err = args.deserialize::<Sum>().unwrap_err();
    /// assert_eq!(err.to_string(), r#"sum: argument "numbers[1]" must be a number, got string "2""#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        toolhost_sdk::arguments::from_value(&Value::Object(self.object.clone()))
            .map_err(|err| self.invalid(err.to_string()))
    }
}

/// An integer from a JSON number, accepting floats with no fraction (`3.0`).
fn integer_of(value: &Value) -> Option<i64> {
    let number = value.as_number()?;
    if let Some(n) = number.as_i64() {
        return Some(n);
    }
    let float = number.as_f64()?;
    (float.fract() == 0.0 && float.abs() < 9.0e15).then_some(float as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid_message(err: ToolError) -> String {
        match err {
            ToolError::InvalidArguments { message, .. } => message,
            other => panic!("expected InvalidArguments, got {other:?}"),
        }
    }

    #[test]
    fn empty_and_whitespace_are_an_empty_object() {
        for raw in ["", "   ", "\n\t "] {
            let args = Arguments::parse("t", raw).unwrap();
            assert!(args.object().is_empty());
            assert_eq!(args.raw(), "{}");
        }
    }

    #[test]
    fn non_objects_are_refused_with_their_type() {
        for (raw, got) in [
            ("[]", "array"),
            ("3", "integer"),
            ("null", "null"),
            ("\"s\"", "string"),
        ] {
            let message = invalid_message(Arguments::parse("t", raw).unwrap_err());
            assert!(
                message.starts_with(&format!("the arguments must be a JSON object, got {got}")),
                "{message}"
            );
        }
        let message = invalid_message(Arguments::parse("t", "not json").unwrap_err());
        assert!(
            message.starts_with("the arguments are not valid JSON"),
            "{message}"
        );
    }

    #[test]
    fn typed_getters_name_field_and_types() {
        let args = Arguments::parse(
            "read_file",
            r#"{"s":"x","n":3,"f":2.0,"neg":-1,"b":true,"a":[1],"z":null,"frac":1.5}"#,
        )
        .unwrap();
        assert_eq!(args.required_str("s").unwrap(), "x");
        assert_eq!(args.optional_u64("n").unwrap(), Some(3));
        assert_eq!(args.optional_u64("f").unwrap(), Some(2));
        assert_eq!(args.optional_u64("z").unwrap(), None);
        assert_eq!(args.optional_bool("b").unwrap(), Some(true));
        assert_eq!(args.required_array("a").unwrap().len(), 1);
        assert_eq!(
            args.optional_u64("s").unwrap_err().to_string(),
            r#"read_file: argument "s" must be an integer, got string"#
        );
        assert_eq!(
            invalid_message(args.optional_u64("frac").unwrap_err()),
            r#"argument "frac" must be an integer, got number"#
        );
        assert_eq!(
            invalid_message(args.optional_u64("neg").unwrap_err()),
            r#"argument "neg" must be 0 or more, got -1"#
        );
        assert_eq!(
            invalid_message(args.required_str("z").unwrap_err()),
            r#"argument "z" is required"#
        );
        assert_eq!(
            invalid_message(args.optional_bool("n").unwrap_err()),
            r#"argument "n" must be a boolean, got integer"#
        );
    }
}
