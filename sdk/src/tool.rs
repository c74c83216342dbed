//! Tools: a name, a description, a parameter schema and a typed handler.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::arguments::{self, ArgumentError};
use crate::content::Content;

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

impl From<ArgumentError> for ToolError {
    /// An argument error's message, as [`ToolError::InvalidArguments`]: what
    /// `let args: Args = toolhost_sdk::arguments::parse(text)?;` gives in a raw tool.
    fn from(error: ArgumentError) -> Self {
        ToolError::InvalidArguments(error.to_string())
    }
}

/// Hints about what a tool does, for clients (MCP's tool annotations): a client may ask
/// before running a destructive tool and not before a read-only one. `None` is "not
/// said"; clients then assume the MCP defaults (not read-only, destructive, not
/// idempotent, open world). Hints, not guarantees: the host does not enforce them (the
/// manifest's grants do that), and clients treat them as untrusted.
///
/// Set them with [`Tool::read_only`], [`Tool::destructive`], [`Tool::idempotent`] and
/// [`Tool::open_world`], or all at once with [`Tool::with_annotations`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Annotations {
    /// The tool changes nothing (MCP `readOnlyHint`).
    pub read_only: Option<bool>,
    /// When it changes things, it may overwrite or delete (MCP `destructiveHint`).
    pub destructive: Option<bool>,
    /// A second call with the same arguments has no further effect (MCP `idempotentHint`).
    pub idempotent: Option<bool>,
    /// It reaches outside the host: the network, other systems (MCP `openWorldHint`).
    pub open_world: Option<bool>,
}

