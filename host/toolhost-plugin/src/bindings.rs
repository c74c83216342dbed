//! Host bindings generated from the WIT packages: `toolhost:plugin@0.2.0`
//! (`wit/plugin.wit`, at this module's root) and the frozen `toolhost:plugin@0.1.0`
//! (`wit/legacy/plugin-0.1.0.wit`, in [`v0_1`]). The linker holds the imports of both, so
//! a component built against either loads; the loader tells them apart by the `tools`
//! export they carry.
wasmtime::component::bindgen!({
    world: "plugin",
    path: "../../wit",
    exports: { default: async },
    // Storage work runs on the blocking pool and the guest awaits it, so a slow storage
    // holds no async worker and the call's deadline still fires (see host/files/).
    // `log` and `config` stay synchronous: they only format a line or copy a value.
    imports: { "toolhost:plugin/files": async },
});

/// `toolhost:plugin@0.1.0`: its imports are served by the 0.2.0 implementations
/// (host/legacy.rs converts the types), its exports are converted to 0.2.0's.
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({
        world: "toolhost:plugin/plugin@0.1.0",
        path: "../../wit/legacy/plugin-0.1.0.wit",
        exports: { default: async },
        imports: { "toolhost:plugin/files": async },
    });
}
