//! The glue between the generated `tools` export and a plugin's list of [`Tool`]s.

use crate::bindings::exports::toolhost::plugin::tools as wit;
use crate::tool::{find, Env, Tool, ToolError};

/// Exports a plugin's tools as the `toolhost:plugin/tools` interface of the component.
///
/// The argument is a closure or function returning `Vec<Tool>`. It runs whenever the host
/// asks for the definitions or calls a tool (each call gets a fresh instance, so there is
/// nothing to cache); keep it cheap and deterministic. Use the macro once per plugin
/// crate, at the top level.
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

            fn toolhost_plugin_tools() -> ::std::vec::Vec<$crate::Tool> {
                ($tools)()
            }

            impl $crate::__private::Guest for ToolhostPlugin {
                fn definitions() -> ::std::vec::Vec<$crate::__private::ToolDefinition> {
                    $crate::__private::definitions(toolhost_plugin_tools())
                }

                fn call(
                    name: ::std::string::String,
                    arguments: ::std::string::String,
                    env: $crate::__private::Environment,
                ) -> ::std::result::Result<::std::string::String, $crate::__private::WitToolError>
                {
                    $crate::__private::call(toolhost_plugin_tools(), &name, &arguments, env)
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

    /// The definitions of `tools`, in order, with the schemas as JSON text.
    pub fn definitions(tools: Vec<Tool>) -> Vec<ToolDefinition> {
        tools
            .into_iter()
            .map(|tool| ToolDefinition {
                parameters: tool.parameters().to_string(),
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
            })
            .collect()
    }

    /// Runs the tool called `name` from `tools`.
    pub fn call(
        tools: Vec<Tool>,
        name: &str,
        arguments: &str,
        env: Environment,
    ) -> Result<String, WitToolError> {
        let env = Env::new(env.session_id, env.turn_id);
        find(&tools, name)
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
        call(tools(), name, arguments, env).map_err(|error| match error {
            WitToolError::InvalidArguments(m) => (true, m),
            WitToolError::Failed(m) => (false, m),
        })
    }

    #[test]
    fn definitions_carry_schemas_as_json_text_in_order() {
        let definitions = definitions(tools());
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
