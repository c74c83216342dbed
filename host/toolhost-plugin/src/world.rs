//! Which version of the `toolhost:plugin` world a component targets, and the one place
//! that dispatches over versions: linking each version's imports, pre-instantiating a
//! component for its world, and calling its exports with 0.2.0's types (an older
//! version's are converted by its module).
//!
//! Each WIT version has its module, as wasmtime-wasi has `p2`/`p3`: [`v0_1`](super::v0_1)
//! (frozen, adapted to 0.2.0) and [`v0_2`](super::v0_2) (current). The next one,
//! `toolhost:plugin@0.3.0`, goes in a module `v0_3` beside them (its bindgen output, its
//! import implementations or adapters, its export conversions) plus a variant in
//! [`Version`], [`WorldPre`] and [`Bound`] and a line in [`add_to_linker`].

use wasmtime::component::{Component, Linker};
use wasmtime::Store;

use crate::host::Imports;
use crate::state::PluginState;
use crate::v0_2::exports::toolhost::plugin::tools::{
    Environment as WitEnvironment, ToolDefinition as WitDefinition, ToolError as GuestError,
};
use crate::{v0_1, v0_2};

/// A version of the `toolhost:plugin` world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// `toolhost:plugin@0.1.0`.
    V0_1,
    /// `toolhost:plugin@0.2.0`.
    V0_2,
}

impl Version {
    /// The world a component with `exports` targets: by the `tools` export it carries;
    /// with neither, 0.2.0 (whose check then names what is missing).
    pub(crate) fn of_exports(exports: &[String]) -> Self {
        let has = |name: &str| exports.iter().any(|e| e == name);
        if has(v0_1::TOOLS_EXPORT) && !has(v0_2::TOOLS_EXPORT) {
            Version::V0_1
        } else {
            Version::V0_2
        }
    }
}

/// Adds the imports of every version to `linker` (the host implements them all, so a
/// component built against any of them links).
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    v0_2::Plugin::add_to_linker::<PluginState, Imports>(linker, |state| &mut state.imports)?;
    v0_1::bindings::Plugin::add_to_linker::<PluginState, Imports>(linker, |state| {
        &mut state.imports
    })
}

/// A component pre-instantiated for the world it targets.
pub(crate) enum WorldPre {
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
        })
    }

    /// An instance in `store`.
    pub(crate) async fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Bound> {
        Ok(match self {
            WorldPre::V0_2(pre) => Bound::V0_2(pre.instantiate_async(store).await?),
            WorldPre::V0_1(pre) => Bound::V0_1(pre.instantiate_async(store).await?),
        })
    }
}

/// An instance of either world.
pub(crate) enum Bound {
    V0_2(v0_2::Plugin),
    V0_1(v0_1::Plugin),
}

impl Bound {
    /// The plugin's tool definitions, as 0.2.0's.
    pub(crate) async fn definitions(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<WitDefinition>> {
        match self {
            Bound::V0_2(plugin) => plugin.toolhost_plugin_tools().call_definitions(store).await,
            Bound::V0_1(plugin) => Ok(v0_1::definitions(
                plugin
                    .toolhost_plugin_tools()
                    .call_definitions(store)
                    .await?,
            )),
        }
    }

    /// Calls tool `name`; its result or error as 0.2.0's.
    pub(crate) async fn call(
        &self,
        store: &mut Store<PluginState>,
        name: &str,
        arguments: &str,
        env: &WitEnvironment,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        match self {
            Bound::V0_2(plugin) => {
                plugin
                    .toolhost_plugin_tools()
                    .call_call(store, name, arguments, env)
                    .await
            }
            Bound::V0_1(plugin) => {
                let result = plugin
                    .toolhost_plugin_tools()
                    .call_call(store, name, arguments, &v0_1::environment(env))
                    .await?;
                Ok(result.map_err(v0_1::tool_error))
            }
        }
    }
}
