//! The plan tool `todo_write`: the model keeps its task list in the conversation.
//!
//! Each call sends the whole list and gets it back validated and normalised as
//! `{"todos": [{"content", "status"}, ...]}`; the new list replaces the previous one. Nothing
//! is stored: the list lives in the conversation, and a host shows progress from the tool
//! results. The tool declares that shape as its output schema, so its results are
//! [structured](crate::registry::ToolResult::structured) (MCP `structuredContent`); it
//! changes nothing outside the conversation, so its hints say read-only.
//!
//! Decisions where the spec is silent: `content` is trimmed and must not be empty; fields
//! other than `content` and `status` are dropped from the echo; an empty list is allowed
//! (it clears the plan); any number of items may be `in_progress`.
//!
//! ```
//! use toolhost::registry::{CallContext, Environment, Registry, ToolCall};
//! use toolhost::tools::register_plan_tool;
//!
//! let registry = Registry::new();
//! register_plan_tool(&registry)?;
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let call = ToolCall::new("todo_write", r#"{"todos":[{"content":" Ship it ","status":"pending"}]}"#);
//! let result = registry.dispatch(&CallContext::new(), &call, &Environment::default()).await?;
//! assert_eq!(result.content.to_string(), r#"{"todos":[{"content":"Ship it","status":"pending"}]}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::registry::ToolAnnotations;
use serde_json::{json, Value};
use toolhost_sdk::schema::{array, enumeration, object, string};

use crate::registry::{
    json_type, Arguments, CallContext, Environment, RegisterError, Registry, ToolDefinition,
    ToolError, ToolResult,
};

const NAME: &str = "todo_write";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Update the task list";

/// The statuses a task can have, in the order messages list them.
const STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];

const DESCRIPTION: &str = "Write your task list for the current work, to plan and track \
progress. Send the whole list every time: each call replaces the previous list. Each task has \
content (what to do, one short sentence) and status: pending (not started), in_progress \
(being worked on now) or completed (done). Update statuses as you go. Returns the list as \
accepted, {\"todos\": [...]}. The list is kept in this conversation only; it touches no files.";

/// Registers `todo_write`.
///
/// # Errors
/// [`RegisterError::DuplicateTool`] when `todo_write` is already registered.
pub fn register_plan_tool(registry: &Registry) -> Result<(), RegisterError> {
    let item = object(
        [
            ("content", string("What to do, one short sentence.")),
            ("status", enumeration("Where the task stands.", STATUSES)),
        ],
        ["content", "status"],
    );
    let parameters = object(
        [(
            "todos",
            array(item.clone(), "The whole task list, in order."),
        )],
        ["todos"],
    );
    // The result has the arguments' shape, so clients get the accepted list as
    // `structuredContent` too (to show progress) and can rely on its form.
    let output = object(
        [("todos", array(item, "The task list as accepted, in order."))],
        ["todos"],
    );
    registry.register_builtin(
        ToolDefinition::new(NAME, DESCRIPTION, parameters)
            .with_title(TITLE)
            .with_annotations(ToolAnnotations::read_only())
            .with_output_schema(output),
        |_ctx: CallContext, args: Arguments, _env: Environment| async move {
            validate(&args).map(|todos| ToolResult::new(json!({ "todos": todos })))
        },
    )
}

