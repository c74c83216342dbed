//! The glue between the generated exports (`tools`, `resources`, `prompts`) and a
//! plugin's list of [`Tool`]s, its [`Resources`](crate::catalog::Resources) and its
//! [`Prompt`](crate::catalog::Prompt)s.

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
/// Optional arguments `resources = f` (`f` returns a
/// [`Resources`](crate::catalog::Resources)) and `prompts = g` (`g` returns a
/// `Vec<`[`Prompt`](crate::catalog::Prompt)`>`), in that order, export resources and
/// prompts too (see [`catalog`](crate::catalog)); each is built once per instance, like
/// the tools. Without them the plugin offers none.
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
        $crate::export_plugin!(
            $tools,
            resources = $crate::catalog::Resources::new,
            prompts = ::std::vec::Vec::<$crate::catalog::Prompt>::new
        );
    };
    ($tools:expr, resources = $resources:expr $(,)?) => {
        $crate::export_plugin!(
            $tools,
            resources = $resources,
            prompts = ::std::vec::Vec::<$crate::catalog::Prompt>::new
        );
    };
    ($tools:expr, prompts = $prompts:expr $(,)?) => {
        $crate::export_plugin!(
            $tools,
            resources = $crate::catalog::Resources::new,
            prompts = $prompts
        );
    };
    ($tools:expr, resources = $resources:expr, prompts = $prompts:expr $(,)?) => {
        const _: () = {
            struct ToolhostPlugin;

            ::std::thread_local! {
                // The tool list, resources and prompts, each built once per instance
                // (a component instance is one thread).
                static TOOLHOST_PLUGIN_TOOLS: ::std::cell::OnceCell<::std::vec::Vec<$crate::Tool>> =
                    const { ::std::cell::OnceCell::new() };
                static TOOLHOST_PLUGIN_RESOURCES: ::std::cell::OnceCell<$crate::catalog::Resources> =
                    const { ::std::cell::OnceCell::new() };
                static TOOLHOST_PLUGIN_PROMPTS: ::std::cell::OnceCell<::std::vec::Vec<$crate::catalog::Prompt>> =
                    const { ::std::cell::OnceCell::new() };
            }

            fn with_toolhost_plugin_tools<R>(f: impl FnOnce(&[$crate::Tool]) -> R) -> R {
                $crate::__private::with_tools(&TOOLHOST_PLUGIN_TOOLS, || ($tools)(), f)
            }

            fn with_toolhost_plugin_resources<R>(
                f: impl FnOnce(&$crate::catalog::Resources) -> R,
            ) -> R {
                TOOLHOST_PLUGIN_RESOURCES.with(|cell| f(cell.get_or_init(|| ($resources)())))
            }

            fn with_toolhost_plugin_prompts<R>(
                f: impl FnOnce(&[$crate::catalog::Prompt]) -> R,
            ) -> R {
                TOOLHOST_PLUGIN_PROMPTS.with(|cell| f(cell.get_or_init(|| ($prompts)())))
            }

            impl $crate::__private::Guest for ToolhostPlugin {
                fn definitions() -> ::std::vec::Vec<$crate::__private::ToolDefinition> {
                    with_toolhost_plugin_tools($crate::__private::definitions)
                }

                fn call(
                    name: ::std::string::String,
                    arguments: ::std::string::String,
                    env: $crate::__private::Environment,
                ) -> ::std::result::Result<$crate::__private::WitToolResult, $crate::__private::WitToolError>
                {
                    with_toolhost_plugin_tools(|tools| {
                        $crate::__private::call(tools, &name, &arguments, env)
                    })
                }
            }

            impl $crate::__private::ResourcesGuest for ToolhostPlugin {
                fn list(
                    cursor: ::std::option::Option<::std::string::String>,
                    env: $crate::__private::Environment,
                ) -> ::std::result::Result<$crate::__private::WitResourcePage, $crate::__private::WitResourceError> {
                    with_toolhost_plugin_resources(|resources| {
                        $crate::__private::resources_list(resources, cursor, env)
                    })
                }

                fn templates() -> ::std::vec::Vec<$crate::__private::WitResourceTemplate> {
                    with_toolhost_plugin_resources($crate::__private::resources_templates)
                }

                fn read(
                    uri: ::std::string::String,
                    env: $crate::__private::Environment,
                ) -> ::std::result::Result<::std::vec::Vec<$crate::__private::WitResourceContents>, $crate::__private::WitResourceError> {
                    with_toolhost_plugin_resources(|resources| {
                        $crate::__private::resources_read(resources, &uri, env)
                    })
                }
            }

            impl $crate::__private::PromptsGuest for ToolhostPlugin {
                fn definitions() -> ::std::vec::Vec<$crate::__private::WitPrompt> {
                    with_toolhost_plugin_prompts($crate::__private::prompt_definitions)
                }

                fn get(
                    name: ::std::string::String,
                    arguments: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                    env: $crate::__private::Environment,
                ) -> ::std::result::Result<$crate::__private::WitPromptResult, $crate::__private::WitToolError> {
                    with_toolhost_plugin_prompts(|prompts| {
                        $crate::__private::prompt_get(prompts, &name, arguments, env)
                    })
                }
            }

    $crate::bindings::__export_rich_plugin_world!(ToolhostPlugin with_types_in $crate::bindings);
        };
    };
}

