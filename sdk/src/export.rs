//! The glue between the generated `tools` export and a plugin's list of [`Tool`]s.

use crate::bindings::exports::toolhost::plugin::tools as wit;
use crate::tool::{find, Env, Tool, ToolError};

/// Exports a plugin's tools as the `toolhost:plugin/tools` interface of the component.
///
/// The argument is a closure or function returning `Vec<Tool>`. It runs once per instance,
/// the first time the host asks for the definitions or calls a tool; the list is kept
/// for the instance's later calls (a host that reuses instances calls it once, not once
/// per call). The host gives each call a fresh instance by default, so keep it cheap and
/// deterministic. Use the macro once per plugin crate, at the top level.
///
/// ```
/// use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};
///
/// #[derive(serde::Deserialize)]
/// struct Args {
///     text: String,
/// }
///
/// fn upper(args: Args, _env: Env) -> Result<String, ToolError> {
///     Ok(args.text.to_uppercase())
/// }
///
/// fn tools() -> Vec<Tool> {
///     let text = schema::object([("text", schema::string("Text to convert."))], ["text"]);
///     vec![Tool::new("upper", "Upper-cases a text.", text, upper)]
/// }
///
/// export_plugin!(tools);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($tools:expr $(,)?) => {
        const _: () = {
            struct ToolhostPlugin;

            ::std::thread_local! {
                // The tool list, built once per instance (a component instance is one
                // thread).
                static TOOLHOST_PLUGIN_TOOLS: ::std::cell::OnceCell<::std::vec::Vec<$crate::Tool>> =
                    const { ::std::cell::OnceCell::new() };
            }

            fn with_toolhost_plugin_tools<R>(f: impl FnOnce(&[$crate::Tool]) -> R) -> R {
                $crate::__private::with_tools(&TOOLHOST_PLUGIN_TOOLS, || ($tools)(), f)
            }

            impl $crate::__private::Guest for ToolhostPlugin {
                fn definitions() -> ::std::vec::Vec<$crate::__private::ToolDefinition> {
                    with_toolhost_plugin_tools($crate::__private::definitions)
                }

                fn call(
                    name: ::std::string::String,
                    arguments: ::std::string::String,
                    env: $crate::__private::Environment,
                ) -> ::std::result::Result<::std::string::String, $crate::__private::WitToolError>
                {
                    with_toolhost_plugin_tools(|tools| {
                        $crate::__private::call(tools, &name, &arguments, env)
                    })
                }
            }

    $crate::bindings::__export_plugin_world!(ToolhostPlugin with_types_in $crate::bindings);
        };
    };
}

