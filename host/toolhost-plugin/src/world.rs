//! Which version of the `toolhost:plugin` world a component targets, and the one place
//! that dispatches over versions: linking each version's imports, pre-instantiating a
//! component for its world, and calling its exports with 0.2.0's types for definitions
//! and errors (an older version's are converted by its module) and [`Answer`] for
//! results (0.2.0's JSON text, or 0.3.0's `tool-result`).
//!
//! Each WIT version has its module, as wasmtime-wasi has `p2`/`p3`: [`v0_1`](super::v0_1)
//! (frozen, adapted to 0.2.0), [`v0_2`](super::v0_2) (whose types the host's imports
//! work with) and [`v0_3`](super::v0_3) (current: rich results, `interaction`, and the
//! optional `resources` and `prompts` exports). A next version goes in a module beside
//! them plus a variant in [`Version`], [`WorldPre`] and [`Bound`] and a line in
//! [`add_to_linker`].

use wasmtime::component::{Component, Linker};
use wasmtime::Store;

use crate::host::Imports;
use crate::state::PluginState;
use crate::v0_2::exports::toolhost::plugin::tools::{
    Environment as WitEnvironment, ToolDefinition as WitDefinition, ToolError as GuestError,
};
use crate::v0_3::bindings::exports::toolhost::plugin::tools as v3;
use crate::{v0_1, v0_2, v0_3};

/// A version of the `toolhost:plugin` world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// `toolhost:plugin@0.1.0`.
    V0_1,
    /// `toolhost:plugin@0.2.0`.
    V0_2,
    /// `toolhost:plugin@0.3.0` (world `plugin` or `rich-plugin`).
    V0_3,
}

impl Version {
    /// The world a component with `exports` targets: by the `tools` export it carries
    /// (the newest when it carries several); with none, 0.3.0 (whose check then names
    /// what is missing).
    pub(crate) fn of_exports(exports: &[String]) -> Self {
        let has = |name: &str| exports.iter().any(|e| e == name);
        if has(v0_3::TOOLS_EXPORT) {
            Version::V0_3
        } else if has(v0_2::TOOLS_EXPORT) {
            Version::V0_2
        } else if has(v0_1::TOOLS_EXPORT) {
            Version::V0_1
        } else {
            Version::V0_3
        }
    }
}

/// Adds the imports of every version to `linker` (the host implements them all, so a
/// component built against any of them links).
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    v0_3::RichPlugin::add_to_linker::<PluginState, Imports>(linker, |state| &mut state.imports)?;
    v0_2::Plugin::add_to_linker::<PluginState, Imports>(linker, |state| &mut state.imports)?;
    v0_1::bindings::Plugin::add_to_linker::<PluginState, Imports>(linker, |state| {
        &mut state.imports
    })
}

/// A component pre-instantiated for the world it targets.
pub(crate) enum WorldPre {
    /// `toolhost:plugin@0.3.0`.
    V0_3(v0_3::Pre),
    /// `toolhost:plugin@0.2.0`.
    V0_2(v0_2::PluginPre<PluginState>),
    /// `toolhost:plugin@0.1.0`.
    V0_1(v0_1::PluginPre<PluginState>),
}

impl WorldPre {
    /// `component` pre-instantiated with `linker` for `version`'s world.
    pub(crate) fn new(
        linker: &Linker<PluginState>,
        component: &Component,
        version: Version,
    ) -> wasmtime::Result<Self> {
        let instance_pre = linker.instantiate_pre(component)?;
        Ok(match version {
            Version::V0_1 => WorldPre::V0_1(v0_1::PluginPre::new(instance_pre)?),
            Version::V0_2 => WorldPre::V0_2(v0_2::PluginPre::new(instance_pre)?),
            Version::V0_3 => WorldPre::V0_3(v0_3::Pre::new(instance_pre)?),
        })
    }

    /// An instance in `store`.
    pub(crate) async fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Bound> {
        Ok(match self {
            WorldPre::V0_3(pre) => Bound::V0_3(pre.instantiate(store).await?),
            WorldPre::V0_2(pre) => Bound::V0_2(pre.instantiate_async(store).await?),
            WorldPre::V0_1(pre) => Bound::V0_1(pre.instantiate_async(store).await?),
        })
    }
}

/// An instance of any world.
pub(crate) enum Bound {
    V0_3(v0_3::Plugin),
    V0_2(v0_2::Plugin),
    V0_1(v0_1::Plugin),
}

/// What a tool returned: 0.2.0's (and 0.1.0's) JSON text, or 0.3.0's `tool-result`.
pub(crate) enum Answer {
    /// JSON text.
    Json(String),
    /// Content blocks and structured JSON.
    Rich(v0_3::bindings::toolhost::plugin::types::ToolResult),
}

