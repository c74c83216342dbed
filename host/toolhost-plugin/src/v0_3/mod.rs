//! `toolhost:plugin@0.3.0` (`wit/plugin.wit`), the current world: the host bindings
//! generated from it (in [`bindings`]), its imports (`host.rs`: `log`, `files` and
//! `config` served by the 0.2.0 implementations, `interaction` and `sampling` here), its `tool-result`
//! converted to the registry's [`ToolResult`](toolhost::registry::ToolResult)
//! (`result.rs`), and the optional `resources` and `prompts` exports of world
//! `rich-plugin`.
//!
//! One bindgen, of `rich-plugin` (the `plugin` world plus the two optional exports): a
//! component is pre-instantiated with the indices of each export it carries ([`Pre`]),
//! `tools` required, `resources` and `prompts` looked up only when the component
//! exports them, so a plain `plugin` component loads as well.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::Store;

use crate::state::PluginState;

mod host;
pub(crate) mod result;

/// The bindings generated from `toolhost:plugin@0.3.0`.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "toolhost:plugin/rich-plugin@0.3.0",
        path: "../../wit/plugin.wit",
        exports: { default: async },
        // `files` runs storage work on the blocking pool; `interaction` waits for the
        // client's user, `sampling` for its model, `registry` for the nested tool call.
        // All are awaited, so the call's deadline still fires.
        imports: {
            "toolhost:plugin/files": async,
            "toolhost:plugin/interaction": async,
            "toolhost:plugin/sampling": async,
            "toolhost:plugin/registry": async,
        },
    });
}

use bindings::exports::toolhost::plugin::{prompts, resources, tools};
pub(crate) use bindings::RichPlugin;

/// The `tools` export of `toolhost:plugin@0.3.0`: a component carrying it targets this
/// world.
pub(crate) const TOOLS_EXPORT: &str = "toolhost:plugin/tools@0.3.0";
/// The optional `resources` export (world `rich-plugin`).
pub(crate) const RESOURCES_EXPORT: &str = "toolhost:plugin/resources@0.3.0";
/// The optional `prompts` export (world `rich-plugin`).
pub(crate) const PROMPTS_EXPORT: &str = "toolhost:plugin/prompts@0.3.0";

/// A 0.3.0 component pre-instantiated: its `tools` export and, when it has them, its
/// `resources` and `prompts` exports.
pub(crate) struct Pre {
    instance_pre: InstancePre<PluginState>,
    tools: tools::GuestIndices,
    resources: Option<resources::GuestIndices>,
    prompts: Option<prompts::GuestIndices>,
}

impl Pre {
    /// The exports of `instance_pre`'s component.
    ///
    /// # Errors
    /// When it has no `tools` export of this version, or an optional export whose
    /// functions do not match.
    pub(crate) fn new(instance_pre: InstancePre<PluginState>) -> wasmtime::Result<Self> {
        let exports = |name: &str| {
            instance_pre
                .component()
                .get_export_index(None, name)
                .is_some()
        };
        let resources = if exports(RESOURCES_EXPORT) {
            Some(resources::GuestIndices::new(&instance_pre)?)
        } else {
            None
        };
        let prompts = if exports(PROMPTS_EXPORT) {
            Some(prompts::GuestIndices::new(&instance_pre)?)
        } else {
            None
        };
        Ok(Self {
            tools: tools::GuestIndices::new(&instance_pre)?,
            resources,
            prompts,
            instance_pre,
        })
    }

    /// An instance in `store`.
    pub(crate) async fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Plugin> {
        let instance: Instance = self.instance_pre.instantiate_async(&mut *store).await?;
        Ok(Plugin {
            tools: self.tools.load(&mut *store, &instance)?,
            resources: match &self.resources {
                Some(indices) => Some(indices.load(&mut *store, &instance)?),
                None => None,
            },
            prompts: match &self.prompts {
                Some(indices) => Some(indices.load(&mut *store, &instance)?),
                None => None,
            },
        })
    }
}

/// An instance of a 0.3.0 component: its exports.
pub(crate) struct Plugin {
    /// `tools`.
    pub tools: tools::Guest,
    /// `resources`, when exported.
    pub resources: Option<resources::Guest>,
    /// `prompts`, when exported.
    pub prompts: Option<prompts::Guest>,
}
