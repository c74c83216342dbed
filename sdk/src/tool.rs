//! Tools: a name, a description, a parameter schema and a typed handler.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// What changes per call: the agent session and the model reply the call belongs to.
///
/// Everything else a tool needs (files, logging) comes through this crate's imports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Env {
    /// The agent session (a UUID string).
    pub session_id: String,
    /// The model reply this call belongs to (a UUID string; one per reply).
    pub turn_id: String,
}

impl Env {
    /// An environment with the given session and turn ids (for calling a [`Tool`] in a
    /// unit test; the host builds the real one).
    pub fn new(session_id: impl Into<String>, turn_id: impl Into<String>) -> Self {
        Env {
            session_id: session_id.into(),
            turn_id: turn_id.into(),
        }
    }
}

/// Why a call failed. The message is shown to the model: say what was wrong and what to
/// do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments were not acceptable (missing field, wrong type, bad value).
    #[error("{0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// The arguments were not acceptable; `message` says which and how to fix them.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        ToolError::InvalidArguments(message.into())
    }

    /// The tool ran and failed; `message` says why and what to try instead.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }
}

/// Runs a tool on raw JSON argument text and returns raw JSON result text.
type Handler = Box<dyn Fn(&str, Env) -> Result<String, ToolError>>;

/// One tool a plugin offers: what the model sees (name, description, parameters) and the
/// handler that runs it.
///
/// ```
/// use toolhost_sdk::{schema, Env, Tool, ToolError};
///
/// #[derive(serde::Deserialize)]
/// struct Args {
///     name: String,
/// }
///
/// fn greet(args: Args, _env: Env) -> Result<String, ToolError> {
///     Ok(format!("Hello, {}!", args.name))
/// }
///
/// let tool = Tool::new(
///     "greet",
///     "Greet a person by name.",
///     schema::object([("name", schema::string("Who to greet."))], ["name"]),
///     greet,
/// );
/// assert_eq!(tool.call(r#"{"name":"Ada"}"#, Env::default())?, r#""Hello, Ada!""#);
/// assert_eq!(
///     tool.call(r#"{"name":5}"#, Env::default()),
///     Err(ToolError::invalid_arguments(
///         "greet arguments: invalid type: integer `5`, expected a string at line 1 column 9 \
///          (send arguments that match the tool's parameter schema)"
///     ))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Tool {
    name: String,
    description: String,
    parameters: Value,
    handler: Handler,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool whose handler takes serde-typed arguments and returns any serialisable value.
    ///
    /// `name` must be 1 to 128 characters of `a-z A-Z 0-9 _ -` and not taken by another
    /// tool on the host (the host refuses to load the plugin otherwise). `parameters` is an
    /// object schema, best built with [`crate::schema`]; the host checks the required
    /// fields before calling, the handler's type `T` checks the rest.
    ///
    /// # Errors
    ///
    /// The call fails with [`ToolError::InvalidArguments`] naming the tool and serde's
    /// message when the arguments do not parse as `T`, with whatever the handler returns,
    /// and with [`ToolError::Failed`] when the result does not serialise to JSON.
    pub fn new<T, R, F>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        T: DeserializeOwned,
        R: Serialize,
        F: Fn(T, Env) -> Result<R, ToolError> + 'static,
    {
        let name = name.into();
        let tool_name = name.clone();
        let typed = move |arguments: &str, env: Env| {
            let arguments = if arguments.trim().is_empty() {
                "{}"
            } else {
                arguments
            };
            let parsed: T = serde_json::from_str(arguments).map_err(|err| {
                ToolError::InvalidArguments(format!(
                    "{tool_name} arguments: {err} (send arguments that match the tool's \
                     parameter schema)"
                ))
            })?;
            let result = handler(parsed, env)?;
            serde_json::to_string(&result).map_err(|err| {
                ToolError::Failed(format!(
                    "{tool_name} could not encode its result as JSON: {err} (a bug in the \
                     plugin; do not retry with the same arguments)"
                ))
            })
        };
        Tool::raw(name, description, parameters, typed)
    }

    /// A tool whose handler sees the raw JSON argument text and returns the raw JSON result
    /// text, unparsed and unchecked (the host parses it; text that is not JSON makes the
    /// call fail). For tools that want to do their own parsing.
    pub fn raw<F>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(&str, Env) -> Result<String, ToolError> + 'static,
    {
        Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            handler: Box::new(handler),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does, for the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the arguments.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Runs the tool on `arguments` (a JSON object as text; empty text counts as `{}`)
    /// and returns the result as JSON text. This is what the host's call ends up in; call
    /// it directly to unit-test a tool natively.
    ///
    /// # Errors
    ///
    /// See [`Tool::new`] and [`Tool::raw`].
    pub fn call(&self, arguments: &str, env: Env) -> Result<String, ToolError> {
        (self.handler)(arguments, env)
    }
}

