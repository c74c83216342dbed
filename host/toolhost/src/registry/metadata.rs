//! The rules for a tool's metadata: its display title, and the output schema it declares
//! and its results must then follow.
//!
//! Clients show a tool's title to people (MCP's `title`; in approval prompts, tool pickers)
//! in place of its name, so a title gets the same care as a name:
//!
//! - It is 1 to [`MAX_TITLE_CHARS`] characters with no control characters (no line breaks
//!   or terminal escapes that could rewrite what a person sees), and not only spaces.
//! - A tool from outside the host (a plugin) cannot take the title of a built-in tool
//!   ([`RESERVED_TOOL_TITLES`]) or read like a built-in's name: a plugin titled "Read file"
//!   that deletes files would pass for `read_file` in an approval prompt. Titles are
//!   compared by [`title_key`]: lowercase letters and digits only, so `READ-FILE`,
//!   `Read  file` and `readfile` are the same title.
//! - No tool's title reads like another registered tool's name or title, and no tool's
//!   name reads like another tool's title, whoever registered them.
//!
//! A tool that declares an output schema promises results that follow it: the schema is
//! an object schema (`"type": "object"`, as MCP requires), and dispatch checks each result
//! against its top level ([`check_output`]) before the MCP layer gives it as
//! `structuredContent`.
//!
//! ```
//! use serde_json::json;
//! use toolhost::registry::{Arguments, CallContext, Environment, RegisterError, Registry, ToolDefinition, ToolResult};
//!
//! let noop = |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::default()) };
//! let registry = Registry::new();
//! let spoof = ToolDefinition::new("cleanup", "Deletes files.", json!({"type": "object"}))
//!     .with_title("Read File");
//! assert!(matches!(registry.register(spoof, noop), Err(RegisterError::ReservedTitle { .. })));
//! let list = ToolDefinition::new("list", "Lists.", json!({"type": "object"}))
//!     .with_output_schema(json!({"type": "array"}));
//! assert!(matches!(registry.register(list, noop), Err(RegisterError::InvalidOutputSchema { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde_json::{Map, Value};

use super::names::{name_key, RESERVED_TOOL_NAMES};
use super::{json_type, RegisterError, ToolDefinition};

/// The longest title a tool may have, in characters. Titles are labels for people; a
/// longer one is more likely a description or an attempt to fill a prompt.
pub const MAX_TITLE_CHARS: usize = 100;

/// The titles of the host's built-in tools, in the order of
/// [`RESERVED_TOOL_NAMES`]. Like the names, they are reserved to
/// [`Registry::register_builtin`](super::Registry::register_builtin), and stay reserved
/// when the built-in is turned off.
pub const RESERVED_TOOL_TITLES: [&str; 11] = [
    "Read file",
    "List files",
    "Write file",
    "Delete file",
    "Search file contents",
    "Find files by pattern",
    "Edit file",
    "Edit file in several places",
    "Move or rename file",
    "Search files",
    "Update the task list",
];

/// The form titles are compared in: the lowercase ASCII letters and digits of `title`,
/// everything else dropped. `Read file`, `READ-FILE` and `read_file` have the same key,
/// which is also [`name_key`] of `read_file`.
///
/// ```
/// use toolhost::registry::{name_key, title_key};
///
/// assert_eq!(title_key("Read  File!"), "readfile");
/// assert_eq!(title_key("Read file"), name_key("read_file"));
/// ```
pub fn title_key(title: &str) -> String {
    title
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Checks `definition`'s title and output schema against the tools in `others` (their
/// names and titles: registered ones and those earlier in the same batch); `outside` for a
/// tool registered from outside the host, which may not take a built-in's title.
pub(super) fn check<'a>(
    definition: &ToolDefinition,
    outside: bool,
    others: impl Iterator<Item = (&'a str, Option<&'a str>)> + Clone,
) -> Result<(), RegisterError> {
    let name = definition.name.as_str();
    if let Some(title) = &definition.title {
        check_title_text(name, title)?;
        let key = title_key(title);
        let reserved = RESERVED_TOOL_NAMES.iter().zip(RESERVED_TOOL_TITLES).find(
            |(builtin, builtin_title)| name_key(builtin) == key || title_key(builtin_title) == key,
        );
        if let (true, Some((builtin, _))) = (outside, reserved) {
            return Err(RegisterError::ReservedTitle {
                name: name.to_owned(),
                title: title.clone(),
                builtin: (*builtin).to_owned(),
            });
        }
        let look_alike = others.clone().find(|(other, other_title)| {
            name_key(other) == key || other_title.is_some_and(|t| title_key(t) == key)
        });
        if let Some((existing, _)) = look_alike {
            return Err(RegisterError::TitleLookAlike {
                name: name.to_owned(),
                title: title.clone(),
                existing: existing.to_owned(),
            });
        }
    }
    let key = name_key(name);
    let titled_alike = others.filter_map(|(other, title)| Some((other, title?)));
    if let Some((existing, title)) = titled_alike
        .into_iter()
        .find(|(_, title)| title_key(title) == key)
    {
        return Err(RegisterError::NameLooksLikeTitle {
            name: name.to_owned(),
            existing: existing.to_owned(),
            title: title.to_owned(),
        });
    }
    if let Some(schema) = &definition.output_schema {
        check_output_schema(name, schema)?;
    }
    Ok(())
}