/// What [`export_plugin!`] expands to refers to; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use super::wit::{Environment, Guest, ToolDefinition, ToolError as WitToolError};
    use super::{find, Env, Tool, ToolError};
    use crate::bindings::toolhost::plugin::types::ToolAnnotations;

    /// Runs `f` on the tool list kept in `cell`, building it with `build` the first time
    /// (once per instance: the cell is the instance's thread-local).
    pub fn with_tools<R>(
        cell: &'static std::thread::LocalKey<std::cell::OnceCell<Vec<Tool>>>,
        build: impl FnOnce() -> Vec<Tool>,
        f: impl FnOnce(&[Tool]) -> R,
    ) -> R {
        cell.with(|tools| f(tools.get_or_init(build)))
    }

    /// The definitions of `tools`, in order, with the schemas as JSON text and the
    /// metadata (title, hints, output schema) as WIT 0.2.0 carries it: no hint set is
    /// `annotations: None`.
    pub fn definitions(tools: &[Tool]) -> Vec<ToolDefinition> {
        tools
            .iter()
            .map(|tool| {
                let hints = tool.annotations();
                ToolDefinition {
                    parameters: tool.parameters().to_string(),
                    name: tool.name().to_owned(),
                    description: tool.description().to_owned(),
                    title: tool.title().map(str::to_owned),
                    annotations: (!hints.is_empty()).then_some(ToolAnnotations {
                        read_only_hint: hints.read_only,
                        destructive_hint: hints.destructive,
                        idempotent_hint: hints.idempotent,
                        open_world_hint: hints.open_world,
                    }),
                    output_schema: tool.output_schema().map(ToString::to_string),
                }
            })
            .collect()
    }

    /// Runs the tool called `name` from `tools`.
    pub fn call(
        tools: &[Tool],
        name: &str,
        arguments: &str,
        env: Environment,
    ) -> Result<String, WitToolError> {
        let env = Env::new(env.session_id, env.turn_id);
        find(tools, name)
            .and_then(|tool| tool.call(arguments, env))
            .map_err(|error| match error {
                ToolError::InvalidArguments(m) => WitToolError::InvalidArguments(m),
                ToolError::Failed(m) => WitToolError::Failed(m),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::__private::*;
    use crate::{schema, Env, Tool, ToolError};

    #[derive(serde::Deserialize)]
    struct Text {
        text: String,
    }

    fn tools() -> Vec<Tool> {
        let no_parameters = schema::object(
            Vec::<(String, serde_json::Value)>::new(),
            Vec::<String>::new(),
        );
        vec![
            Tool::new(
                "shout",
                "Shouts.",
                schema::object([("text", schema::string("Text."))], ["text"]),
                |args: Text, env: Env| Ok(format!("{}! ({})", args.text, env.session_id)),
            ),
            Tool::raw("fail", "Fails.", no_parameters, |_, _| {
                Err(ToolError::failed("always fails"))
            }),
        ]
    }

    fn run(name: &str, arguments: &str) -> Result<String, (bool, String)> {
        let env = Environment {
            session_id: "s1".into(),
            turn_id: "t1".into(),
        };
        call(&tools(), name, arguments, env).map_err(|error| match error {
            WitToolError::InvalidArguments(m) => (true, m),
            WitToolError::Failed(m) => (false, m),
        })
    }

    #[test]
    fn the_tool_list_is_built_once_per_instance() {
        use std::cell::{Cell, OnceCell};
        std::thread_local! {
            static TOOLS: OnceCell<Vec<Tool>> = const { OnceCell::new() };
            static BUILDS: Cell<u32> = const { Cell::new(0) };
        }
        let build = || {
            BUILDS.with(|n| n.set(n.get() + 1));
            tools()
        };
        let env = || Environment {
            session_id: "s1".into(),
            turn_id: "t1".into(),
        };
        let names = with_tools(&TOOLS, build, |tools| definitions(tools).len());
        assert_eq!(names, 2);
        for _ in 0..3 {
            let out = with_tools(&TOOLS, build, |tools| {
                call(tools, "shout", r#"{"text":"hi"}"#, env())
            });
            assert_eq!(out.ok(), Some(r#""hi! (s1)""#.to_owned()));
        }
        assert_eq!(BUILDS.with(Cell::get), 1);
    }

    #[test]
    fn definitions_carry_schemas_as_json_text_in_order() {
        let definitions = definitions(&tools());
        assert_eq!(definitions.len(), 2);
        assert_eq!(definitions[0].name, "shout");
        assert_eq!(definitions[0].description, "Shouts.");
        assert_eq!(
            definitions[0].parameters,
            r#"{"properties":{"text":{"description":"Text.","type":"string"}},"required":["text"],"type":"object"}"#
        );
        assert_eq!(definitions[1].name, "fail");
        assert_eq!(
            definitions[1].parameters,
            r#"{"properties":{},"type":"object"}"#
        );
        // No metadata set: none sent.
        assert_eq!(definitions[0].title, None);
        assert!(definitions[0].annotations.is_none());
        assert_eq!(definitions[0].output_schema, None);
    }

    #[test]
    fn definitions_carry_title_hints_and_output_schema() {
        let tool = tools()
            .remove(0)
            .with_title("Shout it")
            .read_only()
            .open_world(false)
            .with_output_schema(schema::object(
                [("loud", schema::string("The text."))],
                ["loud"],
            ));
        let definition = definitions(&[tool]).remove(0);
        assert_eq!(definition.title.as_deref(), Some("Shout it"));
        let hints = definition.annotations.expect("hints set");
        assert_eq!(
            (
                hints.read_only_hint,
                hints.destructive_hint,
                hints.idempotent_hint,
                hints.open_world_hint
            ),
            (Some(true), None, None, Some(false))
        );
        assert_eq!(
            definition.output_schema.as_deref(),
            Some(
                r#"{"properties":{"loud":{"description":"The text.","type":"string"}},"required":["loud"],"type":"object"}"#
            )
        );
    }

    #[test]
    fn call_dispatches_by_name_and_maps_errors() {
        assert_eq!(run("shout", r#"{"text":"hi"}"#), Ok(r#""hi! (s1)""#.into()));
        assert_eq!(run("fail", "{}"), Err((false, "always fails".into())));
        assert_eq!(
            run("shout", "{}"),
            Err((true, r#"argument "text" is required"#.into()))
        );
        assert_eq!(
            run("nope", "{}"),
            Err((
                false,
                "this plugin has no tool named `nope`; it offers: shout, fail".into()
            ))
        );
    }
}