/// What [`export_plugin!`] expands to refers to; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use super::wit::{Environment, Guest, ToolDefinition, ToolError as WitToolError};
    use super::{find, Env, Tool, ToolError};
    pub use crate::bindings::exports::toolhost::plugin::prompts::{
        Guest as PromptsGuest, Prompt as WitPrompt, PromptResult as WitPromptResult,
    };
    pub use crate::bindings::exports::toolhost::plugin::resources::{
        Guest as ResourcesGuest, ResourceContents as WitResourceContents,
        ResourceError as WitResourceError, ResourcePage as WitResourcePage,
        ResourceTemplate as WitResourceTemplate,
    };
    pub use crate::bindings::toolhost::plugin::types::ToolResult as WitToolResult;
    use crate::bindings::toolhost::plugin::types::{self as wit_types, ToolAnnotations};
    use crate::content::{Content, ContentBlock, ResourceBody};
    use crate::tool::Output;

    /// The resources of a plugin that declares none: one empty page.
    pub fn no_resources(
        _cursor: Option<String>,
        _env: Environment,
    ) -> Result<WitResourcePage, WitResourceError> {
        Ok(WitResourcePage {
            resources: Vec::new(),
            next_cursor: None,
        })
    }

    /// The error for a resource this plugin does not have.
    pub fn no_resource(uri: &str) -> WitResourceError {
        WitResourceError::NotFound(format!("this plugin has no resource `{uri}`"))
    }

    /// The error for a prompt this plugin does not have.
    pub fn no_prompt(name: &str) -> WitToolError {
        WitToolError::Failed(format!("this plugin has no prompt named `{name}`"))
    }

    use crate::bindings::exports::toolhost::plugin::{
        prompts as wit_prompts, resources as wit_resources,
    };
    use crate::catalog::{Prompt, ResourceError, Resources, Role};

    fn env_of(env: Environment) -> Env {
        Env::new(env.session_id, env.turn_id)
    }

    fn resource_error(error: ResourceError) -> WitResourceError {
        match error {
            ResourceError::NotFound(m) => WitResourceError::NotFound(m),
            ResourceError::Invalid(m) => WitResourceError::Invalid(m),
            ResourceError::Failed(m) => WitResourceError::Failed(m),
        }
    }

    fn tool_error(error: ToolError) -> WitToolError {
        match error {
            ToolError::InvalidArguments(m) => WitToolError::InvalidArguments(m),
            ToolError::Failed(m) => WitToolError::Failed(m),
        }
    }

    /// `resources.list` of `resources`.
    pub fn resources_list(
        resources: &Resources,
        cursor: Option<String>,
        env: Environment,
    ) -> Result<WitResourcePage, WitResourceError> {
        let page = resources
            .list(cursor.as_deref(), env_of(env))
            .map_err(resource_error)?;
        Ok(WitResourcePage {
            resources: page
                .resources
                .into_iter()
                .map(|r| wit_resources::Resource {
                    uri: r.uri,
                    name: r.name,
                    title: r.title,
                    description: r.description,
                    mime_type: r.mime_type,
                    size: r.size,
                })
                .collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// `resources.templates` of `resources`.
    pub fn resources_templates(resources: &Resources) -> Vec<WitResourceTemplate> {
        resources
            .templates()
            .iter()
            .map(|t| WitResourceTemplate {
                uri_template: t.uri_template.clone(),
                name: t.name.clone(),
                title: t.title.clone(),
                description: t.description.clone(),
                mime_type: t.mime_type.clone(),
            })
            .collect()
    }

    /// `resources.read` of `resources`.
    pub fn resources_read(
        resources: &Resources,
        uri: &str,
        env: Environment,
    ) -> Result<Vec<WitResourceContents>, WitResourceError> {
        let contents = resources.read(uri, env_of(env)).map_err(resource_error)?;
        Ok(contents
            .into_iter()
            .map(|c| WitResourceContents {
                uri: c.uri,
                mime_type: c.mime_type,
                body: wit_body(c.body),
            })
            .collect())
    }

    /// `prompts.definitions` of `prompts`.
    pub fn prompt_definitions(prompts: &[Prompt]) -> Vec<WitPrompt> {
        prompts
            .iter()
            .map(|p| WitPrompt {
                name: p.name().to_owned(),
                title: p.title().map(str::to_owned),
                description: Some(p.description().to_owned()),
                arguments: p
                    .arguments()
                    .iter()
                    .map(|a| wit_prompts::PromptArgument {
                        name: a.name.clone(),
                        description: a.description.clone(),
                        required: a.required,
                    })
                    .collect(),
            })
            .collect()
    }

    /// `prompts.get` of the prompt called `name` in `prompts`.
    pub fn prompt_get(
        prompts: &[Prompt],
        name: &str,
        arguments: Vec<(String, String)>,
        env: Environment,
    ) -> Result<WitPromptResult, WitToolError> {
        let Some(prompt) = prompts.iter().find(|p| p.name() == name) else {
            return Err(no_prompt(name));
        };
        let arguments = arguments.into_iter().collect();
        let messages = prompt.get(&arguments, env_of(env)).map_err(tool_error)?;
        Ok(WitPromptResult {
            description: Some(prompt.description().to_owned()),
            messages: messages
                .into_iter()
                .map(|m| wit_prompts::PromptMessage {
                    role: match m.role {
                        Role::User => wit_prompts::Role::User,
                        Role::Assistant => wit_prompts::Role::Assistant,
                    },
                    content: wit_block(m.content),
                })
                .collect(),
        })
    }

    /// A resource body as the WIT's.
    pub(crate) fn wit_body(body: ResourceBody) -> wit_types::ResourceBody {
        match body {
            ResourceBody::Text(text) => wit_types::ResourceBody::Text(text),
            ResourceBody::Blob(bytes) => wit_types::ResourceBody::Blob(bytes),
        }
    }

    /// A content block as the WIT's.
    pub(crate) fn wit_block(block: ContentBlock) -> wit_types::ContentBlock {
        use wit_types::ContentBlock as W;
        match block {
            ContentBlock::Text(text) => W::Text(text),
            ContentBlock::Image { data, mime_type } => {
                W::Image(wit_types::Media { data, mime_type })
            }
            ContentBlock::Audio { data, mime_type } => {
                W::Audio(wit_types::Media { data, mime_type })
            }
            ContentBlock::ResourceLink(link) => W::ResourceLink(wit_types::ResourceLink {
                uri: link.uri,
                name: link.name,
                mime_type: link.mime_type,
                description: link.description,
            }),
            ContentBlock::Resource {
                uri,
                mime_type,
                body,
            } => W::Resource(wit_types::EmbeddedResource {
                uri,
                mime_type,
                body: wit_body(body),
            }),
        }
    }

    /// What a tool returned as the WIT's `tool-result`: a JSON result as `structured`
    /// with no blocks (the host gives it as one text block, exactly as a 0.2.0 result),
    /// rich content as its blocks and structured JSON.
    pub(crate) fn tool_result(output: Output) -> WitToolResult {
        match output {
            Output::Json(text) => WitToolResult {
                content: Vec::new(),
                structured: Some(text),
            },
            Output::Content(content) => {
                let (blocks, structured) = Content::into_parts(content);
                WitToolResult {
                    content: blocks.into_iter().map(wit_block).collect(),
                    structured: structured.map(|value| value.to_string()),
                }
            }
        }
    }

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
    /// metadata (title, hints, output schema) as the WIT carries it: no hint set is
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
    ) -> Result<WitToolResult, WitToolError> {
        let env = Env::new(env.session_id, env.turn_id);
        find(tools, name)
            .and_then(|tool| tool.call_output(arguments, env))
            .map(tool_result)
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
        call(&tools(), name, arguments, env)
            .map(json)
            .map_err(|error| match error {
                WitToolError::InvalidArguments(m) => (true, m),
                WitToolError::Failed(m) => (false, m),
            })
    }

    /// A plain result's JSON text: sent as `structured` with no blocks.
    fn json(result: WitToolResult) -> String {
        assert!(result.content.is_empty(), "a JSON result has no blocks");
        result
            .structured
            .expect("a JSON result is sent as structured")
    }

    #[test]
    fn rich_results_carry_their_blocks_in_order_and_structured_json() {
        use crate::bindings::toolhost::plugin::types as w;
        use crate::{Content, ResourceLink};
        let tool = Tool::rich(
            "draw",
            "Draws.",
            schema::object(
                Vec::<(String, serde_json::Value)>::new(),
                Vec::<String>::new(),
            ),
            |_: serde_json::Value, _env: Env| {
                Ok(Content::new()
                    .text("pic")
                    .image(vec![1, 2], "image/png")
                    .audio(vec![3], "audio/wav")
                    .resource_link(
                        ResourceLink::new("plugin://d/a", "a").with_mime_type("text/plain"),
                    )
                    .embedded_text("plugin://d/b", Some("text/plain"), "bee")
                    .embedded_blob("plugin://d/c", None, vec![0])
                    .with_structured(serde_json::json!({"n": 1})))
            },
        );
        let env = Environment {
            session_id: "s".into(),
            turn_id: "t".into(),
        };
        let result = call(&[tool], "draw", "{}", env).ok().unwrap();
        assert_eq!(result.structured.as_deref(), Some(r#"{"n":1}"#));
        let kinds: Vec<String> = result
            .content
            .iter()
            .map(|block| match block {
                w::ContentBlock::Text(t) => format!("text {t}"),
                w::ContentBlock::Image(m) => format!("image {} {:?}", m.mime_type, m.data),
                w::ContentBlock::Audio(m) => format!("audio {} {:?}", m.mime_type, m.data),
                w::ContentBlock::ResourceLink(l) => {
                    format!("link {} {} {:?}", l.uri, l.name, l.mime_type)
                }
                w::ContentBlock::Resource(r) => match &r.body {
                    w::ResourceBody::Text(t) => {
                        format!("resource {} {:?} text {t}", r.uri, r.mime_type)
                    }
                    w::ResourceBody::Blob(b) => {
                        format!("resource {} {:?} blob {b:?}", r.uri, r.mime_type)
                    }
                },
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "text pic",
                "image image/png [1, 2]",
                "audio audio/wav [3]",
                r#"link plugin://d/a a Some("text/plain")"#,
                r#"resource plugin://d/b Some("text/plain") text bee"#,
                "resource plugin://d/c None blob [0]",
            ]
        );
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
                call(tools, "shout", r#"{"text":"hi"}"#, env()).map(json)
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