impl Bound {
    /// The plugin's tool definitions, as 0.2.0's.
    pub(crate) async fn definitions(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<WitDefinition>> {
        match self {
            Bound::V0_3(plugin) => Ok(plugin
                .tools
                .call_definitions(store)
                .await?
                .into_iter()
                .map(|d| WitDefinition {
                    name: d.name,
                    description: d.description,
                    parameters: d.parameters,
                    title: d.title,
                    annotations: d.annotations.map(|a| {
                        crate::v0_2::toolhost::plugin::types::ToolAnnotations {
                            read_only_hint: a.read_only_hint,
                            destructive_hint: a.destructive_hint,
                            idempotent_hint: a.idempotent_hint,
                            open_world_hint: a.open_world_hint,
                        }
                    }),
                    output_schema: d.output_schema,
                })
                .collect()),
            Bound::V0_2(plugin) => plugin.toolhost_plugin_tools().call_definitions(store).await,
            Bound::V0_1(plugin) => Ok(v0_1::definitions(
                plugin
                    .toolhost_plugin_tools()
                    .call_definitions(store)
                    .await?,
            )),
        }
    }

    /// Calls tool `name` with `env` (copied once into the world's own type); its
    /// answer, or its error as 0.2.0's.
    pub(crate) async fn call(
        &self,
        store: &mut Store<PluginState>,
        name: &str,
        arguments: &str,
        env: &toolhost::registry::Environment,
    ) -> wasmtime::Result<Result<Answer, GuestError>> {
        let wit_env = || WitEnvironment {
            session_id: env.session_id.clone(),
            turn_id: env.turn_id.clone(),
        };
        match self {
            Bound::V0_3(plugin) => {
                let env = v3::Environment {
                    session_id: env.session_id.clone(),
                    turn_id: env.turn_id.clone(),
                };
                let result = plugin.tools.call_call(store, name, arguments, &env).await?;
                Ok(result.map(Answer::Rich).map_err(|error| match error {
                    v3::ToolError::InvalidArguments(m) => GuestError::InvalidArguments(m),
                    v3::ToolError::Failed(m) => GuestError::Failed(m),
                }))
            }
            Bound::V0_2(plugin) => Ok(plugin
                .toolhost_plugin_tools()
                .call_call(store, name, arguments, &wit_env())
                .await?
                .map(Answer::Json)),
            Bound::V0_1(plugin) => {
                let result = plugin
                    .toolhost_plugin_tools()
                    .call_call(store, name, arguments, &v0_1::environment(&wit_env()))
                    .await?;
                Ok(result.map(Answer::Json).map_err(v0_1::tool_error))
            }
        }
    }
}

#[cfg(test)]
impl From<&str> for Answer {
    /// JSON text, as 0.2.0 returns it (for the classification tests).
    fn from(text: &str) -> Self {
        Answer::Json(text.to_owned())
    }
}

use crate::v0_3::bindings::exports::toolhost::plugin::{prompts as v3p, resources as v3r};

/// The 0.3.0 `environment` of `env`.
fn env_v0_3(env: &WitEnvironment) -> v3::Environment {
    v3::Environment {
        session_id: env.session_id.clone(),
        turn_id: env.turn_id.clone(),
    }
}

impl Bound {
    /// The 0.3.0 plugin, or an error naming what is missing (an older world, or a
    /// component without the export; the loader registers no source for those).
    fn rich(&self, export: &str) -> wasmtime::Result<&v0_3::Plugin> {
        match self {
            Bound::V0_3(plugin) => Ok(plugin),
            _ => Err(wasmtime::format_err!(
                "the component targets an older toolhost:plugin world, without `{export}`"
            )),
        }
    }

    /// `resources.templates`.
    pub(crate) async fn resource_templates(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<v3r::ResourceTemplate>> {
        match &self.rich("resources")?.resources {
            Some(resources) => resources.call_templates(store).await,
            None => Ok(Vec::new()),
        }
    }

    /// `resources.list`.
    pub(crate) async fn resource_list(
        &self,
        store: &mut Store<PluginState>,
        cursor: Option<&str>,
        env: &WitEnvironment,
    ) -> wasmtime::Result<Result<v3r::ResourcePage, v3r::ResourceError>> {
        match &self.rich("resources")?.resources {
            Some(resources) => resources.call_list(store, cursor, &env_v0_3(env)).await,
            None => Ok(Ok(v3r::ResourcePage {
                resources: Vec::new(),
                next_cursor: None,
            })),
        }
    }

    /// `resources.read`.
    pub(crate) async fn resource_read(
        &self,
        store: &mut Store<PluginState>,
        uri: &str,
        env: &WitEnvironment,
    ) -> wasmtime::Result<Result<Vec<v3r::ResourceContents>, v3r::ResourceError>> {
        match &self.rich("resources")?.resources {
            Some(resources) => resources.call_read(store, uri, &env_v0_3(env)).await,
            None => Ok(Err(v3r::ResourceError::NotFound(format!(
                "this plugin has no resources, so no `{uri}`"
            )))),
        }
    }

    /// `prompts.definitions`.
    pub(crate) async fn prompt_definitions(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<v3p::Prompt>> {
        match &self.rich("prompts")?.prompts {
            Some(prompts) => prompts.call_definitions(store).await,
            None => Ok(Vec::new()),
        }
    }

    /// `prompts.get`.
    pub(crate) async fn prompt_get(
        &self,
        store: &mut Store<PluginState>,
        name: &str,
        arguments: &[(String, String)],
        env: &WitEnvironment,
    ) -> wasmtime::Result<Result<v3p::PromptResult, GuestError>> {
        let Some(prompts) = &self.rich("prompts")?.prompts else {
            return Ok(Err(GuestError::Failed(format!(
                "this plugin has no prompts, so no `{name}`"
            ))));
        };
        let result = prompts
            .call_get(store, name, arguments, &env_v0_3(env))
            .await?;
        Ok(result.map_err(|error| match error {
            v3::ToolError::InvalidArguments(m) => GuestError::InvalidArguments(m),
            v3::ToolError::Failed(m) => GuestError::Failed(m),
        }))
    }
}
