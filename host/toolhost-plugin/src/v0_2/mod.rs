//! `toolhost:plugin@0.2.0` (`wit/legacy/plugin-0.2.0.wit`): the host bindings
//! generated from it (at this module's root) and the name of its `tools` export.
//!
//! The host's imports (`host/`) implement this version's traits and work with its types;
//! an older version adapts to them ([`super::v0_1`]). A component targeting this world
//! is instantiated and called through [`super::world`].
wasmtime::component::bindgen!({
    world: "toolhost:plugin/plugin@0.2.0",
    path: "../../wit/legacy/plugin-0.2.0.wit",
    exports: { default: async },
    // Storage work runs on the blocking pool and the guest awaits it, so a slow storage
    // holds no async worker and the call's deadline still fires (see host/files/).
    // `log` and `config` stay synchronous: they only format a line or copy a value.
    imports: { "toolhost:plugin/files": async },
});

/// The `tools` export of `toolhost:plugin@0.2.0`: a component carrying it targets this
/// world.
pub(crate) const TOOLS_EXPORT: &str = "toolhost:plugin/tools@0.2.0";