impl Annotations {
    /// Whether no hint is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Runs a tool on raw JSON argument text.
type Handler = Box<dyn Fn(&str, Env) -> Result<Output, ToolError>>;

/// What a tool returned: one JSON value (a [`Tool::new`] or [`Tool::raw`] tool), or
/// rich content (a [`Tool::rich`] tool).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Output {
    /// The result as JSON text; the client gets it as one text block (a JSON string as
    /// its text), and as structured content when the tool declares an output schema.
    Json(String),
    /// Content blocks and optional structured JSON.
    Content(Content),
}

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
///     Err(ToolError::invalid_arguments(r#"argument "name" must be a string, got number 5"#))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// With metadata for clients: a display title, behaviour hints and an output schema.
///
/// ```
/// use toolhost_sdk::{schema, Env, Tool, ToolError};
///
/// #[derive(serde::Deserialize)]
/// struct Args {
///     text: String,
/// }
///
/// #[derive(serde::Serialize)]
/// struct Counts {
///     words: usize,
/// }
///
/// fn count(args: Args, _env: Env) -> Result<Counts, ToolError> {
///     Ok(Counts { words: args.text.split_whitespace().count() })
/// }
///
/// let tool = Tool::new(
///     "count_words",
///     "Count the words of a text.",
///     schema::object([("text", schema::string("The text."))], ["text"]),
///     count,
/// )
/// .with_title("Count words")
/// .read_only()
/// .idempotent()
/// .open_world(false)
/// .with_output_schema(schema::object([("words", schema::integer("How many words."))], ["words"]));
/// assert_eq!(tool.title(), Some("Count words"));
/// assert_eq!(tool.annotations().read_only, Some(true));
/// assert_eq!(tool.call(r#"{"text":"a b c"}"#, Env::default())?, r#"{"words":3}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Tool {
    name: String,
    description: String,
    parameters: Value,
    title: Option<String>,
    annotations: Annotations,
    output_schema: Option<Value>,
    handler: Handler,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("title", &self.title)
            .field("annotations", &self.annotations)
            .field("output_schema", &self.output_schema)
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
    /// The call fails with [`ToolError::InvalidArguments`] when the arguments do not parse
    /// as `T`, with a message for the model naming the argument
    /// (`argument "numbers[1]" must be a number, got string "2"`; see [`arguments`]; the
    /// host adds the tool's name), with whatever the handler returns, and with
    /// [`ToolError::Failed`] when the result does not serialise to JSON.
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
        let typed = move |arguments: &str, env: Env| {
            let parsed: T = arguments::parse(arguments)?;
            let result = handler(parsed, env)?;
            serde_json::to_string(&result).map_err(|err| {
                ToolError::Failed(format!(
                    "the result could not be encoded as JSON: {err} (a bug in the \
                     plugin; do not retry with the same arguments)"
                ))
            })
        };
        Tool::raw(name, description, parameters, typed)
    }

    /// A tool whose handler takes serde-typed arguments, as [`Tool::new`], and returns
    /// rich [`Content`]: text, images, audio, resource links and whole resources, plus
    /// optional structured JSON.
    ///
    /// ```
    /// use toolhost_sdk::{schema, Content, Env, Output, Tool, ToolError};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Args {
    ///     size: u32,
    /// }
    ///
    /// fn draw(args: Args, _env: Env) -> Result<Content, ToolError> {
    ///     let png = vec![0u8; args.size as usize]; // a real tool encodes an image here
    ///     Ok(Content::new().text("Your picture:").image(png, "image/png"))
    /// }
    ///
    /// let tool = Tool::rich(
    ///     "draw",
    ///     "Draws a picture.",
    ///     schema::object([("size", schema::integer("Bytes."))], ["size"]),
    ///     draw,
    /// );
    /// let Output::Content(content) = tool.call_output(r#"{"size":4}"#, Env::default())? else {
    ///     panic!("a rich tool returns content");
    /// };
    /// assert_eq!(content.blocks().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Tool::new`]: arguments that do not parse as `T`, and whatever the handler
    /// returns. The host fails the call when a media type is not on its allow-list.
    pub fn rich<T, F>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Self
    where
        T: DeserializeOwned,
        F: Fn(T, Env) -> Result<Content, ToolError> + 'static,
    {
        let typed = move |arguments: &str, env: Env| {
            let parsed: T = arguments::parse(arguments)?;
            handler(parsed, env).map(Output::Content)
        };
        Tool::with_handler(name.into(), description.into(), parameters, Box::new(typed))
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
        let handler = move |arguments: &str, env: Env| handler(arguments, env).map(Output::Json);
        Tool::with_handler(
            name.into(),
            description.into(),
            parameters,
            Box::new(handler),
        )
    }

    fn with_handler(
        name: String,
        description: String,
        parameters: Value,
        handler: Handler,
    ) -> Self {
        Tool {
            name,
            description,
            parameters,
            title: None,
            annotations: Annotations::default(),
            output_schema: None,
            handler,
        }
    }

    /// This tool with a short title for people (MCP `title`), shown by clients in place
    /// of the name. 1 to 100 characters on one line; the host refuses a plugin whose title
    /// reads like a built-in tool's name or title, or another tool's.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// This tool with all its hints at once.
    pub fn with_annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Hints that the tool changes nothing (a lookup, a computation).
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = Some(true);
        self
    }

    /// Hints that the tool changes things, and whether it may overwrite or delete
    /// (`true`) or only adds (`false`).
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.annotations.read_only = Some(false);
        self.annotations.destructive = Some(destructive);
        self
    }

    /// Hints that a second call with the same arguments has no further effect.
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = Some(true);
        self
    }

    /// Hints whether the tool reaches outside the host (`true`: a web API, another
    /// system) or only its own computation and the host's files (`false`).
    pub fn open_world(mut self, open_world: bool) -> Self {
        self.annotations.open_world = Some(open_world);
        self
    }

    /// This tool with a JSON Schema of its result, an object schema (`"type": "object"`,
    /// build it with [`crate::schema::object`]). Clients then get the result as
    /// structured content too. The host checks each result's top level against it (an
    /// object, the required properties there, their types) and reports a result that
    /// does not match as a fault of the tool; a schema that is not an object schema is a
    /// load error.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
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

    /// The display title, if set.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The behaviour hints (all `None` unless set).
    pub fn annotations(&self) -> Annotations {
        self.annotations
    }

    /// The JSON Schema of the result, if set.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// Runs the tool on `arguments` (a JSON object as text; empty text counts as `{}`)
    /// and returns the result as JSON text; call it directly to unit-test a tool
    /// natively. For a [`Tool::rich`] tool that is its structured JSON (`null` when it
    /// sets none); [`Tool::call_output`] gives its blocks too.
    ///
    /// # Errors
    ///
    /// See [`Tool::new`] and [`Tool::raw`].
    pub fn call(&self, arguments: &str, env: Env) -> Result<String, ToolError> {
        Ok(match (self.handler)(arguments, env)? {
            Output::Json(text) => text,
            Output::Content(content) => content
                .structured()
                .map_or_else(|| "null".to_owned(), ToString::to_string),
        })
    }

    /// Runs the tool on `arguments`, as [`Tool::call`], and returns what it returned:
    /// what the host's call ends up in.
    ///
    /// # Errors
    ///
    /// See [`Tool::new`], [`Tool::raw`] and [`Tool::rich`].
    pub fn call_output(&self, arguments: &str, env: Env) -> Result<Output, ToolError> {
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
    fn parse_errors_name_the_argument_for_the_model_not_the_tool() {
        let tool = divide_tool();
        // The host puts the tool's name in front (`divide: ...`): it is not repeated here.
        assert_eq!(
            tool.call("", Env::default()),
            Err(ToolError::InvalidArguments(
                r#"argument "by" is required"#.into()
            ))
        );
        assert_eq!(
            tool.call(r#"{"by":"x"}"#, Env::default()),
            Err(ToolError::InvalidArguments(
                r#"argument "by" must be a number, got string "x""#.into()
            ))
        );
        assert_eq!(
            tool.call(r#"{"by":"#, Env::default()),
            Err(ToolError::InvalidArguments(
                "the arguments are not valid JSON (EOF while parsing a value at line 1 column \
                 6); send one JSON object"
                    .into()
            ))
        );
    }

    #[test]
    fn metadata_builders_set_title_hints_and_output_schema() {
        let plain = divide_tool();
        assert_eq!(
            (plain.title(), plain.annotations(), plain.output_schema()),
            (None, Annotations::default(), None)
        );
        assert!(plain.annotations().is_empty());
        let output = schema::object([("q", schema::number("Quotient."))], ["q"]);
        let tool = divide_tool()
            .with_title("Divide")
            .read_only()
            .idempotent()
            .open_world(false)
            .with_output_schema(output.clone());
        assert_eq!(tool.title(), Some("Divide"));
        assert_eq!(
            tool.annotations(),
            Annotations {
                read_only: Some(true),
                destructive: None,
                idempotent: Some(true),
                open_world: Some(false),
            }
        );
        assert_eq!(tool.output_schema(), Some(&output));
        let writer = divide_tool().destructive(false).open_world(true);
        assert_eq!(
            writer.annotations(),
            Annotations {
                read_only: Some(false),
                destructive: Some(false),
                idempotent: None,
                open_world: Some(true),
            }
        );
        let all = Annotations {
            destructive: Some(true),
            ..Annotations::default()
        };
        assert_eq!(divide_tool().with_annotations(all).annotations(), all);
        // The handler is unchanged by the builders.
        assert_eq!(
            tool.call(r#"{"by":4,"value":2}"#, Env::default()),
            Ok("0.5".into())
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
                "the result could not be encoded as JSON: key must be a string (a bug in the \
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