/// The list in `args`, validated and normalised.
fn validate(args: &Arguments) -> Result<Vec<Value>, ToolError> {
    args.required_array("todos")?
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let Value::Object(fields) = item else {
                return Err(args.invalid(format!(
                    "argument \"todos[{index}]\" must be an object with content and status, got {}",
                    json_type(item)
                )));
            };
            let field = |name: &str| fields.get(name).filter(|value| !value.is_null());
            let content = match field("content") {
                None => return Err(args.missing(&format!("todos[{index}].content"))),
                Some(Value::String(text)) if text.trim().is_empty() => {
                    return Err(args.invalid(format!(
                        "argument \"todos[{index}].content\" is empty; say what the task is"
                    )))
                }
                Some(Value::String(text)) => text.trim(),
                Some(other) => {
                    return Err(args.wrong_type(
                        &format!("todos[{index}].content"),
                        "a string",
                        other,
                    ))
                }
            };
            let status = match field("status") {
                None => return Err(args.missing(&format!("todos[{index}].status"))),
                Some(Value::String(status)) if STATUSES.contains(&status.as_str()) => status,
                Some(other) => {
                    return Err(args.invalid(format!(
                        "argument \"todos[{index}].status\" must be one of {}, got {other}",
                        STATUSES.join(", ")
                    )))
                }
            };
            Ok(json!({ "content": content, "status": status }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::registry::ToolCall;

    async fn call(registry: &Registry, arguments: Value) -> Result<Value, ToolError> {
        registry
            .dispatch(
                &CallContext::new(),
                &ToolCall::new(NAME, arguments.to_string()),
                &Environment::default(),
            )
            .await
            .map(|result| result.content)
    }

    fn plan() -> Registry {
        let registry = Registry::new();
        register_plan_tool(&registry).expect("register");
        registry
    }

    #[tokio::test]
    async fn echoes_the_list_normalised() {
        let registry = plan();
        let result = call(
            &registry,
            json!({"todos": [
                {"content": "  Read the spec\n", "status": "completed", "id": "1"},
                {"content": "Write the tool", "status": "in_progress"},
                {"content": "Test it", "status": "in_progress", "priority": null},
                {"content": "Ship", "status": "pending"},
            ]}),
        )
        .await;
        assert_eq!(
            result,
            Ok(json!({"todos": [
                {"content": "Read the spec", "status": "completed"},
                {"content": "Write the tool", "status": "in_progress"},
                {"content": "Test it", "status": "in_progress"},
                {"content": "Ship", "status": "pending"},
            ]}))
        );
        // Each call replaces the list: an empty one clears it.
        assert_eq!(
            call(&registry, json!({"todos": []})).await,
            Ok(json!({"todos": []}))
        );
    }

    #[tokio::test]
    async fn each_error_names_the_index_and_field() {
        let registry = plan();
        let good = json!({"content": "a", "status": "pending"});
        let cases = [
            (json!({}), "argument \"todos\" is required"),
            (json!({"todos": null}), "argument \"todos\" is required"),
            (
                json!({"todos": {"content": "a"}}),
                "argument \"todos\" must be an array, got object",
            ),
            (
                json!({"todos": [good, good, {"content": "c", "status": "done"}]}),
                "argument \"todos[2].status\" must be one of pending, in_progress, completed, got \"done\"",
            ),
            (
                json!({"todos": [{"content": "c", "status": 1}]}),
                "argument \"todos[0].status\" must be one of pending, in_progress, completed, got 1",
            ),
            (
                json!({"todos": [{"content": "c", "status": "Pending"}]}),
                "argument \"todos[0].status\" must be one of pending, in_progress, completed, got \"Pending\"",
            ),
            (
                json!({"todos": [good, {"content": "c"}]}),
                "argument \"todos[1].status\" is required",
            ),
            (
                json!({"todos": [{"status": "pending"}]}),
                "argument \"todos[0].content\" is required",
            ),
            (
                json!({"todos": [{"content": null, "status": "pending"}]}),
                "argument \"todos[0].content\" is required",
            ),
            (
                json!({"todos": [{"content": 7, "status": "pending"}]}),
                "argument \"todos[0].content\" must be a string, got integer",
            ),
            (
                json!({"todos": [{"content": " \t", "status": "pending"}]}),
                "argument \"todos[0].content\" is empty; say what the task is",
            ),
            (
                json!({"todos": [good, "write tests"]}),
                "argument \"todos[1]\" must be an object with content and status, got string",
            ),
        ];
        for (arguments, message) in cases {
            assert_eq!(
                call(&registry, arguments.clone()).await,
                Err(ToolError::InvalidArguments {
                    tool: NAME.into(),
                    message: message.into()
                }),
                "{arguments}"
            );
        }
    }

    #[test]
    fn registered_once_with_its_schema() {
        let registry = plan();
        assert_eq!(registry.names(), [NAME]);
        assert_eq!(
            register_plan_tool(&registry),
            Err(RegisterError::DuplicateTool { name: NAME.into() })
        );
        let definition = &registry.definitions()[0];
        let items = &definition.parameters["properties"]["todos"]["items"];
        assert_eq!(
            items["properties"]["status"]["enum"],
            json!(["pending", "in_progress", "completed"])
        );
        assert_eq!(items["required"], json!(["content", "status"]));
        assert_eq!(definition.parameters["required"], json!(["todos"]));
    }

    #[tokio::test]
    async fn results_are_structured_by_the_declared_output_schema() {
        let registry = plan();
        let definition = &registry.definitions()[0];
        let output = definition.output_schema.as_ref().expect("an output schema");
        assert_eq!(output["type"], "object");
        assert_eq!(output["required"], json!(["todos"]));
        assert_eq!(
            output["properties"]["todos"]["items"],
            definition.parameters["properties"]["todos"]["items"]
        );
        let call = ToolCall::new(NAME, r#"{"todos":[{"content":" a ","status":"pending"}]}"#);
        let result = registry
            .dispatch(&CallContext::new(), &call, &Environment::default())
            .await
            .expect("call");
        assert_eq!(
            result,
            ToolResult {
                content: json!({"todos": [{"content": "a", "status": "pending"}]}),
                structured: true,
                ..Default::default()
            }
        );
    }
}