/// Finds the tool called `name` in `tools`.
///
/// # Errors
///
/// [`ToolError::Failed`] listing the tools there are, when none has that name.
pub(crate) fn find<'a>(tools: &'a [Tool], name: &str) -> Result<&'a Tool, ToolError> {
    tools.iter().find(|tool| tool.name == name).ok_or_else(|| {
        let offered: Vec<&str> = tools.iter().map(Tool::name).collect();
        ToolError::Failed(format!(
            "this plugin has no tool named `{name}`; it offers: {}",
            offered.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    #[derive(serde::Deserialize)]
    struct Division {
        by: f64,
        #[serde(default = "one")]
        value: f64,
    }

    fn one() -> f64 {
        1.0
    }

    fn divide(args: Division, _env: Env) -> Result<f64, ToolError> {
        if args.by == 0.0 {
            return Err(ToolError::invalid_arguments("by must not be 0"));
        }
        Ok(args.value / args.by)
    }

    fn divide_tool() -> Tool {
        Tool::new(
            "divide",
            "Divide.",
            schema::object([("by", schema::number("Divisor."))], ["by"]),
            divide,
        )
    }

    #[test]
    fn typed_handler_parses_arguments_and_encodes_the_result() {
        let tool = divide_tool();
        assert_eq!(
            tool.call(r#"{"by":4,"value":2}"#, Env::default()),
            Ok("0.5".into())
        );
        assert_eq!(tool.call(r#"{"by":2}"#, Env::default()), Ok("0.5".into()));
        assert_eq!(
            tool.call(r#"{"by":0}"#, Env::default()),
            Err(ToolError::InvalidArguments("by must not be 0".into()))
        );
    }

    #[test]
    fn parse_errors_name_the_tool_and_the_field() {
        let tool = divide_tool();
        assert_eq!(
            tool.call("", Env::default()),
            Err(ToolError::InvalidArguments(
                "divide arguments: missing field `by` at line 1 column 2 (send arguments that \
                 match the tool's parameter schema)"
                    .into()
            ))
        );
        assert_eq!(
            tool.call(r#"{"by":"x"}"#, Env::default()),
            Err(ToolError::InvalidArguments(
                "divide arguments: invalid type: string \"x\", expected f64 at line 1 column 9 \
                 (send arguments that match the tool's parameter schema)"
                    .into()
            ))
        );
    }

    #[test]
    fn results_that_do_not_encode_are_failures() {
        let tool = Tool::new(
            "bad",
            "Returns a map with non-string keys.",
            schema::object(Vec::<(String, Value)>::new(), Vec::<String>::new()),
            |_: Value, _env| {
                let mut map = std::collections::BTreeMap::new();
                map.insert(vec![1u8], 1u8);
                Ok(map)
            },
        );
        assert_eq!(
            tool.call("{}", Env::default()),
            Err(ToolError::Failed(
                "bad could not encode its result as JSON: key must be a string (a bug in the \
                 plugin; do not retry with the same arguments)"
                    .into()
            ))
        );
    }

    #[test]
    fn raw_handlers_see_the_text_and_env() {
        let tool = Tool::raw("echo", "Echo.", Value::Null, |arguments, env| {
            Ok(format!("[{arguments},\"{}\"]", env.turn_id))
        });
        assert_eq!(
            tool.call(r#"{"a":1}"#, Env::new("s", "t")),
            Ok(r#"[{"a":1},"t"]"#.into())
        );
    }

    #[test]
    fn find_lists_the_offered_tools_on_a_miss() {
        let tools = vec![
            divide_tool(),
            Tool::raw("b", "", Value::Null, |_, _| Ok("1".into())),
        ];
        assert_eq!(find(&tools, "b").map(Tool::name), Ok("b"));
        assert_eq!(
            find(&tools, "c").map(Tool::name),
            Err(ToolError::Failed(
                "this plugin has no tool named `c`; it offers: divide, b".into()
            ))
        );
    }
}