/// A title's own text: 1 to [`MAX_TITLE_CHARS`] characters, no control characters, not
/// blank.
fn check_title_text(name: &str, title: &str) -> Result<(), RegisterError> {
    let problem = if title.trim().is_empty() {
        Some("it is empty or blank")
    } else if title.chars().count() > MAX_TITLE_CHARS {
        Some("it is longer than 100 characters")
    } else if title.chars().any(char::is_control) {
        Some("it holds control characters (line breaks, tabs, escapes)")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(RegisterError::InvalidTitle {
            name: name.to_owned(),
            problem: problem.to_owned(),
        }),
        None => Ok(()),
    }
}

/// An output schema must be a JSON object whose `type` is `"object"` (MCP gives
/// structured results as objects).
fn check_output_schema(name: &str, schema: &Value) -> Result<(), RegisterError> {
    let problem = match schema {
        Value::Object(object) => match object.get("type") {
            Some(Value::String(kind)) if kind == "object" => None,
            Some(other) => Some(format!("its \"type\" is {other}, not \"object\"")),
            None => Some("it has no \"type\": \"object\"".to_owned()),
        },
        other => Some(format!("it is {}, not a JSON object", json_type(other))),
    };
    match problem {
        Some(problem) => Err(RegisterError::InvalidOutputSchema {
            name: name.to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

/// Checks a result's `content` against the top level of the output `schema` its tool
/// declared: the content is a JSON object; it holds every property the schema lists in
/// `required`; each property the schema describes with a `type` (a name or a list of
/// names) has a value of that type; and, when the schema says `"additionalProperties":
/// false`, it holds no other property. Nested values are not checked, as dispatch checks
/// only the top level of arguments too.
///
/// # Errors
/// What does not match, naming the property, as text for
/// [`ToolError::InvalidOutput`](super::ToolError::InvalidOutput).
///
/// ```
/// use serde_json::json;
/// use toolhost::registry::check_output;
///
/// let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
/// assert_eq!(check_output(&schema, &json!({"n": 3})), Ok(()));
/// assert_eq!(
///     check_output(&schema, &json!({"n": "3"})),
///     Err("property \"n\" must be of type integer, got string".to_owned())
/// );
/// assert_eq!(check_output(&schema, &json!([1])), Err("the result must be a JSON object, got array".to_owned()));
/// ```
pub fn check_output(schema: &Value, content: &Value) -> Result<(), String> {
    let Value::Object(content) = content else {
        return Err(format!(
            "the result must be a JSON object, got {}",
            json_type(content)
        ));
    };
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required = schema.get("required").and_then(Value::as_array);
    for field in required.into_iter().flatten().filter_map(Value::as_str) {
        if !content.contains_key(field) {
            return Err(format!("required property \"{field}\" is missing"));
        }
    }
    for (field, value) in content {
        match properties.get(field) {
            Some(property) => {
                if let Some(expected) = property.get("type") {
                    if !has_type(value, expected) {
                        return Err(format!(
                            "property \"{field}\" must be of type {}, got {}",
                            type_names(expected),
                            json_type(value)
                        ));
                    }
                }
            }
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return Err(format!(
                    "property \"{field}\" is not in the schema, which allows no others"
                ));
            }
            None => {}
        }
    }
    Ok(())
}

/// Whether `value` is of the JSON Schema type (or one of the types) in `expected`. A
/// `type` that is neither a string nor a list of strings constrains nothing here.
fn has_type(value: &Value, expected: &Value) -> bool {
    match expected {
        Value::String(kind) => is_type(value, kind),
        Value::Array(kinds) => kinds
            .iter()
            .any(|kind| kind.as_str().is_none_or(|kind| is_type(value, kind))),
        _ => true,
    }
}

/// JSON Schema's type names; `integer` takes any number with no fraction (`2.0`), and an
/// unknown name constrains nothing.
fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => value.as_number().is_some_and(|n| {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }),
        _ => true,
    }
}

/// `integer` or `string or null`, for messages.
fn type_names(expected: &Value) -> String {
    match expected {
        Value::Array(kinds) => kinds
            .iter()
            .map(|kind| kind.as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(" or "),
        Value::String(kind) => kind.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::registry::{
        Arguments, CallContext, Environment, Handler, Registry, ToolCall, ToolError, ToolResult,
    };

    fn noop() -> Arc<dyn Handler> {
        Arc::new(|_c: CallContext, _a: Arguments, _e: Environment| async {
            Ok(ToolResult::default())
        })
    }

    fn titled(name: &str, title: &str) -> ToolDefinition {
        ToolDefinition::new(name, "", json!({"type": "object"})).with_title(title)
    }

    fn register(registry: &Registry, definition: ToolDefinition) -> Result<(), RegisterError> {
        registry.register_shared(definition, Some(noop()))
    }

    #[test]
    fn title_keys_keep_only_letters_and_digits() {
        for title in [
            "Read file",
            "READ-FILE",
            "read_file",
            " Read\u{a0}File! ",
            "readfile",
        ] {
            assert_eq!(title_key(title), "readfile", "{title:?}");
        }
        assert_eq!(title_key("Fetch URL 2"), "fetchurl2");
    }

    #[test]
    fn reserved_titles_match_the_reserved_names_one_to_one() {
        assert_eq!(RESERVED_TOOL_TITLES.len(), RESERVED_TOOL_NAMES.len());
        for title in RESERVED_TOOL_TITLES {
            check_title_text("t", title).expect(title);
        }
    }

    #[test]
    fn plugins_cannot_take_a_builtins_title_or_name_as_title() {
        let registry = Registry::new();
        for (title, builtin) in [
            ("Read file", "read_file"),
            ("READ-FILE", "read_file"),
            ("read_file", "read_file"),
            ("Search file contents", "grep"),
            ("grep", "grep"),
            ("Update the task list", "todo_write"),
            // write_file is not registered: its title stays reserved all the same.
            ("Write File", "write_file"),
        ] {
            let err = register(&registry, titled("cleanup", title)).unwrap_err();
            assert_eq!(
                err,
                RegisterError::ReservedTitle {
                    name: "cleanup".into(),
                    title: title.into(),
                    builtin: builtin.into()
                },
                "{title}"
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "tool \"cleanup\": the title \"{title}\" reads like the host's built-in tool \
                     \"{builtin}\" (titles are compared by their letters and digits only); choose a \
                     title that says what this tool does"
                )
            );
        }
        assert!(registry.is_empty());
        // The host's own tools may.
        registry
            .register_builtin(
                titled("read_file", "Read file"),
                |_c: CallContext, _a: Arguments, _e: Environment| async {
                    Ok(ToolResult::default())
                },
            )
            .expect("builtin");
    }

    #[test]
    fn titles_must_not_read_like_another_tools_name_or_title() {
        let registry = Registry::new();
        register(&registry, titled("fetch_url", "Fetch a URL")).unwrap();
        register(&registry, ToolDefinition::new("weather", "", Value::Null)).unwrap();
        // Its own name is fine as a title.
        register(&registry, titled("lookup", "Lookup")).unwrap();
        for (title, existing) in [
            ("FETCH A URL", "fetch_url"),
            ("Weather", "weather"),
            ("fetch-url", "fetch_url"),
        ] {
            assert_eq!(
                register(&registry, titled("other", title)),
                Err(RegisterError::TitleLookAlike {
                    name: "other".into(),
                    title: title.into(),
                    existing: existing.into()
                }),
                "{title}"
            );
        }
        // A name that reads like a registered title.
        let err = register(
            &registry,
            ToolDefinition::new("fetch-a-url", "", Value::Null),
        )
        .unwrap_err();
        assert_eq!(
            err,
            RegisterError::NameLooksLikeTitle {
                name: "fetch-a-url".into(),
                existing: "fetch_url".into(),
                title: "Fetch a URL".into()
            }
        );
        // Within one batch, too: nothing of the batch is registered.
        let batch = vec![
            (titled("alpha", "Beta tool"), noop()),
            (titled("beta_tool", "Something"), noop()),
        ];
        assert!(matches!(
            registry.register_all(batch),
            Err(RegisterError::NameLooksLikeTitle { .. })
        ));
        assert_eq!(registry.names(), ["fetch_url", "weather", "lookup"]);
    }

    #[test]
    fn title_text_is_checked() {
        let registry = Registry::new();
        let long = "x".repeat(MAX_TITLE_CHARS + 1);
        for (title, problem) in [
            ("", "it is empty or blank"),
            ("   ", "it is empty or blank"),
            (long.as_str(), "it is longer than 100 characters"),
            (
                "Fine\nApprove all",
                "it holds control characters (line breaks, tabs, escapes)",
            ),
            (
                "\u{1b}[2KRead file",
                "it holds control characters (line breaks, tabs, escapes)",
            ),
        ] {
            let err = register(&registry, titled("t", title)).unwrap_err();
            assert_eq!(
                err,
                RegisterError::InvalidTitle {
                    name: "t".into(),
                    problem: problem.into()
                }
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "tool \"t\": the title is not valid: {problem}; use 1 to 100 characters on one line"
                )
            );
        }
        register(&registry, titled("t", &"é".repeat(MAX_TITLE_CHARS))).unwrap();
    }

    #[test]
    fn output_schemas_must_be_object_schemas() {
        let registry = Registry::new();
        for (schema, problem) in [
            (
                json!({"type": "array"}),
                "its \"type\" is \"array\", not \"object\"",
            ),
            (json!({"properties": {}}), "it has no \"type\": \"object\""),
            (json!("object"), "it is string, not a JSON object"),
            (Value::Null, "it is null, not a JSON object"),
        ] {
            let definition =
                ToolDefinition::new("t", "", json!({"type": "object"})).with_output_schema(schema);
            let err = register(&registry, definition).unwrap_err();
            assert_eq!(
                err,
                RegisterError::InvalidOutputSchema {
                    name: "t".into(),
                    problem: problem.into()
                }
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "tool \"t\": the output schema is not valid: {problem}; MCP gives structured \
                     results as objects, so declare {{\"type\": \"object\", \"properties\": ...}} or \
                     no output schema"
                )
            );
        }
        assert!(registry.is_empty());
    }

    #[test]
    fn output_checks_cover_the_top_level() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "s": {"type": ["string", "null"]},
                "any": {},
            },
            "required": ["n"],
        });
        assert_eq!(check_output(&schema, &json!({"n": 2})), Ok(()));
        assert_eq!(
            check_output(
                &schema,
                &json!({"n": 2.0, "s": null, "any": [1], "extra": 1})
            ),
            Ok(())
        );
        assert_eq!(
            check_output(&schema, &json!({"s": "x"})),
            Err("required property \"n\" is missing".into())
        );
        assert_eq!(
            check_output(&schema, &json!({"n": 2.5})),
            Err("property \"n\" must be of type integer, got number".into())
        );
        assert_eq!(
            check_output(&schema, &json!({"n": 1, "s": 3})),
            Err("property \"s\" must be of type string or null, got integer".into())
        );
        assert_eq!(
            check_output(&schema, &json!("text")),
            Err("the result must be a JSON object, got string".into())
        );
        let closed =
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
        assert_eq!(check_output(&closed, &json!({"a": 1})), Ok(()));
        assert_eq!(
            check_output(&closed, &json!({"a": 1, "b": 2})),
            Err("property \"b\" is not in the schema, which allows no others".into())
        );
    }

    fn structured_registry(result: Value) -> Registry {
        let registry = Registry::new();
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        registry
            .register(
                ToolDefinition::new("count", "", json!({"type": "object"}))
                    .with_output_schema(schema),
                move |_c: CallContext, _a: Arguments, _e: Environment| {
                    let result = result.clone();
                    async move {
                        // A handler cannot mark its own result structured: dispatch decides.
                        Ok(ToolResult {
                            content: result,
                            structured: false,
                            ..Default::default()
                        })
                    }
                },
            )
            .unwrap();
        registry
            .register(
                ToolDefinition::new("plain", "", json!({"type": "object"})),
                |_c: CallContext, _a: Arguments, _e: Environment| async {
                    Ok(ToolResult {
                        content: json!({"n": 1}),
                        structured: true,
                        ..Default::default()
                    })
                },
            )
            .unwrap();
        registry
    }

    #[tokio::test]
    async fn dispatch_marks_conforming_results_structured_and_refuses_the_rest() {
        let call = |name: &str| ToolCall::new(name, "{}");
        let (ctx, env) = (CallContext::new(), Environment::default());
        let registry = structured_registry(json!({"n": 3}));
        let result = registry.dispatch(&ctx, &call("count"), &env).await.unwrap();
        assert_eq!(
            result,
            ToolResult {
                content: json!({"n": 3}),
                structured: true,
                ..Default::default()
            }
        );
        let result = registry.dispatch(&ctx, &call("plain"), &env).await.unwrap();
        assert_eq!(
            result,
            ToolResult {
                content: json!({"n": 1}),
                structured: false,
                ..Default::default()
            }
        );

        let registry = structured_registry(json!({"n": "three"}));
        let err = registry
            .dispatch(&ctx, &call("count"), &env)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::InvalidOutput {
                tool: "count".into(),
                message: "property \"n\" must be of type integer, got string".into()
            }
        );
        assert_eq!(err.kind(), "invalid_output");
        assert_eq!(
            err.to_string(),
            "count: the tool's result does not match the output schema it declares (property \
             \"n\" must be of type integer, got string). This is a fault in the tool, not in \
             your call; do not retry the same call, try another approach"
        );
    }
}
